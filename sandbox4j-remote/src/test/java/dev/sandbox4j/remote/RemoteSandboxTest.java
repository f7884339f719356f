package dev.sandbox4j.remote;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.oci.Gvisor;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceDirectoryNotEmptyException;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import dev.sandbox4j.workspace.WorkspaceOutputLimitException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What the remote provider adds to the workspace contract, against a real server on loopback: how
 * the server's errors map to workspace exceptions, other organizations, and the machine operations.
 */
class RemoteSandboxTest {

  private static LoopbackServer server;
  private final List<WorkspaceRef> made = new ArrayList<>();

  @BeforeAll
  static void startServer() {
    server = new LoopbackServer();
  }

  @AfterAll
  static void stopServer() {
    if (server != null) {
      server.close();
    }
  }

  @AfterEach
  void destroy() {
    RemoteSandbox remote = server.client().build();
    made.forEach(remote::destroy);
  }

  private Workspace newWorkspace(RemoteSandbox remote) {
    Workspace ws = Workspace.of(remote.newBackend());
    made.add(ws.open());
    return ws;
  }

  @Test
  void fileErrorsMapToTheirWorkspaceExceptions() {
    Workspace ws = newWorkspace(server.client().build());
    ws.writeText("f", "x");
    ws.createDirectories("d/sub");

    assertThatThrownBy(() -> ws.readText("missing"))
        .isInstanceOf(WorkspaceNoSuchFileException.class)
        .satisfies(e -> assertThat(((WorkspaceNoSuchFileException) e).path()).endsWith("/missing"));
    assertThatThrownBy(() -> ws.readText("d")).isInstanceOf(WorkspaceIsDirectoryException.class);
    assertThatThrownBy(() -> ws.list("f")).isInstanceOf(WorkspaceNotDirectoryException.class);
    assertThatThrownBy(() -> ws.createDirectories("f"))
        .isInstanceOf(WorkspaceFileAlreadyExistsException.class);
    assertThatThrownBy(() -> ws.remove("d"))
        .isInstanceOf(WorkspaceDirectoryNotEmptyException.class);
    assertThatThrownBy(() -> ws.writeText("/etc/passwd", "no"))
        .isInstanceOf(WorkspaceAccessDeniedException.class);
    ws.run(Command.argv("mkfifo", "fifo"));
    assertThatThrownBy(() -> ws.readText("fifo"))
        .as("any other file failure keeps its path")
        .isExactlyInstanceOf(WorkspaceFileException.class)
        .satisfies(e -> assertThat(((WorkspaceFileException) e).path()).endsWith("/fifo"));
  }

  @Test
  void badInputTheServerFindsNamesTheField() {
    RemoteSandbox unknownSnapshot = server.client().snapshot("no-such-snapshot").build();
    assertThatThrownBy(() -> Workspace.of(unknownSnapshot.newBackend()).open())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("snapshot");
    RemoteSandbox oddCpus = server.client().cpus(3).build();
    assertThatThrownBy(() -> Workspace.of(oddCpus.newBackend()).open())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("cpus");
  }

  @Test
  void anIsolationGoesToTheServerWhichJudgesIt() {
    RemoteSandbox unknown = server.client().isolation("vm").build();
    assertThatThrownBy(() -> Workspace.of(unknown.newBackend()).open())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("unknown isolation 'vm': expected one of container, gvisor");
    assertThatThrownBy(() -> server.client().isolation(" "))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("isolation");

    Prerequisites.require(
        Gvisor.unavailable().isEmpty(), Gvisor.unavailable().orElse("gVisor's runsc"));
    RemoteSandbox gvisor = server.client().isolation("gvisor").build();
    Workspace ws = newWorkspace(gvisor);
    assertThat(ws.run(Command.argv("uname", "-r")).stdoutText().strip())
        .as("gVisor's kernel")
        .isEqualTo("4.4.0");
    assertThat(gvisor.info(ws.ref().orElseThrow()).orElseThrow().isolation()).isEqualTo("gvisor");
  }

  @Test
  void aTimeoutCarriesThePartialOutputAndTheOutputLimitItsHead() {
    Workspace ws = newWorkspace(server.client().build());

    assertThatThrownBy(
            () ->
                ws.run(
                    Command.shell("echo before; echo err >&2; sleep 30"),
                    RunOptions.withTimeout(Duration.ofMillis(1500))))
        .isInstanceOfSatisfying(
            WorkspaceTimeoutException.class,
            e -> {
              assertThat(e.timeout()).isEqualTo(Duration.ofMillis(1500));
              assertThat(e.partialStdoutText()).isEqualTo("before\n");
              assertThat(e.partialStderrText()).isEqualTo("err\n");
            });
    assertThatThrownBy(
            () ->
                ws.run(
                    Command.shell("head -c 100000 /dev/zero | tr '\\0' a"),
                    RunOptions.builder().outputLimit(1000).build()))
        .isInstanceOfSatisfying(
            WorkspaceOutputLimitException.class,
            e -> {
              assertThat(e.limit()).isEqualTo(1000);
              assertThat(e.stdoutHeadText()).startsWith("aaaa");
            });
  }

  @Test
  void outputReachesTheCallbacksWhileTheCommandRuns() throws Exception {
    Workspace ws = newWorkspace(server.client().build());
    CompletableFuture<String> first = new CompletableFuture<>();
    CompletableFuture<CommandResult> result =
        CompletableFuture.supplyAsync(
            () ->
                ws.run(
                    Command.shell("echo first; while [ ! -e go ]; do sleep 0.05; done; echo done"),
                    RunOptions.builder()
                        .onStdout(chunk -> first.complete(new String(chunk)))
                        .timeout(Duration.ofSeconds(60))
                        .build()));
    assertThat(first.get(30, TimeUnit.SECONDS)).isEqualTo("first\n");
    assertThat(result).isNotDone();
    ws.writeText("go", "");
    assertThat(result.get(30, TimeUnit.SECONDS).stdoutText()).isEqualTo("first\ndone\n");
  }

  @Test
  void aDeletedSandboxIsUnavailableForNewBackendsAndOldOnes() {
    RemoteSandbox remote = server.client().build();
    Workspace ws = newWorkspace(remote);
    WorkspaceRef ref = ws.open();

    remote.destroy(ref);
    remote.destroy(ref); // idempotent

    assertThatThrownBy(() -> ws.run(Command.argv("true")))
        .isInstanceOf(WorkspaceUnavailableException.class)
        .hasMessageContaining(ref.toString());
    assertThatThrownBy(() -> ws.readText("x")).isInstanceOf(WorkspaceUnavailableException.class);
    assertThatThrownBy(() -> Workspace.of(remote.backend(ref).orElseThrow()).workingDirectory())
        .isInstanceOf(WorkspaceUnavailableException.class);
    assertThat(remote.info(ref)).as("a sandbox that is gone has no info").isEmpty();
  }

  @Test
  void anotherOrganizationsSandboxIsUnavailableAndUntouched() {
    Workspace mine = newWorkspace(server.client().build());
    mine.writeText("secret", "mine");
    RemoteSandbox theirs = server.client().apiKey(server.key("org-b")).build();
    WorkspaceRef ref = mine.open();

    assertThatThrownBy(() -> Workspace.of(theirs.backend(ref).orElseThrow()).readText("secret"))
        .isInstanceOf(WorkspaceUnavailableException.class);
    theirs.destroy(ref); // quietly: for them it does not exist
    assertThat(theirs.list()).extracting(SandboxInfo::ref).doesNotContain(ref);
    assertThat(mine.readText("secret")).isEqualTo("mine");
  }

  @Test
  void aWrongKeyIsRefusedWithoutShowingIt() {
    String wrong = "s4j_not-a-key-of-this-server-0000000000";
    RemoteSandbox remote = server.client().apiKey(wrong).build();
    assertThatThrownBy(() -> Workspace.of(remote.newBackend()).open())
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("refused the API key")
        .hasMessageNotContaining(wrong);
    assertThatThrownBy(remote::list).hasMessageNotContaining(wrong);
  }

  @Test
  void aStreamCutByTheServerEndsWithAClearErrorNotAnExit() throws Exception {
    LoopbackServer own = new LoopbackServer();
    try {
      RemoteSandbox remote = own.client().build();
      Workspace ws = Workspace.of(remote.newBackend());
      WorkspaceRef ref = ws.open();
      try {
        CompletableFuture<String> started = new CompletableFuture<>();
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        Thread caller =
            Thread.ofPlatform()
                .start(
                    () -> {
                      try {
                        ws.run(
                            Command.shell("echo started; sleep 60"),
                            RunOptions.builder().onStdout(c -> started.complete("yes")).build());
                      } catch (Throwable t) {
                        thrown.set(t);
                      }
                    });
        started.get(30, TimeUnit.SECONDS);
        own.server.close();
        caller.join(Duration.ofSeconds(30));
        assertThat(caller.isAlive()).isFalse();
        assertThat(thrown.get())
            .isExactlyInstanceOf(WorkspaceException.class)
            .hasMessageContaining("the server closed the exec stream before the command ended");
      } finally {
        own.start();
        own.client().build().destroy(ref);
      }
    } finally {
      own.close();
    }
  }

  /**
   * A command silent for longer than the client's ping interval plus its pong wait (here 500 ms + 1
   * s) still completes on a live server: the server answers the pings, so a quiet command is never
   * mistaken for a lost connection.
   */
  @Test
  void aSilentCommandOutlivesThePingsOfItsConnection() {
    LoopbackServer own = new LoopbackServer();
    try {
      RemoteSandbox remote = own.client().pingInterval(Duration.ofMillis(500)).build();
      Workspace ws = Workspace.of(remote.newBackend());
      WorkspaceRef ref = ws.open();
      try {
        assertThat(ws.run(Command.shell("sleep 3.5; echo done")).stdoutText()).isEqualTo("done\n");
      } finally {
        remote.destroy(ref);
      }
    } finally {
      own.close();
    }
  }

  @Test
  void commandsReuseOneExecSocket() {
    LoopbackServer own = new LoopbackServer();
    try {
      RemoteSandbox remote = own.client().build();
      Workspace ws = Workspace.of(remote.newBackend());
      try {
        for (int i = 0; i < 20; i++) {
          assertThat(ws.run(Command.shell("echo " + i)).stdoutText()).isEqualTo(i + "\n");
        }
        assertThat(own.logged("GET", "/v1/sandboxes/{id}/exec")).isEqualTo(1);
        assertThat(own.loggedAtLeast("WS", "/v1/sandboxes/{id}/exec (command)", 20)).isEqualTo(20);
        // stdin cannot be read twice, so such a command takes a socket of its own
        CommandResult echoed =
            ws.run(
                Command.argv("cat"),
                RunOptions.builder().stdin("fed".getBytes(StandardCharsets.UTF_8)).build());
        assertThat(echoed.stdoutText()).isEqualTo("fed");
        assertThat(own.logged("GET", "/v1/sandboxes/{id}/exec")).isEqualTo(2);
      } finally {
        ws.ref().ifPresent(remote::destroy);
      }
    } finally {
      own.close();
    }
  }

  /**
   * The server closes each socket a millisecond after its command, so the client often takes a
   * pooled socket the server is closing just then. Whatever the order, a command runs exactly once
   * and none fails: one closed before the server took it goes over a new socket.
   */
  @Test
  void commandsOverSocketsTheServerClosesUnderThemRunExactlyOnce() {
    LoopbackServer own = new LoopbackServer(b -> b.execSocketIdle(Duration.ofMillis(1)));
    try {
      RemoteSandbox remote = own.client().build();
      Workspace ws = Workspace.of(remote.newBackend());
      try {
        int commands = 100;
        for (int i = 0; i < commands; i++) {
          assertThat(ws.run(Command.shell("echo " + i + " >> /tmp/ran")).exitCode()).isZero();
        }
        List<String> ran = List.of(ws.readText("/tmp/ran").split("\n"));
        assertThat(ran).hasSize(commands).doesNotHaveDuplicates();
        assertThat(own.loggedAtLeast("WS", "/v1/sandboxes/{id}/exec (command)", commands))
            .isEqualTo(commands);
        assertThat(own.logged("GET", "/v1/sandboxes/{id}/exec")).isGreaterThan(1);
      } finally {
        ws.ref().ifPresent(remote::destroy);
      }
    } finally {
      own.close();
    }
  }

  @Test
  void machineOperationsListFilterAndChangeState() {
    RemoteSandbox labelled = server.client().label("suite", "remote-test").build();
    Workspace ws = newWorkspace(labelled);
    WorkspaceRef ref = ws.open();
    RemoteSandbox remote = server.client().build();

    assertThat(remote.list(Map.of("suite", "remote-test"), null))
        .singleElement()
        .satisfies(
            s -> {
              assertThat(s.ref()).isEqualTo(ref);
              assertThat(s.state()).isEqualTo("running");
              assertThat(s.labels()).containsEntry("suite", "remote-test");
            });
    assertThat(remote.list(Map.of("suite", "another"), null)).isEmpty();

    remote.suspend(ref);
    assertThat(stateOf(remote, ref)).isEqualTo("suspended");
    assertThat(remote.list(Map.of("suite", "remote-test"), "suspended")).hasSize(1);
    assertThat(ws.run(Command.argv("echo", "awake")).stdoutText())
        .as("any use wakes a suspended sandbox")
        .isEqualTo("awake\n");
    remote.stop(ref);
    assertThat(stateOf(remote, ref)).isEqualTo("stopped");
    remote.start(ref);
    assertThat(stateOf(remote, ref)).isEqualTo("running");
    ws.run(Command.shell("nohup sleep 600 >/dev/null 2>&1 & echo $! > kept.pid"));
    remote.hibernate(ref);
    assertThat(stateOf(remote, ref)).isEqualTo("hibernated");
    assertThat(ws.run(Command.shell("kill -0 $(cat kept.pid) && echo restored")).stdoutText())
        .as("any use restores a hibernated sandbox with its processes")
        .isEqualTo("restored\n");
  }

  private static String stateOf(RemoteSandbox remote, WorkspaceRef ref) {
    return remote.info(ref).orElseThrow().state();
  }

  @Test
  void forkCopiesTheFilesIntoANewSandbox() {
    RemoteSandbox remote = server.client().build();
    Workspace ws = newWorkspace(remote);
    ws.writeText("note", "parent");

    ForkResult fork = remote.forkFiles(ws.open());
    made.add(fork.ref());
    Workspace child = Workspace.of(remote.backend(fork.ref()).orElseThrow());
    assertThat(fork.ref()).isNotEqualTo(ws.open());
    assertThat(child.readText("note")).isEqualTo("parent");
    child.writeText("note", "child");
    assertThat(ws.readText("note")).isEqualTo("parent");
  }
}
