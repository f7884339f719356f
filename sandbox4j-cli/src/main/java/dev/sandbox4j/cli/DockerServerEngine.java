package dev.sandbox4j.cli;

import dev.sandbox4j.docker.DockerSandbox;
import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.server.ServerEngine;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;

/**
 * {@code serve --provider docker}: the server's sandboxes as containers of a Docker daemon, each
 * create shaped by a {@link DockerSandbox.Builder}.
 *
 * <p>Every sandbox is on the daemon's egress network with the default policy (the public internet
 * through the engine's egress proxy; never the host, nor another sandbox, of any organization),
 * which the server's egress routes change; never on Docker's bridge, which would let one
 * organization's sandboxes reach another's and the host. Timers are the docker provider's. Docker
 * has no inode quota and no gVisor isolation: a create that asks for either is refused (the server
 * answers 501).
 */
final class DockerServerEngine implements ServerEngine {

  private final DockerSandbox provider;
  private final Consumer<String> progress;
  private final UnaryOperator<DockerSandbox.Builder> everyShape;

  /**
   * @param progress where progress of long work (importing the default image) goes
   */
  DockerServerEngine(Consumer<String> progress) {
    this(DockerSandbox.builder().progress(progress).build(), b -> b, progress);
  }

  /**
   * An engine on {@code provider}'s daemon whose every shape {@code everyShape} also applies to
   * before the request's fields (a test's label on every container it makes).
   */
  DockerServerEngine(
      DockerSandbox provider,
      UnaryOperator<DockerSandbox.Builder> everyShape,
      Consumer<String> progress) {
    this.provider = Objects.requireNonNull(provider, "provider");
    this.everyShape = Objects.requireNonNull(everyShape, "everyShape");
    this.progress = Objects.requireNonNull(progress, "progress");
  }

  /** A provider on {@link #provider}'s connection: one per shape, none with a pool of its own. */
  private DockerSandbox.Builder base() {
    return everyShape.apply(DockerSandbox.builder().daemonOf(provider).progress(progress));
  }

  @Override
  public DockerSandbox provider() {
    return provider;
  }

  @Override
  public DockerSandbox shaped(Shape s) {
    DockerSandbox.Builder b = base();
    if (s.diskInodes() != null) {
      throw new UnsupportedOperationException(
          "diskInodes: docker sandboxes have no inode quota (only diskBytes)");
    }
    if (s.isolation() == Isolation.GVISOR) {
      throw new UnsupportedOperationException(
          "isolation: docker sandboxes are containers of the Docker daemon's runtime, not gVisor"
              + " (ask for container, or leave isolation out)");
    }
    ShapeFields.ifSet("autoSuspendTimeoutMs", s.autoSuspendTimeout(), b::autoSuspendTimeout);
    ShapeFields.ifSet("sandboxTimeoutMs", s.sandboxTimeout(), b::sandboxTimeout);
    ShapeFields.ifSet("idleTimeoutMs", s.idleTimeout(), b::idleTimeout);
    ShapeFields.ifSet("deleteAfter", s.deleteAfter(), b::deleteAfter);
    ShapeFields.field(
        "image",
        () -> {
          // the published image 'default' is the provider's default image
          if (s.image() != null && !s.image().equals("default")) b.image(s.image());
        });
    ShapeFields.ifSet("snapshot", s.snapshot(), b::snapshot);
    ShapeFields.ifSet("cpus", s.cpus(), b::cpus);
    ShapeFields.ifSet("memoryBytes", s.memoryBytes(), b::memory);
    ShapeFields.ifSet("pids", s.pids(), b::pids);
    ShapeFields.ifSet("diskBytes", s.diskBytes(), b::disk);
    ShapeFields.field("env", () -> b.env(s.env()));
    ShapeFields.ifSet("workingDirectory", s.workingDirectory(), b::workingDirectory);
    ShapeFields.field("labels", () -> s.labels().forEach(b::label));
    try {
      return b.build();
    } catch (IllegalStateException e) {
      throw new IllegalArgumentException("snapshot: " + e.getMessage(), e);
    }
  }
}
