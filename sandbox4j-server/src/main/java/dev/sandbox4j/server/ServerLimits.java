package dev.sandbox4j.server;

import java.time.Duration;

/**
 * The per-organization limits, per-sandbox ceilings and isolation policy a server enforces; see
 * {@link SandboxServer.Builder}.
 */
record ServerLimits(
    int maxSandboxesPerOrganization,
    int createBurst,
    Duration createRefill,
    long maxJsonBytes,
    SandboxCeilings ceilings,
    IsolationPolicy isolation,
    RegistryAllowlist registries) {

  /** The defaults; the ceilings' come from the host when the server is built. */
  static final ServerLimits DEFAULTS =
      new ServerLimits(
          50,
          20,
          Duration.ofSeconds(1),
          1 << 20,
          null,
          IsolationPolicy.DEFAULT,
          RegistryAllowlist.NONE);
}
