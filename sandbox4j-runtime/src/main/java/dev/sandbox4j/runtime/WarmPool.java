package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.EnginePorts;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.workspace.WorkspaceException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * Sandboxes of one {@link LocalSandbox}'s shape, created ahead of need ({@link
 * LocalSandbox.Builder#warmPool}) so that a new backend's first operation only finishes a create.
 *
 * <p>A member is an {@linkplain Engine.Parked parked} sandbox: created by the same code as any
 * other (image, limits, egress policy, networks, working directory, port token, isolation), its
 * container running, but its create stopped short of its one durable step. Nothing runs in it but
 * its init, and nothing from outside reaches it: its record says {@code CREATING}, its lock is
 * held, {@code list} leaves it out, and its id was never shown to anyone. A claim finishes the
 * create ({@link Engine#commit}): timers from now, the record {@code RUNNING}, created now. So a
 * claimed sandbox is a new sandbox in every respect a user can observe but the time its create
 * took; the one thing a member has done is wait.
 *
 * <p>One thread per pool refills it, one create at a time, whenever it holds fewer than {@code
 * size}: the engine's own checks (disk reserve, the host-wide limits of all sandboxes' cgroup) hold
 * for members as for any sandbox. A create that fails is logged and retried after a pause that
 * doubles up to {@link #MAX_PAUSE}; meanwhile claims find the pool empty and the caller creates as
 * if there were none.
 *
 * <p>A member is used only while it is still what a create would make now: after the image is
 * rebuilt (other layers) it is discarded at its claim. {@link #close} discards the members, and so
 * does a shutdown hook when the JVM exits; a JVM killed outright leaves them as interrupted creates
 * (no lock held, record {@code CREATING}), which {@code gc} removes.
 */
final class WarmPool implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(WarmPool.class.getName());

  /** The longest pause between failed refills. */
  static final Duration MAX_PAUSE = Duration.ofMinutes(1);

  /**
   * How long after a claim the refill waits: a create takes most of a core for its duration, and
   * started at once it would share the CPU with the claimer's first commands (on this project's
   * 2-core machines that made a claimed sandbox's first command about twice as slow).
   */
  static final Duration REFILL_DELAY = Duration.ofMillis(200);

  private final LocalSandbox settings;
  private final int size;
  private final Deque<Engine.Parked> ready = new ArrayDeque<>(); // guarded by this
  private boolean closed; // guarded by this
  private boolean creating; // guarded by this: the filler is creating a member
  private long lastClaim; // guarded by this: System.nanoTime() of the last claim
  private Thread filler;
  private Thread shutdownHook;

  WarmPool(LocalSandbox settings, int size) {
    if (size < 1) {
      throw new IllegalArgumentException("a warm pool holds at least 1 sandbox, not " + size);
    }
    this.settings = Objects.requireNonNull(settings);
    this.size = size;
  }

  /** Starts filling the pool in the background. */
  synchronized void start() {
    filler = Thread.ofPlatform().daemon().name("sandbox4j-warm-pool").start(this::fill);
    shutdownHook = new Thread(this::close, "sandbox4j-warm-pool-shutdown");
    Runtime.getRuntime().addShutdownHook(shutdownHook);
  }

  /** How many members are ready now. */
  synchronized int ready() {
    return ready.size();
  }

  /**
   * A member's create finished as a sandbox created now ({@link Engine#commit}) for {@code
   * claimer}, a provider of the same shape but for labels, timers and env ({@link
   * LocalSandbox#sameSandboxesAs}): its labels, {@code finish} (its timers) done first. Empty if no
   * member is ready (the caller creates one instead). The filler replaces it in the background.
   */
  Optional<String> claim(LocalSandbox claimer, Engine.Finish finish) {
    Engine engine = settings.engine();
    Engine.Spec spec = claimer.spec();
    while (true) {
      Engine.Parked member;
      synchronized (this) {
        member = ready.pollFirst();
        lastClaim = System.nanoTime();
        notifyAll(); // the filler: one fewer
      }
      if (member == null) {
        return Optional.empty();
      }
      if (!current(engine, spec, member)) {
        LOG.log(
            System.Logger.Level.INFO,
            "Discarding warm sandbox {0}: its image has changed since it was made",
            member.id());
        discardQuietly(engine, member);
        continue;
      }
      String id = engine.commit(member, spec.labels(), finish);
      if (claimer.engine() != engine) {
        engine.stopExecHelper(
            id); // the claimer's engine runs its commands with a helper of its own
      }
      return Optional.of(id);
    }
  }

  /** Whether {@code member} runs on the layers a create would use now. */
  private static boolean current(Engine engine, Engine.Spec spec, Engine.Parked member) {
    List<String> layers =
        spec.layers() != null
            ? spec.layers()
            : engine.images().find(spec.image()).map(Image::layerIds).orElse(null);
    return Objects.equals(layers, member.record().layers());
  }

  private void fill() {
    int failures = 0;
    while (true) {
      synchronized (this) {
        while (!closed && (ready.size() >= size || sinceLastClaim() < REFILL_DELAY.toNanos())) {
          waitQuietly(
              ready.size() >= size
                  ? 0
                  : Math.max(1, (REFILL_DELAY.toNanos() - sinceLastClaim()) / 1_000_000));
        }
        if (closed) {
          return;
        }
        creating = true;
      }
      Engine.Parked member = null;
      try {
        Engine engine = settings.engine();
        member =
            engine.park(
                settings.spec(),
                settings.progress(),
                EnginePorts.creatingWith(settings.portToken(), Engine::prepareUpperLayer));
        engine.prepareExec(member.id()); // off the claim's path
        failures = 0;
      } catch (RuntimeException e) {
        failures++;
        LOG.log(
            failures == 1 ? System.Logger.Level.WARNING : System.Logger.Level.DEBUG,
            "The warm pool could not create a sandbox (failure "
                + failures
                + "); it tries again later and a claim meanwhile creates one afresh: "
                + e.getMessage());
      }
      if (member != null && isClosed()) {
        discardQuietly(settings.engine(), member); // before close() returns: it waits for this
        member = null;
      }
      synchronized (this) {
        creating = false;
        if (member != null) {
          ready.addLast(member);
        }
        notifyAll(); // close() may wait for this create
        if (member == null && failures > 0 && !closed) {
          waitQuietly(pause(failures).toMillis());
        }
      }
    }
  }

  /** Nanoseconds since the last claim; guarded by this. */
  private long sinceLastClaim() {
    return lastClaim == 0 ? Long.MAX_VALUE : System.nanoTime() - lastClaim;
  }

  private synchronized boolean isClosed() {
    return closed;
  }

  /** The pause after {@code failures} failed creates in a row: 1 s doubling up to a minute. */
  static Duration pause(int failures) {
    long seconds = 1L << Math.min(Math.max(failures - 1, 0), 6);
    return Duration.ofSeconds(Math.min(seconds, MAX_PAUSE.toSeconds()));
  }

  /**
   * Stops refilling and destroys the members ready now (after the create under way, if any). The
   * sandboxes it handed out are the callers'. Idempotent.
   */
  @Override
  public void close() {
    List<Engine.Parked> members;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      notifyAll();
      while (creating) {
        waitQuietly(0); // a create under way: the filler discards what it makes
      }
      members = new ArrayList<>(ready);
      ready.clear();
    }
    if (shutdownHook != null && Thread.currentThread() != shutdownHook) {
      try {
        Runtime.getRuntime().removeShutdownHook(shutdownHook);
      } catch (IllegalStateException shuttingDown) {
        // the hook runs anyway, and finds the pool closed
      }
    }
    if (!members.isEmpty()) {
      Engine engine = settings.engine();
      for (Engine.Parked member : members) {
        discardQuietly(engine, member);
      }
    }
  }

  private static void discardQuietly(Engine engine, Engine.Parked member) {
    try {
      engine.discard(member);
    } catch (WorkspaceException e) {
      LOG.log(
          System.Logger.Level.WARNING,
          "Could not destroy warm sandbox "
              + member.id()
              + " (`sandbox4j gc` removes it): "
              + e.getMessage());
    }
  }

  /** Waits on this pool's monitor; an interrupt ends the wait and is kept. */
  private void waitQuietly(long millis) {
    try {
      wait(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
