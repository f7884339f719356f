package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Exec;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The exec helper of gVisor sandboxes ({@code sandbox4j-execd --framed}) attacked from inside: the
 * sandbox user cannot open its pipes to the engine, signal it or trace it, nor its commands'
 * keepers, which hold nothing but {@code /dev/null}. (gVisor's {@code /proc} lets any user list
 * another user's descriptors; reopening one is checked against the file itself, and the engine's
 * pipes are root's, mode 0600.) Root inside (reached only through the engine: gVisor has no
 * set-user-ID programs) that kills the helper, stops it or writes forged frames on its pipe to the
 * engine gets it given up, the commands it ran killed, and a new helper for the next command, never
 * a hang.
 */
class GvisorExecHelperTest {
  private static final String LABEL = "sandbox4j.test";
  private static final String TAG = "gvexec-" + UUID.randomUUID().toString().substring(0, 8);

  /**
   * Prints the pid of each framed exec helper of the sandbox (cmdline is readable by anyone): a
   * process of that cmdline whose parent is not one too (the keepers, its forks, are).
   */
  private static final String HELPERS =
      """
      is() { case "$(tr '\\0' ' ' < /proc/$1/cmdline 2>/dev/null)" in
        *'sandbox4j-execd --framed'*) return 0;; esac; return 1; }
      for d in /proc/[0-9]*; do
        p=${d#/proc/}; is $p || continue
        pp=$(while read -r k v; do [ "$k" = PPid: ] && echo $v; done < $d/status)
        is "$pp" || echo $p
      done
      true
      """;

  /** Prints the pid of each process whose argv is exactly {@code sleep $1}. */
  private static String sleeping(String seconds) {
    return "for d in /proc/[0-9]*; do [ \"$(tr '\\0' ' ' < $d/cmdline 2>/dev/null)\" = 'sleep "
        + seconds
        + " ' ] && echo ${d#/proc/}; done; true";
  }

  private static LocalSandbox sandboxes;
  private static Workspace ws;

  @BeforeAll
  static void setUp() {
    Prerequisites.requireGvisor();
    sandboxes =
        LocalSandbox.builder()
            .isolation(Isolation.GVISOR)
            .label(LABEL, TAG)
            .progress(line -> {})
            .build();
    ws = Workspace.of(sandboxes.newBackend());
    ws.open();
  }

  @AfterAll
  static void tearDown() {
    if (ws != null) {
      sandboxes.destroy(ws.open());
    }
  }

  private static String sh(String script) {
    CommandResult r = ws.run(Command.shell(script));
    assertThat(r.exitCode()).as(script + ": " + r.stderrText()).isZero();
    return r.stdoutText().strip();
  }

  private static CommandResult asRoot(String script, Duration timeout) {
    return Exec.run(
        sandboxes.engine(),
        ws.open().id(),
        "0:0",
        "/",
        Engine.BASE_ENV,
        List.of("/bin/sh", "-c", script),
        RunOptions.withTimeout(timeout),
        System.nanoTime());
  }

  /** The one helper running; the command that asks runs through it (its keeper's parent). */
  private static String theHelper() {
    String[] found = sh(HELPERS).split("\\s+");
    assertThat(found).as("one framed exec helper runs in the sandbox").hasSize(1);
    assertThat(
            sh(
                "while read -r k v; do [ \"$k\" = PPid: ] && echo $v; done < /proc/$PPID/status; true"))
        .as("a command's keeper is a child of the helper: commands go through it")
        .isEqualTo(found[0]);
    return found[0];
  }

  /**
   * The helper's spare keeper (forked ahead for the next command): its one child of that cmdline
   * other than the asking command's keeper. It is made right after a command starts, so this waits
   * (boundedly) for it.
   */
  private static String theSpare(String helper) {
    String script =
        """
        for i in $(seq 200); do
          s=
          for d in /proc/[0-9]*; do
            p=${d#/proc/}; [ "$p" = "$PPID" ] && continue
            case "$(tr '\\0' ' ' < $d/cmdline 2>/dev/null)" in *'sandbox4j-execd --framed'*) ;; *) continue;; esac
            pp=$(while read -r k v; do [ "$k" = PPid: ] && echo $v; done < $d/status)
            [ "$pp" = @HELPER@ ] && s="$s $p"
          done
          [ -n "$s" ] && { echo $s; exit 0; }
          sleep 0.05
        done
        """
            .replace("@HELPER@", helper);
    String[] found = sh(script).split("\\s+");
    assertThat(found).as("one spare keeper waits beside the helper").hasSize(1);
    return found[0];
  }

  @Test
  void theSpareKeeperHoldsNothingOfTheEnginesAndRootKillingItCostsNoCommand() {
    sh("true");
    String helper = theHelper();
    String spare = theSpare(helper);
    assertThat(
            asRoot(
                    "for n in 0 1 2; do readlink /proc/" + spare + "/fd/$n; done",
                    Duration.ofSeconds(30))
                .stdoutText())
        .as("the spare's standard descriptors are /dev/null, not the helper's pipes to the engine")
        .isEqualTo("/dev/null\n/dev/null\n/dev/null\n");
    String attacks =
        """
        kill -0 @SPARE@ 2>/dev/null && echo "may signal the spare"
        python3 -c 'import ctypes,sys
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(16, int(sys.argv[1]), 0, 0) == 0: print("attached to the spare")' @SPARE@
        true
        """
            .replace("@SPARE@", spare);
    assertThat(sh(attacks)).as("what the sandbox user achieved against the spare").isEmpty();

    asRoot("kill -9 " + spare, Duration.ofSeconds(30));
    for (int i = 0; i < 3; i++) {
      assertThat(sh("echo run " + i)).isEqualTo("run " + i);
    }
    assertThat(theHelper()).as("the same helper serves on").isEqualTo(helper);
    assertThat(theSpare(helper)).as("a new spare is made").isNotEqualTo(spare);
  }

  @Test
  void theSandboxUserCannotReachSignalOrTraceTheHelperNorItsKeeper() {
    sh("true");
    String helper = theHelper();
    String attacks =
        """
        h=@HELPER@
        for n in 0 1; do
          (exec 3>"/proc/$h/fd/$n") 2>/dev/null && echo "opened the helper's fd $n for writing"
          (exec 3<"/proc/$h/fd/$n") 2>/dev/null && echo "opened the helper's fd $n for reading"
        done
        for p in $h $PPID; do
          kill -0 "$p" 2>/dev/null && echo "may signal $p"
          kill -9 "$p" 2>/dev/null && echo "killed $p"
          python3 -c 'import ctypes,sys
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(16, int(sys.argv[1]), 0, 0) == 0: print("attached to", sys.argv[1])' "$p"
        done
        for f in /proc/$PPID/fd/*; do
          [ -e "$f" ] || continue
          l=$(readlink "$f"); [ "$l" = /dev/null ] || echo "the keeper holds $l"
        done
        python3 -c 'import os
        print("fds", *sorted(os.listdir("/proc/%d/fd" % os.getppid()), key=int))'
        while read -r k v; do case $k in Uid:|CapEff:|CapPrm:) echo $k $v;; esac; done \
          < /proc/$$/status
        """
            .replace("@HELPER@", helper);
    assertThat(sh(attacks).lines().toList())
        .as("what the sandbox user achieved against the helper and its keeper")
        .containsExactly(
            "fds 0 1 2",
            "Uid: 1000 1000 1000 1000",
            "CapPrm: 0000000000000000",
            "CapEff: 0000000000000000");
    assertThat(theHelper()).as("the same helper serves on").isEqualTo(helper);
  }

  @Test
  void rootKillingTheHelperFailsTheCommandsItRanKillsThemAndTheNextCommandGetsANewOne()
      throws Exception {
    sh("true");
    String helper = theHelper();
    CompletableFuture<CommandResult> running =
        CompletableFuture.supplyAsync(
            () ->
                ws.run(
                    Command.shell("setsid sleep 301 & sleep 302; echo not killed"),
                    RunOptions.withTimeout(Duration.ofSeconds(60))));
    sh("until [ -n \"$(" + sleeping("302") + ")\" ]; do sleep 0.05; done");
    try {
      asRoot("kill -9 " + helper, Duration.ofSeconds(30));
    } catch (WorkspaceException killedItsOwnHelper) {
      assertThat(killedItsOwnHelper).hasMessageContaining("ended while the command ran");
    }
    assertThatThrownBy(() -> running.get(60, TimeUnit.SECONDS))
        .isInstanceOf(ExecutionException.class)
        .cause()
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("ended while the command ran")
        .hasMessageContaining("every process it started were killed");
    assertThat(sh(sleeping("301") + "; " + sleeping("302")))
        .as("the command's processes, setsid'd one included, are gone")
        .isEmpty();
    assertThat(theHelper()).as("a new helper serves").isNotEqualTo(helper);
  }

  @Test
  void forgedFramesFromRootAreAProtocolViolationAndANewHelperServes() {
    sh("true");
    String helper = theHelper();
    assertThatThrownBy(
            () ->
                asRoot(
                    "printf '\\377\\377\\377\\377\\0\\0\\0\\0\\0\\0\\0\\0' > /proc/"
                        + helper
                        + "/fd/1; sleep 5",
                    Duration.ofSeconds(30)))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("protocol violation");
    assertThat(theHelper()).as("a new helper serves").isNotEqualTo(helper);
  }

  @Test
  void aStoppedHelperDoesNotHangATimeoutAndANewHelperServes() {
    sh("true");
    String helper = theHelper();
    long start = System.nanoTime();
    // the command stops its own helper: its output and exit never arrive, its timeout fires, the
    // helper does not answer the kill, and the engine kills the command from a runsc exec
    assertThatThrownBy(
            () ->
                asRoot("kill -STOP " + helper + "; echo stopped; sleep 303", Duration.ofSeconds(2)))
        .isInstanceOf(WorkspaceTimeoutException.class);
    assertThat(Duration.ofNanos(System.nanoTime() - start))
        .as("bounded by the timeout and the helper's kill wait, not by the command")
        .isLessThan(Duration.ofSeconds(60));
    assertThat(sh(sleeping("303"))).as("the timed-out command's processes are gone").isEmpty();
    // the stopped one is still there, given up: root ends it, through the new one
    asRoot("kill -9 " + helper, Duration.ofSeconds(30));
    assertThat(theHelper()).as("a new helper serves").isNotEqualTo(helper);
  }
}
