package dev.sandbox4j.server;

import dev.sandbox4j.runtime.LocalSandbox;

/**
 * {@link ServerEngine#local}: each shape a {@link LocalSandbox} on the engine's home, with its disk
 * reserve and overcommit; a value the builder refuses is named by its request field. A shape that
 * makes the sandboxes the engine makes takes them from the engine's warm pool, if it has one
 * ({@link LocalSandbox.Builder#warmPoolOf}): any tenant's labels and timers are set when it is
 * taken.
 */
final class LocalEngine implements ServerEngine {

  private final LocalSandbox engine;
  private final io.opentelemetry.api.OpenTelemetry openTelemetry; // null: the global one

  LocalEngine(LocalSandbox engine) {
    this(engine, null);
  }

  private LocalEngine(LocalSandbox engine, io.opentelemetry.api.OpenTelemetry openTelemetry) {
    this.engine = engine;
    this.openTelemetry = openTelemetry;
  }

  /** The same engine, the sandboxes of its shapes traced through {@code openTelemetry}. */
  LocalEngine tracedWith(io.opentelemetry.api.OpenTelemetry openTelemetry) {
    return new LocalEngine(engine, openTelemetry);
  }

  @Override
  public LocalSandbox provider() {
    return engine;
  }

  @Override
  public LocalSandbox shaped(Shape s) {
    LocalSandbox.Builder b =
        LocalSandbox.builder()
            .home(engine.home())
            .diskReserve(engine.diskReserve())
            .diskOvercommit(engine.diskOvercommit())
            .maxImageSize(engine.maxImageSize())
            .warmPoolOf(engine); // a shape like the engine's, the request's labels and timers
    if (openTelemetry != null) {
      b.openTelemetry(openTelemetry);
    }
    field(
        "image",
        () -> {
          if (s.image() != null) b.image(s.image());
        });
    field(
        "snapshot",
        () -> {
          if (s.snapshot() != null) b.snapshot(s.snapshot());
        });
    field(
        "cpus",
        () -> {
          if (s.cpus() != null) b.cpus(s.cpus());
        });
    field(
        "memoryBytes",
        () -> {
          if (s.memoryBytes() != null) b.memory(s.memoryBytes());
        });
    field(
        "pids",
        () -> {
          if (s.pids() != null) b.pids(s.pids());
        });
    field(
        "diskBytes",
        () -> {
          if (s.diskBytes() != null) b.disk(s.diskBytes());
        });
    field(
        "diskInodes",
        () -> {
          if (s.diskInodes() != null) b.diskInodes(s.diskInodes());
        });
    field("env", () -> b.env(s.env()));
    field(
        "workingDirectory",
        () -> {
          if (s.workingDirectory() != null) b.workingDirectory(s.workingDirectory());
        });
    field("labels", () -> s.labels().forEach(b::label));
    field(
        "autoSuspendTimeoutMs",
        () -> {
          if (s.autoSuspendTimeout() != null) b.autoSuspendTimeout(s.autoSuspendTimeout());
        });
    field(
        "sandboxTimeoutMs",
        () -> {
          if (s.sandboxTimeout() != null) b.sandboxTimeout(s.sandboxTimeout());
        });
    field(
        "idleTimeoutMs",
        () -> {
          if (s.idleTimeout() != null) b.idleTimeout(s.idleTimeout());
        });
    field(
        "deleteAfter",
        () -> {
          if (s.deleteAfter() != null) b.deleteAfter(s.deleteAfter());
        });
    field(
        "isolation",
        () -> {
          if (s.isolation() != null) {
            java.util.Optional<String> why = LocalSandbox.unavailable(s.isolation());
            if (why.isPresent()) {
              throw new UnsupportedOperationException("isolation: " + why.get());
            }
            b.isolation(s.isolation());
          }
        });
    try {
      return b.build();
    } catch (IllegalArgumentException e) {
      // what the builder checks as a whole is the snapshot's (it exists, it is complete)
      throw new IllegalArgumentException("snapshot: " + e.getMessage(), e);
    }
  }

  /** Runs a setter; what it refuses becomes {@code "field: why"}. */
  static void field(String name, Runnable setter) {
    try {
      setter.run();
    } catch (IllegalArgumentException | NullPointerException e) {
      throw new IllegalArgumentException(name + ": " + e.getMessage(), e);
    }
  }

  @Override
  public String toString() {
    return "ServerEngine.local(" + engine.home() + ")";
  }
}
