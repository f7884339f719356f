package dev.sandbox4j.boxd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.net.URI;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** boxd's own semantics through the client, against the fake: machines, states, snapshots. */
class BoxdSandboxTest {

  private static FakeBoxd boxd;
  private final List<WorkspaceRef> made = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void startFake() throws Exception {
    boxd = new FakeBoxd();
  }

  @AfterAll
  static void stopFake() {
    if (boxd != null) {
      boxd.close();
    }
  }

  @AfterEach
  void destroyMachines() {
    boxd.cutExecs = false;
    boxd.endExecsWithoutExit = false;
    boxd.noOutputLimit = Duration.ofMinutes(30);
    BoxdSandbox client = boxd.client().build();
    made.forEach(client::destroy);
  }

  private Workspace open(BoxdSandbox client) {
    Workspace ws = Workspace.of(client.newBackend());
    made.add(ws.open());
    return ws;
  }

  private static String sh(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script), RunOptions.withTimeout(Duration.ofSeconds(30)));
    assertThat(r.exitCode()).as("%s: %s", script, r.stderrText()).isZero();
    return r.stdoutText();
  }

  @Test
  void aNewMachineIsIsolatedSizedAndWaitedForThenRunsCommandsAsTheSeedSays() {
    BoxdSandbox client =
        boxd.client().vcpu(4).autoSuspendTimeout(Duration.ofSeconds(120)).env("A", "1").build();
    Workspace ws = open(client);
    var request = boxd.creates.getLast();
    assertThat(request.getIsolated()).as("the seed's machines are isolated").isTrue();
    assertThat(request.getConfig().getVcpu()).isEqualTo(4);
    assertThat(request.getConfig().getMemoryBytes()).isEqualTo(16L << 30);
    assertThat(request.getConfig().getSrf().getAutoSuspendTimeoutSecs()).isEqualTo(120);
    assertThat(request.getConfig().getSrf().getAutoDestroyTimeoutSecs())
        .as("no delete timer")
        .isZero();
    assertThat(client.info(ws.open())).get().extracting(SandboxInfo::state).isEqualTo("running");
    assertThat(ws.workingDirectory()).isEqualTo("/home/boxd");
    assertThat(sh(ws, "pwd; echo $A; sudo -n true && echo sudo-ok"))
        .isEqualTo("/home/boxd\n1\nsudo-ok\n");
    assertThat(client.list()).extracting(SandboxInfo::ref).contains(ws.open());
    assertThat(client.timers(ws.open()))
        .get()
        .satisfies(
            t -> {
              assertThat(t.autoSuspendTimeout()).isEqualTo(Duration.ofSeconds(120));
              assertThat(t.sandboxTimeout()).isZero();
            });
  }

  @Test
  void autoSuspendOffAndAutoDestroyAreSentAndReadBack() {
    BoxdSandbox client =
        boxd.client()
            .autoSuspendTimeout(Duration.ZERO)
            .autoDestroyTimeout(Duration.ofHours(2))
            .build();
    Workspace ws = open(client);
    var srf = boxd.creates.getLast().getConfig().getSrf();
    assertThat(srf.hasAutoSuspendTimeoutSecs()).as("0 is sent: it turns auto-suspend off").isTrue();
    assertThat(srf.getAutoSuspendTimeoutSecs()).isZero();
    assertThat(client.timers(ws.open()).orElseThrow().sandboxTimeout())
        .isEqualTo(Duration.ofHours(2));
  }

  @Test
  void aProjectWorkingDirectoryIsCreatedOnANewMachine() {
    Workspace ws = open(boxd.client().workingDirectory("/home/boxd/project").build());
    assertThat(sh(ws, "pwd")).isEqualTo("/home/boxd/project\n");
    Workspace elsewhere =
        Workspace.of(
            boxd.client()
                .workingDirectory("/home/boxd/other")
                .build()
                .backend(ws.open())
                .orElseThrow());
    assertThatThrownBy(elsewhere::workingDirectory)
        .as("the seed: a project path must already exist on a machine attached to")
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("does not exist");
  }

  @Test
  void aRefFromHistoryReattachesToTheSameMachine() {
    Workspace first = open(boxd.client().build());
    first.writeText("notes.txt", "kept");
    Workspace again = Workspace.of(boxd.client().build().backend(first.open()).orElseThrow());
    assertThat(again.readText("notes.txt")).isEqualTo("kept");
  }

  @Test
  void aForeignRefFailsEarly() {
    BoxdSandbox client = boxd.client().build();
    WorkspaceRef local = new WorkspaceRef("local", "abc");
    assertThat(client.backend(local)).isEmpty();
    assertThatThrownBy(() -> client.destroy(local))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("local");
    assertThatThrownBy(() -> client.suspend(local)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> client.backend(new WorkspaceRef("boxd", "a/b")))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aGoneMachineIsUnavailableAndNeverReplaced() {
    BoxdSandbox client = boxd.client().build();
    Workspace ws = open(client);
    WorkspaceRef ref = ws.open();
    client.destroy(ref);
    client.destroy(ref); // idempotent
    int creates = boxd.creates.size();
    Workspace again = Workspace.of(client.backend(ref).orElseThrow());
    assertThatThrownBy(again::workingDirectory).isInstanceOf(WorkspaceUnavailableException.class);
    assertThatThrownBy(() -> ws.run(Command.shell("true")))
        .isInstanceOf(WorkspaceUnavailableException.class);
    assertThat(boxd.creates).as("no empty replacement").hasSize(creates);
    Workspace unknown =
        Workspace.of(client.backend(new WorkspaceRef("boxd", "vm-never")).orElseThrow());
    assertThatThrownBy(unknown::workingDirectory).isInstanceOf(WorkspaceUnavailableException.class);
  }

  @Test
  void aMachineThatIsNotIsolatedOrOnANetworkIsRefused() {
    BoxdSandbox client = boxd.client().build();
    var shared = boxd.seed("shared-" + System.nanoTime() % 100000, false, List.of());
    var networked = boxd.seed("net-" + System.nanoTime() % 100000, true, List.of("team-net"));
    try {
      WorkspaceRef sharedRef = new WorkspaceRef("boxd", shared.id);
      assertThatThrownBy(
              () -> Workspace.of(client.backend(sharedRef).orElseThrow()).workingDirectory())
          .isInstanceOf(WorkspaceException.class)
          .hasMessageContaining("not isolated");
      assertThatThrownBy(() -> client.destroy(sharedRef)).hasMessageContaining("not isolated");
      WorkspaceRef netRef = new WorkspaceRef("boxd", networked.id);
      assertThatThrownBy(
              () -> Workspace.of(client.backend(netRef).orElseThrow()).workingDirectory())
          .hasMessageContaining("team-net");
    } finally {
      awaitRunning(shared);
      awaitRunning(networked);
      shared.engine.destroy(shared.local);
      networked.engine.destroy(networked.local);
      shared.destroyedAt = Instant.now();
      networked.destroyedAt = Instant.now();
    }
  }

  private static void awaitRunning(FakeBoxd.Machine m) {
    long end = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (m.local == null || !m.status.equals("running")) {
      assertThat(System.nanoTime()).isLessThan(end);
      Thread.onSpinWait();
    }
  }

  @Test
  void parkedMachinesAreWokenByTheNextCommand() {
    BoxdSandbox client = boxd.client().build();
    Workspace ws = open(client);
    WorkspaceRef ref = ws.open();
    sh(ws, "echo before > state");
    client.suspend(ref);
    client.suspend(ref); // idempotent
    assertThat(client.info(ref)).get().extracting(SandboxInfo::state).isEqualTo("suspended");
    assertThat(sh(ws, "cat state")).as("resumed for the command").isEqualTo("before\n");
    client.stop(ref);
    assertThat(client.info(ref)).get().extracting(SandboxInfo::state).isEqualTo("stopped");
    assertThat(sh(ws, "cat state")).as("started for the command, disk kept").isEqualTo("before\n");
    client.suspend(ref);
    ws.writeText("written.txt", "while parked");
    assertThat(ws.readText("written.txt"))
        .as("a write (a command with stdin) wakes the machine before its stdin is read")
        .isEqualTo("while parked");
    client.stop(ref);
    client.start(ref);
    client.suspend(ref);
    client.resume(ref);
    client.wake(ref);
    assertThat(client.info(ref)).get().extracting(SandboxInfo::state).isEqualTo("running");
  }

  @Test
  void aSnapshotIsPolledUntilReadyAndNewMachinesStartFromIt() {
    BoxdSandbox client = boxd.client().build();
    Workspace ws = open(client);
    ws.writeText("saved.txt", "from the snapshot");
    String name = "snap-" + System.nanoTime() % 100000;
    var info = client.snapshot(ws.open(), name);
    assertThat(info.name()).isEqualTo(name);
    assertThat(info.source()).isEqualTo(ws.open());
    assertThat(boxd.calls("GetSnapshot")).as("pending at first: polled").isGreaterThan(1);
    Workspace fromSnapshot = open(boxd.client().snapshot(name).build());
    assertThat(fromSnapshot.readText("saved.txt")).isEqualTo("from the snapshot");
    ws.writeText("saved.txt", "saved again");
    client.snapshot(ws.open(), name);
    Workspace fromNewVersion = open(boxd.client().snapshot(name).build());
    assertThat(fromNewVersion.readText("saved.txt"))
        .as("re-saving under a name makes a new version, which new machines start from")
        .isEqualTo("saved again");
    assertThat(fromSnapshot.readText("saved.txt")).isEqualTo("from the snapshot");
    assertThat(client.removeSnapshot(name)).isTrue();
    assertThat(client.removeSnapshot(name)).isFalse();
    assertThatThrownBy(client::snapshots).isInstanceOf(UnsupportedOperationException.class);
  }

  @Test
  void aPendingOrUnknownSnapshotIsUnavailableOnFirstUse() {
    boxd.snapshots.put(
        "still-saving",
        new FakeBoxd.Snapshot("still-saving", "none", Instant.now().plus(Duration.ofHours(1)), 2));
    Workspace pending = Workspace.of(boxd.client().snapshot("still-saving").build().newBackend());
    assertThatThrownBy(pending::workingDirectory)
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining("pending");
    Workspace unknown =
        Workspace.of(boxd.client().snapshot("no-such-snapshot").build().newBackend());
    assertThatThrownBy(unknown::workingDirectory).isInstanceOf(WorkspaceUnavailableException.class);
    assertThatThrownBy(() -> boxd.client().snapshot("s").vcpu(2).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("snapshot");
  }

  @Test
  void uploadStreamsBinaryBytesAndCreatesParents() {
    BoxdSandbox client = boxd.client().build();
    Workspace ws = open(client);
    byte[] data = new byte[700 * 1024 + 3]; // several frames
    new Random(7).nextBytes(data);
    assertThat(client.upload(ws.open(), "/home/boxd/new/dir/blob.bin", data))
        .isEqualTo(data.length);
    assertThat(ws.readBytes("new/dir/blob.bin")).isEqualTo(data);
  }

  @Test
  void aStreamCutMidwayIsAFailureNotAResult() {
    Workspace ws = open(boxd.client().build());
    boxd.cutExecs = true;
    assertThatThrownBy(() -> ws.run(Command.shell("echo partial; sleep 5; echo never")))
        .isExactlyInstanceOf(WorkspaceException.class)
        .hasMessageContaining("UNAVAILABLE");
    boxd.cutExecs = false;
    assertThat(sh(ws, "echo still-up")).isEqualTo("still-up\n");
  }

  @Test
  void aStreamThatEndsWithoutAnExitFrameIsAFailureNotExitZero() {
    Workspace ws = open(boxd.client().build());
    boxd.endExecsWithoutExit = true;
    assertThatThrownBy(() -> ws.run(Command.shell("echo partial; sleep 5")))
        .isExactlyInstanceOf(WorkspaceException.class)
        .hasMessageContaining("without an exit code");
  }

  @Test
  void boxdDroppingASilentCommandIsATimeout() {
    boxd.noOutputLimit = Duration.ofSeconds(1);
    Workspace ws = open(boxd.client().noOutputLimit(Duration.ofMillis(1100)).build());
    assertThatThrownBy(
            () ->
                ws.run(
                    Command.shell("echo early; sleep 20"),
                    RunOptions.builder().noTimeout().build()))
        .isInstanceOfSatisfying(
            WorkspaceTimeoutException.class,
            e -> assertThat(e.partialStdoutText()).isEqualTo("early\n"));
  }

  @Test
  void aCommandSilentForTheNoOutputLimitEndsAsATimeout() {
    Workspace ws = open(boxd.client().noOutputLimit(Duration.ofSeconds(1)).build());
    assertThatThrownBy(
            () ->
                ws.run(
                    Command.shell("echo early; sleep 20"),
                    RunOptions.builder().noTimeout().build()))
        .isInstanceOfSatisfying(
            WorkspaceTimeoutException.class,
            e -> {
              assertThat(e.timeout()).isEqualTo(Duration.ofSeconds(1));
              assertThat(e.partialStdoutText()).isEqualTo("early\n");
            });
  }

  @Test
  void aMachineNameIsCheckedAndATakenOneRefused() {
    assertThatThrownBy(() -> boxd.client().machineName("Bad_Name"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> boxd.client().vcpu(3)).isInstanceOf(IllegalArgumentException.class);
    String name = "named-" + System.nanoTime() % 100000;
    Workspace ws = open(boxd.client().machineName(name).build());
    assertThat(boxd.client().build().publicUrl(ws.open()))
        .isEqualTo(URI.create("https://" + name + ".boxd.sh"));
    Workspace twin = Workspace.of(boxd.client().machineName(name).build().newBackend());
    assertThatThrownBy(twin::workingDirectory)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("ALREADY_EXISTS");
  }

  @Test
  void aBackgroundProcessOutlivesTheCommandThatStartedIt() {
    Workspace ws = open(boxd.client().build());
    sh(ws, "nohup sleep 300 >/dev/null 2>&1 & echo $! > bg.pid");
    assertThat(sh(ws, "kill -0 $(cat bg.pid) && echo alive"))
        .as("the command's end does not cancel its exec, which would kill what it left running")
        .isEqualTo("alive\n");
  }

  @Test
  void aTokenRevokedBetweenCommandsIsRenewedForTheNextExec() {
    Workspace ws = open(boxd.client().build());
    int exchanges = boxd.tokenExchanges.get();
    boxd.revokeTokens();
    assertThat(sh(ws, "echo renewed")).isEqualTo("renewed\n");
    assertThat(boxd.tokenExchanges.get()).isEqualTo(exchanges + 1);
  }

  @Test
  void theCommandLineQuotesEveryWord() {
    assertThat(
            BoxdCommandLine.of(
                Command.argv("printf", "%s", "it's $HOME"), "/home/boxd", Map.of("K", "v w")))
        .isEqualTo("cd -- '/home/boxd' && exec env -- 'K=v w' 'printf' '%s' 'it'\\''s $HOME'");
  }
}
