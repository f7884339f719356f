package dev.sandbox4j.server;

import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceProvider;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Objects;

/**
 * What a {@link SandboxServer} serves sandboxes of: a provider, and the one thing no capability
 * interface says, how to make a sandbox of the shape a create request asks for.
 *
 * <p>The server asks everything else of {@link #provider()} through the capability interfaces of
 * {@code dev.sandbox4j.workspace.machine}: listing (required), suspend, stop, hibernate, fork,
 * snapshots, timers and egress. A route whose capability the provider lacks answers 501 {@code
 * not_supported} naming the capability and the provider. Which sandbox belongs to which
 * organization is the server's own record, the same for every provider.
 *
 * <p>{@link #local} is the local engine; the CLI's {@code serve --provider docker} passes one on a
 * Docker daemon. Implementations are thread-safe; {@link #shaped} creates nothing (the server calls
 * it to validate a request before it admits it).
 */
public interface ServerEngine {

  /**
   * The provider whose sandboxes the server serves; it must implement {@link
   * dev.sandbox4j.workspace.machine.SupportsListing}.
   */
  WorkspaceProvider provider();

  /**
   * A provider of the same sandboxes (same name, same home or daemon) whose {@code newBackend()}
   * creates one sandbox of {@code shape}, whose {@code backend(ref)} attaches to an existing one
   * with the shape's {@code env} and {@code workingDirectory}, and whose fork (if it has one) gives
   * the copy the shape's env, working directory and labels where the provider keeps them in the
   * sandbox. Creates nothing, and is cheap: the server calls it once more per create, to check each
   * field before anything is looked up.
   *
   * @throws IllegalArgumentException if the provider refuses a value; the message starts with the
   *     request field it is about and a colon ({@code "cpus: must be 1 to 64, not 99"})
   * @throws UnsupportedOperationException if the provider cannot honour a field that is set; the
   *     message starts with the field and a colon, as above
   */
  WorkspaceProvider shaped(Shape shape);

  /** The local engine: {@code engine}'s home, disk reserve and overcommit, every other default. */
  static ServerEngine local(LocalSandbox engine) {
    return new LocalEngine(Objects.requireNonNull(engine, "engine"));
  }

  /**
   * A sandbox as a create request (or an attach, with only env and working directory) shapes it;
   * each field null (empty for the maps) where the request leaves it to the provider's default.
   * Sizes are already admitted under the server's ceilings; the names are the API's fields.
   *
   * @param image an image the operator published ({@code default}: the provider's default image)
   * @param snapshot the provider's name of the snapshot to start from; never with {@code image}
   * @param cpus the CPU quota
   * @param memoryBytes the memory limit
   * @param pids the limit on processes
   * @param diskBytes the byte quota of the writable layer
   * @param diskInodes the inode quota of the writable layer
   * @param env variables every command gets
   * @param workingDirectory where commands start
   * @param labels the sandbox's labels
   * @param autoSuspendTimeout idle time before it is suspended
   * @param sandboxTimeout its lifetime
   * @param idleTimeout idle time before it is destroyed
   * @param deleteAfter when it is destroyed
   * @param isolation the boundary between its code and the host's kernel, as the server's policy
   *     resolved the request's {@code isolation}; a provider that cannot give it refuses it ({@link
   *     UnsupportedOperationException} naming {@code isolation})
   */
  record Shape(
      String image,
      String snapshot,
      Integer cpus,
      Long memoryBytes,
      Integer pids,
      Long diskBytes,
      Long diskInodes,
      Map<String, String> env,
      String workingDirectory,
      Map<String, String> labels,
      Duration autoSuspendTimeout,
      Duration sandboxTimeout,
      Duration idleTimeout,
      Instant deleteAfter,
      Isolation isolation) {

    /** Copies the maps (null becomes empty). */
    public Shape {
      env = env == null ? Map.of() : Map.copyOf(env);
      labels = labels == null ? Map.of() : Map.copyOf(labels);
    }

    /** The shape of an attach to an existing sandbox: its env and working directory. */
    public static Shape attach(Map<String, String> env, String workingDirectory) {
      return new Shape(
          null,
          null,
          null,
          null,
          null,
          null,
          null,
          env,
          workingDirectory,
          null,
          null,
          null,
          null,
          null,
          null);
    }

    /** Names the env's variables, not their values: they may be a tenant's secrets. */
    @Override
    public String toString() {
      return "Shape[image="
          + image
          + ", snapshot="
          + snapshot
          + ", cpus="
          + cpus
          + ", memoryBytes="
          + memoryBytes
          + ", pids="
          + pids
          + ", diskBytes="
          + diskBytes
          + ", diskInodes="
          + diskInodes
          + ", env="
          + new java.util.TreeSet<>(env.keySet())
          + ", workingDirectory="
          + workingDirectory
          + ", labels="
          + labels
          + ", timers="
          + hasTimers()
          + ", isolation="
          + isolation
          + "]";
    }

    /** Whether any timer is set. */
    public boolean hasTimers() {
      return autoSuspendTimeout != null
          || sandboxTimeout != null
          || idleTimeout != null
          || deleteAfter != null;
    }
  }
}
