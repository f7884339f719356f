package dev.sandbox4j.server;

import dev.sandbox4j.runtime.LocalSandbox;
import java.util.List;
import java.util.Locale;

/**
 * The registries (or repository prefixes in them) whose images a create may name by reference, as
 * the operator allowed them ({@link SandboxServer.Builder#allowRegistry}): {@code docker.io},
 * {@code ghcr.io/acme}, {@code registry.internal:5000}. A reference is allowed when its canonical
 * form ({@code docker.io/library/python:3.12}) starts with an entry at a {@code /} boundary. None:
 * creates name published images only, and the server pulls nothing.
 *
 * <p>The server pulls with its own credentials (its user's {@code ~/.docker/config.json}): every
 * organization may use every image of an allowed registry or prefix, so an operator allows only
 * what all tenants may see.
 */
record RegistryAllowlist(List<String> entries) {
  static final RegistryAllowlist NONE = new RegistryAllowlist(List.of());

  RegistryAllowlist {
    entries = List.copyOf(entries);
  }

  /**
   * Checks and normalizes an entry given by the operator: {@code HOST[:PORT][/PATH]}, lower-case,
   * without a scheme, tag or digest.
   */
  static String checkEntry(String entry) {
    String e = entry == null ? "" : entry.strip().toLowerCase(Locale.ROOT);
    while (e.endsWith("/")) {
      e = e.substring(0, e.length() - 1);
    }
    if (e.isEmpty() || e.contains("://") || e.contains("@") || e.contains(" ")) {
      throw new IllegalArgumentException(
          "a registry to allow is HOST[:PORT][/PATH] (e.g. docker.io or ghcr.io/acme), not '"
              + entry
              + "'");
    }
    String host = e.contains("/") ? e.substring(0, e.indexOf('/')) : e;
    // Validated as the host of a reference would be: the runtime's parser decides.
    LocalSandbox.canonicalImageReference(host + "/x");
    return e.equals("index.docker.io") ? "docker.io" : e;
  }

  /** Whether canonical reference {@code reference} is in an allowed registry or prefix. */
  boolean allows(String reference) {
    for (String entry : entries) {
      if (reference.startsWith(entry + "/")) {
        return true;
      }
    }
    return false;
  }

  @Override
  public String toString() {
    return entries.isEmpty() ? "none" : String.join(", ", entries);
  }
}
