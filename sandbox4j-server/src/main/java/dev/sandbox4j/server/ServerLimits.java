package dev.sandbox4j.server;

import java.time.Duration;

/** The per-organization limits a server enforces; see {@link SandboxServer.Builder}. */
record ServerLimits(
    int maxSandboxesPerOrganization, int createBurst, Duration createRefill, long maxJsonBytes) {

  static final ServerLimits DEFAULTS = new ServerLimits(50, 20, Duration.ofSeconds(1), 1 << 20);
}
