package dev.sandbox4j.docker;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * Docker sandboxes' timers, enforced by the daemon's supervisor process against a real daemon: a
 * lifetime ends a sandbox and says why, idle ones are paused or ended, a running command keeps one
 * awake, a fork inherits them, and a sandbox without a network gets them too. Each test has
 * sandboxes of its own; those that wait seconds for a timer run concurrently with the rest of the
 * class (never with other classes, which may restart the supervisor).
 */
class DockerTimersTest {
  private static final String TAG = "timers-" + UUID.randomUUID().toString().substring(0, 8);
  private static DockerSandbox listing;
  private final List<WorkspaceRef> made = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void requireDaemon() {
    DockerPrerequisites.requireDaemon();
    listing = builder().build();
  }

  @AfterEach
  void destroyOwn() {
    made.forEach(listing::destroy);
  }

  @AfterAll
  static void noContainerIsLeft() {
    assertThat(DockerPrerequisites.containersLabelled(listing, TAG))
        .as("containers the tests left behind")
        .isEmpty();
  }

  private static DockerSandbox.Builder builder() {
    return DockerSandbox.builder().label("sandbox4j.test", TAG).memory(256L << 20).pids(128);
  }

  private Workspace create(DockerSandbox provider) {
    Workspace ws = Workspace.of(provider.newBackend());
    made.add(ws.open());
    return ws;
  }

  /** Polls {@code condition} every 200 ms until it holds or {@code limit} passes. */
  private static boolean within(Duration limit, BooleanSupplier condition) throws Exception {
    long end = System.nanoTime() + limit.toNanos();
    while (System.nanoTime() < end) {
      if (condition.getAsBoolean()) {
        return true;
      }
      Thread.sleep(200);
    }
    return condition.getAsBoolean();
  }

  private static String state(WorkspaceRef ref) {
    return listing.info(ref).map(i -> i.state()).orElse("gone");
  }

  @Test
  @Execution(ExecutionMode.CONCURRENT) // waits for timers: beside the others
  void aLifetimeEndsTheSandboxAndUsingItSaysWhy() throws Exception {
    DockerSandbox short10s = builder().sandboxTimeout(Duration.ofSeconds(10)).build();
    Workspace ws = create(short10s);
    WorkspaceRef ref = ws.open();
    SandboxTimers timers = short10s.timers(ref).orElseThrow();
    assertThat(timers.sandboxTimeout()).isEqualTo(Duration.ofSeconds(10));
    assertThat(listing.info(ref).orElseThrow().timers()).isEqualTo(timers);
    // a command still running at the deadline does not save it
    Thread.ofVirtual()
        .start(
            () -> {
              try {
                ws.run(Command.shell("sleep 60"));
              } catch (WorkspaceUnavailableException expected) {
                // ended under it
              }
            });
    assertThat(within(Duration.ofSeconds(30), () -> state(ref).equals("gone")))
        .as("ended by its lifetime")
        .isTrue();
    assertThatThrownBy(() -> ws.run(Command.shell("true")))
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining("docker:" + ref.id() + " ended: its sandboxTimeout of 10s passed");
  }

  @Test
  @Execution(ExecutionMode.CONCURRENT) // waits for timers: beside the others
  void anIdleSandboxIsPausedARunningCommandKeepsItAwakeAndAnyUseWakesIt() throws Exception {
    DockerSandbox pausing = builder().autoSuspendTimeout(Duration.ofSeconds(2)).build();
    Workspace ws = create(pausing);
    WorkspaceRef ref = ws.open();
    assertThat(ws.run(Command.shell("sleep 6; echo awake")).stdoutText())
        .as("a command of 6 s under a 2 s idle timer")
        .isEqualTo("awake\n");
    assertThat(within(Duration.ofSeconds(15), () -> state(ref).equals("suspended")))
        .as("paused once idle")
        .isTrue();
    assertThat(ws.run(Command.shell("echo back")).stdoutText()).isEqualTo("back\n");
    assertThat(state(ref)).isEqualTo("running");
  }

  @Test
  @Execution(ExecutionMode.CONCURRENT) // waits for timers: beside the others
  void cpuBoundWorkLeftInTheBackgroundKeepsASandboxAwake() throws Exception {
    DockerSandbox pausing = builder().autoSuspendTimeout(Duration.ofSeconds(2)).build();
    Workspace ws = create(pausing);
    WorkspaceRef ref = ws.open();
    // a script of its own, so that pkill finds it and not the container's entrypoint loop
    ws.run(
        Command.shell(
            "echo 'while :; do :; done' > /tmp/spin.sh; nohup sh /tmp/spin.sh >/dev/null 2>&1 &"));
    assertThat(within(Duration.ofSeconds(6), () -> !state(ref).equals("running")))
        .as("still running after 6 s of its own CPU work, no command of ours running")
        .isFalse();
    ws.run(Command.argv("pkill", "-f", "/tmp/spin[.]sh"));
    assertThat(within(Duration.ofSeconds(15), () -> state(ref).equals("suspended")))
        .as("paused once the work stopped")
        .isTrue();
  }

  /**
   * The supervisor's third sign of work, beside an exec and CPU used: a process runnable at its
   * pass, which a loaded host may give less than the CPU threshold (the engine's rule too).
   */
  @Test
  void theSupervisorSeesARunnableProcessInTheContainersCgroupAndNoneOnceItStops() throws Exception {
    Workspace ws = create(builder().noNetwork().build());
    long init = listing.inspect(ws.open().id()).getState().getPidLong();
    var cgroups = dev.sandbox4j.runtime.internal.linux.Cgroups.detect("docker");
    assertThat(within(Duration.ofSeconds(5), () -> !cgroups.anyRunnableInGroupOf(init)))
        .as("an idle container")
        .isTrue();
    ws.run(
        Command.shell(
            "echo 'while :; do :; done' > /tmp/spin.sh; nohup sh /tmp/spin.sh >/dev/null 2>&1 &"));
    assertThat(within(Duration.ofSeconds(5), () -> cgroups.anyRunnableInGroupOf(init)))
        .as("a spinning process, started by an exec that has ended")
        .isTrue();
    ws.run(Command.argv("pkill", "-f", "/tmp/spin[.]sh"));
    assertThat(within(Duration.ofSeconds(5), () -> !cgroups.anyRunnableInGroupOf(init)))
        .as("none once it stopped")
        .isTrue();
  }

  @Test
  void anIdleTimeoutEndsASandboxWithoutNetworkToo() throws Exception {
    DockerSandbox idle = builder().noNetwork().idleTimeout(Duration.ofSeconds(2)).build();
    Workspace ws = create(idle);
    WorkspaceRef ref = ws.open();
    assertThat(idle.timers(ref).orElseThrow().idleTimeout()).isEqualTo(Duration.ofSeconds(2));
    assertThat(within(Duration.ofSeconds(20), () -> state(ref).equals("gone")))
        .as("ended once idle")
        .isTrue();
    assertThatThrownBy(() -> idle.timers(ref))
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining("ended: it was idle for its idleTimeout of 2s");
  }

  @Test
  void aForkInheritsItsParentsTimersAndANetworklessSandboxHasNoneUnlessSet() {
    DockerSandbox timed = builder().idleTimeout(Duration.ofMinutes(5)).build();
    WorkspaceRef parent = create(timed).open();
    WorkspaceRef child = timed.fork(parent).ref();
    made.add(child);
    assertThat(timed.timers(child).orElseThrow().idleTimeout()).isEqualTo(Duration.ofMinutes(5));

    DockerSandbox plain = builder().noNetwork().build();
    assertThat(plain.timers(create(plain).open())).isEmpty();
  }
}
