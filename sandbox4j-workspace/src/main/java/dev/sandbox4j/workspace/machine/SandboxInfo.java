package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A machine as {@link SupportsListing} shows it: the same facts from every provider, with what a
 * provider does not know left null, empty or 0. Providers build it with {@link #builder}.
 *
 * @param ref its ref
 * @param state {@code running}, {@code suspended} (every process frozen, memory kept), {@code
 *     stopped} (processes ended, files kept) or {@code hibernated} (processes saved to disk and
 *     ended, memory freed, files kept), which any operation on it wakes from; or a transient state
 *     the provider names (the local engine: {@code creating}/{@code destroying})
 * @param image the image it was created from, or null if the provider does not say
 * @param created when it was created, or null if the provider does not say
 * @param labels the labels it was created with
 * @param cpus its CPU quota, in CPUs
 * @param memoryBytes its memory limit
 * @param pids its limit on processes
 * @param diskBytes the byte quota of its writable layer; 0 when it has none (the local engine: made
 *     before sandboxes had disks) or the provider does not say
 * @param diskInodes the inode quota of its writable layer; 0 when {@code diskBytes} is
 * @param timers its timers, or null for a machine created without them (the local engine: before
 *     they existed, or by a fork)
 * @param workingDirectory where its commands start, or null where that belongs to each provider
 *     object rather than to the machine (the local engine)
 * @param networks the named networks it is on (empty: isolated, or the provider has none)
 * @param egress its egress mode ({@code none}, {@code all}, {@code allowlist}; the local engine
 *     also {@code loopback} for a sandbox made before sandboxes had networks), or null if the
 *     provider does not say
 * @param portUrl the URL serving its ports, with {@code {port}} standing for the port, or null if
 *     the provider does not serve them
 * @param isolation the boundary between its code and the host's kernel, which it keeps for life
 *     (the local engine and a server on it: {@code container} or {@code gvisor}), or null if the
 *     provider does not say
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
    long diskBytes,
    long diskInodes,
    SandboxTimers timers,
    String workingDirectory,
    List<String> networks,
    String egress,
    String portUrl,
    String isolation) {

  /** Checks the ref and state; copies the labels and networks (null becomes empty). */
  public SandboxInfo {
    Objects.requireNonNull(ref, "ref");
    Objects.requireNonNull(state, "state");
    labels = labels == null ? Map.of() : Map.copyOf(labels);
    networks = networks == null ? List.of() : List.copyOf(networks);
  }

  /** A builder for the machine {@code ref} in {@code state}; every other fact unknown. */
  public static Builder builder(WorkspaceRef ref, String state) {
    return new Builder(ref, state);
  }

  /** A builder starting from this info. */
  public Builder toBuilder() {
    return builder(ref, state)
        .image(image)
        .created(created)
        .labels(labels)
        .limits(cpus, memoryBytes, pids)
        .disk(diskBytes, diskInodes)
        .timers(timers)
        .workingDirectory(workingDirectory)
        .networks(networks)
        .egress(egress)
        .portUrl(portUrl)
        .isolation(isolation);
  }

  /** Builds a {@link SandboxInfo}; what is not set stays unknown (null, empty or 0). */
  public static final class Builder {
    private WorkspaceRef ref;
    private String state;
    private String image;
    private Instant created;
    private final Map<String, String> labels = new LinkedHashMap<>();
    private int cpus;
    private long memoryBytes;
    private int pids;
    private long diskBytes;
    private long diskInodes;
    private SandboxTimers timers;
    private String workingDirectory;
    private List<String> networks = List.of();
    private String egress;
    private String portUrl;
    private String isolation;

    private Builder(WorkspaceRef ref, String state) {
      ref(ref);
      state(state);
    }

    /** Its ref. */
    public Builder ref(WorkspaceRef ref) {
      this.ref = Objects.requireNonNull(ref, "ref");
      return this;
    }

    /** Its state, such as {@code running}. */
    public Builder state(String state) {
      this.state = Objects.requireNonNull(state, "state");
      return this;
    }

    /** The image it was created from, or null. */
    public Builder image(String image) {
      this.image = image;
      return this;
    }

    /** When it was created, or null. */
    public Builder created(Instant created) {
      this.created = created;
      return this;
    }

    /** Its labels, replacing any set before. */
    public Builder labels(Map<String, String> labels) {
      this.labels.clear();
      this.labels.putAll(Objects.requireNonNull(labels, "labels"));
      return this;
    }

    /** Its CPU quota, memory limit in bytes and limit on processes. */
    public Builder limits(int cpus, long memoryBytes, int pids) {
      this.cpus = cpus;
      this.memoryBytes = memoryBytes;
      this.pids = pids;
      return this;
    }

    /** The byte and inode quotas of its writable layer (0: none, or unknown). */
    public Builder disk(long bytes, long inodes) {
      this.diskBytes = bytes;
      this.diskInodes = inodes;
      return this;
    }

    /** Its timers, or null for none. */
    public Builder timers(SandboxTimers timers) {
      this.timers = timers;
      return this;
    }

    /** Where its commands start, or null. */
    public Builder workingDirectory(String workingDirectory) {
      this.workingDirectory = workingDirectory;
      return this;
    }

    /** The named networks it is on. */
    public Builder networks(List<String> networks) {
      this.networks = List.copyOf(Objects.requireNonNull(networks, "networks"));
      return this;
    }

    /** Its egress mode, or null. */
    public Builder egress(String egress) {
      this.egress = egress;
      return this;
    }

    /** The URL template serving its ports, or null. */
    public Builder portUrl(String portUrl) {
      this.portUrl = portUrl;
      return this;
    }

    /** Its isolation ({@code container}, {@code gvisor}), or null. */
    public Builder isolation(String isolation) {
      this.isolation = isolation;
      return this;
    }

    /** The info. */
    public SandboxInfo build() {
      return new SandboxInfo(
          ref,
          state,
          image,
          created,
          labels,
          cpus,
          memoryBytes,
          pids,
          diskBytes,
          diskInodes,
          timers,
          workingDirectory,
          networks,
          egress,
          portUrl,
          isolation);
    }
  }
}
