package dev.sandbox4j.remote;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Instant;
import java.util.Map;
import java.util.Objects;

/**
 * One sandbox on a server, as {@link RemoteSandbox#list()} and the lifecycle operations report it:
 * the same facts the local engine's {@code SandboxInfo} gives, plus the working directory.
 *
 * @param ref its ref, {@code remote:ID}
 * @param state {@code running}, {@code suspended}, {@code stopped}, {@code hibernated}, or a
 *     transient state the server names
 * @param image the image it started from
 * @param created when it was created
 * @param labels its labels
 * @param cpus its CPU quota
 * @param memoryBytes its memory limit
 * @param pids its process-count limit
 * @param workingDirectory where its commands start
 * @param timers its timers
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
    String workingDirectory,
    SandboxTimers timers) {

  /** Copies the labels; checks the fields a caller relies on. */
  public SandboxInfo {
    Objects.requireNonNull(ref, "ref");
    Objects.requireNonNull(state, "state");
    labels = labels == null ? Map.of() : Map.copyOf(labels);
  }
}
