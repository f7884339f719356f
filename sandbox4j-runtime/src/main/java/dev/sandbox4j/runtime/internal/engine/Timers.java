package dev.sandbox4j.runtime.internal.engine;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * A sandbox's timers on disk, its activity stamp, and the tombstones of sandboxes that a timer
 * ended. The {@link Supervisor} enforces the timers; this class is what it and the engine share.
 *
 * <p>In {@code sandboxes/<id>/}: {@code timers.json} (the settings and the absolute deadline,
 * written once while the sandbox is created, before its record says {@code RUNNING}, so a sandbox
 * that exists for its users always has it if it was created with timers) and {@code activity}, an
 * empty file whose modification time is the last time anyone saw the sandbox busy: the engine
 * touches it when an operation (command or file operation) starts and when a command ends, the
 * supervisor when it sees a command running or CPU use above {@link Supervisor#BUSY_CPU}. Because
 * both are files, any JVM and a restarted supervisor see the same thing.
 *
 * <p>In {@code ended/<id>.json}: why a timer ended sandbox {@code id}, so that using it afterwards
 * says so; {@code gc} removes tombstones older than {@link #TOMBSTONE_KEEP}.
 */
public final class Timers {
  /** The shortest and longest {@code sandboxTimeout}, and its default. */
  public static final Duration MIN_LIFETIME = Duration.ofSeconds(10);

  public static final Duration MAX_LIFETIME = Duration.ofHours(24);

  /** How long a tombstone is kept. */
  static final Duration TOMBSTONE_KEEP = Duration.ofDays(7);

  private static final System.Logger LOG = System.getLogger(Timers.class.getName());
  private static final ObjectMapper JSON =
      new ObjectMapper()
          .enable(SerializationFeature.INDENT_OUTPUT)
          .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  private Timers() {}

  /** A {@code sandboxTimeout}: from {@link #MIN_LIFETIME} to {@link #MAX_LIFETIME}. */
  public static Duration checkLifetime(Duration lifetime) {
    if (lifetime == null
        || lifetime.compareTo(MIN_LIFETIME) < 0
        || lifetime.compareTo(MAX_LIFETIME) > 0) {
      throw new IllegalArgumentException(
          "sandboxTimeout must be from 10 seconds to 24 hours, was " + lifetime);
    }
    return lifetime;
  }

  /** An idle timer ({@code what} names it): zero (never), or at least a second. */
  public static Duration checkIdle(Duration d, String what) {
    if (d == null || d.isNegative()) {
      throw new IllegalArgumentException(what + " must be zero (never) or positive, was " + d);
    }
    if (!d.isZero() && d.compareTo(Duration.ofSeconds(1)) < 0) {
      throw new IllegalArgumentException(what + " must be at least 1 second, was " + d);
    }
    return d;
  }

  /** What the builder asked for: durations (zero: off) and an optional point in time. */
  public record Config(
      Duration autoSuspendTimeout,
      Duration sandboxTimeout,
      Duration idleTimeout,
      Instant deleteAfter) {
    /** The engine's defaults: no idle timers, a 24-hour lifetime, no delete time. */
    public static final Config DEFAULT =
        new Config(Duration.ZERO, MAX_LIFETIME, Duration.ZERO, null);

    /** The settings of a sandbox created at {@code created}. */
    Settings at(Instant created) {
      Instant lifetimeEnds = created.plus(sandboxTimeout);
      return new Settings(
          1,
          autoSuspendTimeout.toMillis(),
          sandboxTimeout.toMillis(),
          idleTimeout.toMillis(),
          deleteAfter == null ? null : deleteAfter.toString(),
          created.toString(),
          lifetimeEnds.toString());
    }
  }

  /** {@code timers.json}. Millisecond durations, zero for off; instants as ISO-8601 strings. */
  public record Settings(
      int formatVersion,
      long autoSuspendMillis,
      long sandboxTimeoutMillis,
      long idleTimeoutMillis,
      String deleteAfter,
      String created,
      String lifetimeEnds) {

    public Duration autoSuspend() {
      return Duration.ofMillis(autoSuspendMillis);
    }

    Duration lifetime() {
      return Duration.ofMillis(sandboxTimeoutMillis);
    }

    public Duration idle() {
      return Duration.ofMillis(idleTimeoutMillis);
    }

    Optional<Instant> deleteAt() {
      return Optional.ofNullable(deleteAfter).map(Instant::parse);
    }

    Instant lifetimeEnd() {
      return Instant.parse(lifetimeEnds);
    }

    /** The earlier of the lifetime's end and {@code deleteAfter}. */
    public Instant ends() {
      Instant end = lifetimeEnd();
      Optional<Instant> delete = deleteAt();
      return delete.isPresent() && delete.get().isBefore(end) ? delete.get() : end;
    }

    /** Why the sandbox must end at {@code now} for a deadline, if it must. */
    public Optional<String> deadlinePassed(Instant now) {
      Optional<Instant> delete = deleteAt();
      if (delete.isPresent() && !now.isBefore(delete.get())) {
        return Optional.of("its deleteAfter time " + delete.get() + " passed");
      }
      if (!now.isBefore(lifetimeEnd())) {
        return Optional.of("its sandboxTimeout of " + human(lifetime()) + " passed");
      }
      return Optional.empty();
    }

    public SandboxTimers toPublic() {
      return new SandboxTimers(autoSuspend(), lifetime(), idle(), deleteAt().orElse(null), ends());
    }
  }

  // ---- per sandbox --------------------------------------------------------------------------

  /** The settings' file name in a sandbox's directory (the supervisor watches it). */
  public static final String SETTINGS_FILE = "timers.json";

  static Path settingsFile(Path sandboxDir) {
    return sandboxDir.resolve(SETTINGS_FILE);
  }

  static Path activityFile(Path sandboxDir) {
    return sandboxDir.resolve("activity");
  }

  /**
   * The writable layer of a new sandbox as {@code upper} makes it, plus its timers and a first
   * activity stamp: both written while the sandbox is created, under its lock.
   */
  public static Engine.UpperLayer creatingWith(Config config, Engine.UpperLayer upper) {
    return (dir, id) -> {
      write(dir, config);
      upper.prepare(dir, id);
    };
  }

  /**
   * Writes the timers of a sandbox created now into its directory, and a first activity stamp: what
   * any backend whose supervisor enforces them writes at create.
   */
  public static void write(Path sandboxDir, Config config) throws IOException {
    AtomicFiles.write(settingsFile(sandboxDir), JSON.writeValueAsBytes(config.at(Instant.now())));
    Files.write(activityFile(sandboxDir), new byte[0]);
  }

  /**
   * Gives a fork its parent's timers, if the parent has any: the same durations and delete time,
   * its lifetime counted from now, and a first activity stamp. Called while the fork is created,
   * under its lock.
   */
  public static void inherit(Path parentDir, Path forkDir) throws IOException {
    Optional<Settings> parent = read(parentDir);
    if (parent.isEmpty()) {
      return;
    }
    Settings p = parent.get();
    Config config = new Config(p.autoSuspend(), p.lifetime(), p.idle(), p.deleteAt().orElse(null));
    AtomicFiles.write(settingsFile(forkDir), JSON.writeValueAsBytes(config.at(Instant.now())));
    Files.write(activityFile(forkDir), new byte[0]);
  }

  /** The sandbox's timers, if it has any (sandboxes created before timers existed have none). */
  public static Optional<Settings> read(Path sandboxDir) {
    try {
      return Optional.of(
          JSON.readValue(Files.readAllBytes(settingsFile(sandboxDir)), Settings.class));
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      LOG.log(System.Logger.Level.WARNING, "unreadable " + settingsFile(sandboxDir) + ": " + e);
      return Optional.empty();
    }
  }

  /**
   * Stamps the sandbox as active now. Never creates its directory: a destroyed sandbox's is gone,
   * and a missing stamp is no error.
   */
  public static void touch(Path sandboxDir) {
    Path file = activityFile(sandboxDir);
    FileTime now = FileTime.from(Instant.now());
    try {
      Files.setLastModifiedTime(file, now);
    } catch (NoSuchFileException e) {
      if (Files.isRegularFile(settingsFile(sandboxDir))) {
        try {
          Files.write(file, new byte[0]);
        } catch (IOException gone) {
          // destroyed meanwhile
        }
      }
    } catch (IOException e) {
      // destroyed meanwhile
    }
  }

  /** When the sandbox was last seen busy; {@code fallback} if it has no stamp. */
  public static Instant lastActivity(Path sandboxDir, Instant fallback) {
    try {
      return Files.getLastModifiedTime(activityFile(sandboxDir)).toInstant();
    } catch (IOException e) {
      return fallback;
    }
  }

  /**
   * Ends sandbox {@code id} if one of its deadlines passed (for a JVM attaching while no supervisor
   * ran, after a reboot say) and throws the ended error; returns otherwise.
   */
  public static void endIfDeadlinePassed(Engine engine, String id) {
    Optional<Settings> settings = read(engine.dir(id));
    if (settings.isEmpty()) {
      return;
    }
    Optional<String> why = settings.get().deadlinePassed(Instant.now());
    if (why.isPresent()) {
      end(engine, id, why.get());
      throw ended(engine.home(), id).orElseThrow();
    }
  }

  /** Leaves a tombstone saying why, then destroys the sandbox. */
  public static void end(Engine engine, String id, String why) {
    leaveTombstone(engine.home(), id, why);
    engine.destroy(id);
    LOG.log(System.Logger.Level.INFO, "Ended local sandbox {0}: {1}", id, why);
  }

  // ---- tombstones ---------------------------------------------------------------------------

  /** {@code ended/<id>.json}. */
  record Tombstone(String id, String reason, String ended) {}

  private static Path tombstone(Path home, String id) {
    return home.resolve("ended").resolve(id + ".json");
  }

  /**
   * Records in {@code home} that sandbox {@code id} ended and why, before it is destroyed: what
   * {@link #ended} then tells whoever uses it. Any backend's.
   */
  public static void leaveTombstone(Path home, String id, String why) {
    Path tomb = tombstone(home, id);
    try {
      PrivateFiles.createPrivateDirectories(tomb.getParent());
      AtomicFiles.write(
          tomb, JSON.writeValueAsBytes(new Tombstone(id, why, Instant.now().toString())));
    } catch (IOException e) {
      LOG.log(System.Logger.Level.WARNING, "cannot write " + tomb + ": " + e);
    }
  }

  /** The error for using sandbox {@code id} if a timer ended it. */
  public static Optional<WorkspaceUnavailableException> ended(Path home, String id) {
    return ended(home, "local", id);
  }

  /** {@link #ended(Path, String)} for a sandbox of provider {@code provider}. */
  public static Optional<WorkspaceUnavailableException> ended(
      Path home, String provider, String id) {
    try {
      Tombstone t = JSON.readValue(Files.readAllBytes(tombstone(home, id)), Tombstone.class);
      return Optional.of(
          new WorkspaceUnavailableException(
              "sandbox "
                  + provider
                  + ":"
                  + id
                  + " ended: "
                  + t.reason()
                  + " (at "
                  + t.ended()
                  + ")"));
    } catch (IOException e) {
      return Optional.empty();
    }
  }

  /** Removes tombstones older than {@link #TOMBSTONE_KEEP}; returns what it removed. */
  public static List<String> gcTombstones(Path home) {
    List<String> removed = new ArrayList<>();
    Path dir = home.resolve("ended");
    if (!Files.isDirectory(dir)) {
      return removed;
    }
    Instant cutoff = Instant.now().minus(TOMBSTONE_KEEP);
    try (Stream<Path> files = Files.list(dir)) {
      for (Path f : files.toList()) {
        try {
          if (Files.getLastModifiedTime(f).toInstant().isBefore(cutoff)) {
            Files.deleteIfExists(f);
            removed.add("tombstone of ended sandbox " + f.getFileName());
          }
        } catch (IOException e) {
          // removed meanwhile
        }
      }
    } catch (IOException e) {
      // nothing to collect
    }
    return removed;
  }

  /** {@code 10s}, {@code 5m}, {@code 1h30m}, {@code 1500ms}. */
  public static String human(Duration d) {
    if (d.toMillisPart() != 0 || d.isZero()) {
      return d.toMillis() + "ms";
    }
    StringBuilder s = new StringBuilder();
    if (d.toHours() > 0) {
      s.append(d.toHours()).append('h');
    }
    if (d.toMinutesPart() > 0) {
      s.append(d.toMinutesPart()).append('m');
    }
    if (d.toSecondsPart() > 0) {
      s.append(d.toSecondsPart()).append('s');
    }
    return s.toString();
  }
}
