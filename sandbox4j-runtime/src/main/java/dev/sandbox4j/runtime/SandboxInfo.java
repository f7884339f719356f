package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Instant;
import java.util.Map;

/**
 * A sandbox as {@link LocalSandbox#list()} shows it.
 *
 * @param ref its ref, {@code local:<id>}
 * @param state {@code running}; {@code suspended} (every process frozen, memory kept), {@code
 *     stopped} (processes ended, files kept) or {@code hibernated} (processes saved to disk and
 *     ended, memory freed, files kept), which any operation on it wakes from; or {@code
 *     creating}/{@code destroying} while that happens (or if it was interrupted: {@code sandbox4j
 *     gc} removes those)
 * @param image the image it was created from
 * @param created when it was created
 * @param labels the labels it was created with
 * @param cpus its CPU quota, in CPUs
 * @param memoryBytes its memory limit
 * @param pids its limit on processes
 * @param timers its timers, or null for a sandbox created without them (before they existed, or by
 *     a fork)
 * @param networks the named networks it is on (empty: isolated)
 * @param egress its egress mode: {@code none}, {@code all}, {@code allowlist}, or {@code loopback}
 *     for a sandbox created before sandboxes had networks
 * @param portUrl the URL serving its ports, with {@code {port}} standing for the port: {@code
 *     http://{port}-<id>.localhost:<proxyPort>/} (see {@link LocalSandbox#url})
 * @param diskBytes the byte quota of its writable layer (its disk, see {@link
 *     LocalSandbox.Builder#disk}); 0 for a sandbox made before sandboxes had disks, whose writable
 *     layer has no quota at all (a fork of it gets the default)
 * @param diskInodes the inode quota of its writable layer; 0 when {@code diskBytes} is
 */
public record SandboxInfo(
    WorkspaceRef ref,
    String state,
    String image,
    Instant created,
    Map<String, String> labels,
    int cpus,
    long memoryBytes,
    int pids,
    SandboxTimers timers,
    java.util.List<String> networks,
    String egress,
    String portUrl,
    long diskBytes,
    long diskInodes) {

  /** Copies the labels and networks. */
  public SandboxInfo {
    labels = Map.copyOf(labels);
    networks = java.util.List.copyOf(networks);
  }

  static SandboxInfo of(
      SandboxRecord r, SandboxTimers timers, java.nio.file.Path dir, String portUrl) {
    String egress;
    java.util.List<String> networks;
    try {
      boolean has = Networks.saved(dir).isPresent();
      networks = Networks.networksOf(dir);
      egress =
          has ? Networks.policy(dir).mode().name().toLowerCase(java.util.Locale.ROOT) : "loopback";
    } catch (RuntimeException e) {
      networks = java.util.List.of(); // being created or destroyed
      egress = "unknown";
    }
    return new SandboxInfo(
        new WorkspaceRef(LocalSandbox.NAME, r.id()),
        r.status().name().toLowerCase(java.util.Locale.ROOT),
        r.image(),
        Instant.parse(r.created()),
        r.labels(),
        r.cpus(),
        r.memoryBytes(),
        r.pids(),
        timers,
        networks,
        egress,
        portUrl,
        r.diskBytes(),
        r.diskInodes());
  }
}
