package dev.sandbox4j.runtime.internal.registry;

import java.util.Locale;
import java.util.regex.Pattern;

/**
 * A reference to an image in an OCI Distribution registry, {@code
 * [host[:port]/]path[:tag][@digest]}, normalized as the docker CLI does: no host means Docker Hub
 * ({@code docker.io}), a one-part path there means {@code library/} ({@code python} is {@code
 * docker.io/library/python}), and no tag and no digest means {@code :latest}. The first part is a
 * host when it has a {@code .} or a {@code :}, or is {@code localhost}.
 *
 * <p>The grammar is distribution's ({@code reference} package): path components of lower-case
 * letters and digits separated by {@code .}, {@code _}, {@code __} or dashes; a tag of up to 128
 * word characters, dots and dashes, not starting with either; a digest {@code sha256:} and 64 hex
 * digits (the only algorithm this client verifies).
 *
 * @param host the registry's host and optional port, lower-case ({@code docker.io} for Docker Hub)
 * @param repository the repository path ({@code library/python})
 * @param tag the tag, or null when only a digest was given
 * @param digest {@code sha256:...}, or null
 */
public record ImageReference(String host, String repository, String tag, String digest) {
  public static final String DOCKER_HUB = "docker.io";
  private static final int MAX_LENGTH = 255;
  private static final Pattern COMPONENT = Pattern.compile("[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*");
  private static final Pattern HOST =
      Pattern.compile(
          "(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
              + "|\\[[0-9A-Fa-f:.]+\\])(?::[0-9]{1,5})?");
  private static final Pattern TAG = Pattern.compile("[\\w][\\w.-]{0,127}");
  private static final Pattern DIGEST = Pattern.compile("sha256:[0-9a-f]{64}");

  /**
   * Parses {@code reference}.
   *
   * @throws IllegalArgumentException naming what is wrong with it
   */
  public static ImageReference parse(String reference) {
    if (reference == null || reference.isEmpty()) {
      throw new IllegalArgumentException("an image reference is empty");
    }
    if (reference.length() > MAX_LENGTH) {
      throw new IllegalArgumentException(
          "image reference of " + reference.length() + " characters (at most " + MAX_LENGTH + ")");
    }
    String rest = reference;
    String digest = null;
    int at = rest.indexOf('@');
    if (at >= 0) {
      digest = rest.substring(at + 1);
      rest = rest.substring(0, at);
      if (!DIGEST.matcher(digest).matches()) {
        throw invalid(reference, "its digest must be sha256: and 64 lower-case hex digits");
      }
    }
    String host = DOCKER_HUB;
    int slash = rest.indexOf('/');
    if (slash > 0) {
      String first = rest.substring(0, slash);
      if (first.contains(".") || first.contains(":") || first.equals("localhost")) {
        if (!HOST.matcher(first).matches()) {
          throw invalid(reference, "'" + first + "' is not a registry host[:port]");
        }
        host = first.toLowerCase(Locale.ROOT);
        rest = rest.substring(slash + 1);
      }
    }
    String tag = null;
    int colon = rest.lastIndexOf(':');
    if (colon >= 0) {
      tag = rest.substring(colon + 1);
      rest = rest.substring(0, colon);
      if (!TAG.matcher(tag).matches()) {
        throw invalid(
            reference,
            "its tag '"
                + tag
                + "' must be up to 128 letters, digits, _, . and -, not starting"
                + " with . or -");
      }
    }
    if (rest.isEmpty()) {
      throw invalid(reference, "it names no repository");
    }
    for (String component : rest.split("/", -1)) {
      if (!COMPONENT.matcher(component).matches()) {
        throw invalid(
            reference,
            "its path part '"
                + component
                + "' must be lower-case letters and digits, separated by '.', '_', '__' or '-'");
      }
    }
    if (host.equals(DOCKER_HUB) || host.equals("index.docker.io")) {
      host = DOCKER_HUB;
      if (!rest.contains("/")) {
        rest = "library/" + rest;
      }
    }
    if (tag == null && digest == null) {
      tag = "latest";
    }
    return new ImageReference(host, rest, tag, digest);
  }

  /** Whether {@code text} looks like a reference rather than a local image name. */
  public static boolean looksLikeReference(String text) {
    return text.contains("/") || text.contains(":") || text.contains("@");
  }

  /** The tag, or the digest if there is no tag: what to ask the registry's manifests for. */
  public String manifestReference() {
    return digest != null ? digest : tag;
  }

  /** The host to send requests to: Docker Hub's API is not at {@code docker.io}. */
  public String apiHost() {
    return host.equals(DOCKER_HUB) ? "registry-1.docker.io" : host;
  }

  /** The same repository at {@code digest}, keeping the tag it was named by. */
  public ImageReference withDigest(String digest) {
    return new ImageReference(host, repository, tag, digest);
  }

  /** The canonical form: {@code docker.io/library/python:3.12-slim}, with the digest if any. */
  @Override
  public String toString() {
    return host
        + "/"
        + repository
        + (tag != null ? ":" + tag : "")
        + (digest != null ? "@" + digest : "");
  }

  private static IllegalArgumentException invalid(String reference, String why) {
    return new IllegalArgumentException(
        "invalid image reference '" + printable(reference) + "': " + why);
  }

  private static String printable(String s) {
    return s.replaceAll("\\p{Cntrl}", "?");
  }
}
