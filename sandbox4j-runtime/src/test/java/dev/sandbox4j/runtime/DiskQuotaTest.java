package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.engine.Overlay;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Issue 13, item 6: a sandbox's writable layer has a byte and an inode quota ({@link SandboxDisk}).
 * Code inside fills its disk as an attacker would (a big file, a flood of empty files); the write
 * fails inside with ENOSPC, the host's file system takes no more than the quota, the sandbox goes
 * on working, other sandboxes are untouched, and the quota holds after a fork, a snapshot, a stop
 * and start, a lost mount (a host reboot) and, where checkpoint/restore works, a live fork and a
 * hibernate.
 */
class DiskQuotaTest {
  private static final String LABEL = "sandbox4j.test";
  private static final String TAG = "disk-" + UUID.randomUUID().toString().substring(0, 8);
  private static final long MIB = 1L << 20;
  private static final long QUOTA = 64 * MIB;

  /** Writes N MiB of zeros to the file; prints the exit status and dd's complaint. */
  private static final String FILL = "head -c %dM /dev/zero > %s; echo status=$?";

  private static LocalSandbox small;
  private static LocalSandbox defaults;
  private final List<WorkspaceRef> own = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void setUp() {
    Prerequisites.requireLocalEngine();
    small =
        LocalSandbox.builder()
            .label(LABEL, TAG)
            .disk(QUOTA)
            .diskInodes(2048)
            .progress(line -> {})
            .build();
    defaults = LocalSandbox.builder().label(LABEL, TAG).progress(line -> {}).build();
  }

  @AfterEach
  void destroy() {
    for (WorkspaceRef ref : own) {
      small.destroy(ref);
    }
    own.clear();
  }

  @Test
  void writingPastTheByteQuotaFailsInsideAndTheHostKeepsOnlyTheQuota() throws Exception {
    Workspace ws = create(small);
    String id = ws.open().id();

    CommandResult full = ws.run(Command.shell(String.format(FILL, 200, "/home/sandbox/big")));
    assertThat(full.stdoutText()).doesNotContain("status=0");
    assertThat(full.stderrText()).contains("No space left on device");
    long written = Long.parseLong(check(ws, "stat -c %s /home/sandbox/big"));
    assertThat(written)
        .as("the sandbox wrote about its quota, not 200 MiB")
        .isBetween(QUOTA - 16 * MIB, QUOTA + 16 * MIB);
    assertThat(hostBytesOutsideTheDisk(id))
        .as("nothing the sandbox wrote landed on the host's file system outside its disk")
        .isLessThan(4 * MIB);
    assertThat(
            Long.parseLong(
                TestImages.run(
                        List.of("stat", "-c", "%b", dir(id).resolve(SandboxDisk.IMAGE).toString()))
                    .strip()))
        .as("the host holds at most the quota (and ext4's overhead) for it")
        .isLessThan((QUOTA + 24 * MIB) / 512);

    Workspace other = create(defaults);
    assertThat(check(other, String.format(FILL, 100, "/tmp/f") + "; stat -c %s /tmp/f"))
        .as("another sandbox is unaffected")
        .isEqualTo("status=0\n" + 100 * MIB);

    check(ws, "rm /home/sandbox/big");
    assertThat(check(ws, String.format(FILL, 32, "/home/sandbox/again")))
        .as("once it deletes, it can write again")
        .isEqualTo("status=0");
  }

  @Test
  void creatingFilesPastTheInodeQuotaFailsAndTheSandboxRecovers() {
    Workspace ws = create(small);
    CommandResult flood =
        ws.run(
            Command.shell(
                "mkdir /tmp/many && cd /tmp/many && i=0;"
                    + " while [ $i -lt 4000 ]; do touch f$i || break; i=$((i+1)); done; echo $i"));
    int made = Integer.parseInt(flood.stdoutText().strip());
    assertThat(made).as("files made of 4000 with an inode quota of 2048").isLessThan(2100);
    assertThat(flood.stderrText()).contains("No space left on device");

    check(ws, "rm -r /tmp/many");
    assertThat(check(ws, "touch /tmp/after && echo ok")).isEqualTo("ok");
  }

  @Test
  void theQuotaHoldsAfterAFilesOnlyForkAStopAndStartAndALostMount() {
    Workspace parent = create(small);
    WorkspaceRef parentRef = parent.open();
    assertThat(check(parent, String.format(FILL, 40, "/home/sandbox/forty"))).isEqualTo("status=0");

    ForkResult fork = small.forkFiles(parentRef);
    own.add(fork.ref());
    Workspace child = Workspace.of(small.backend(fork.ref()).orElseThrow());
    assertThat(check(child, "stat -c %s /home/sandbox/forty")).isEqualTo(Long.toString(40 * MIB));
    assertThat(check(child, String.format(FILL, 40, "/home/sandbox/more")))
        .as("the fork's copy counts against the fork's own quota")
        .isNotEqualTo("status=0");
    assertThat(check(parent, String.format(FILL, 16, "/home/sandbox/sixteen")))
        .as("what the fork wrote does not count against its parent")
        .isEqualTo("status=0");

    check(child, "rm -f /home/sandbox/more");
    small.stop(fork.ref());
    // A host reboot loses every mount; the image file keeps the data, and the next use mounts it.
    SandboxDisk.unmount(dir(fork.ref().id()));
    assertThat(Overlay.isMounted(dir(fork.ref().id()).resolve(SandboxDisk.MOUNT))).isFalse();
    small.start(fork.ref());
    assertThat(check(child, "stat -c %s /home/sandbox/forty")).isEqualTo(Long.toString(40 * MIB));
    assertThat(check(child, String.format(FILL, 40, "/home/sandbox/more")))
        .as("after a stop, a lost mount and a start")
        .isNotEqualTo("status=0");
  }

  @Test
  void aSandboxFromASnapshotKeepsTheQuota() {
    Workspace source = create(small);
    WorkspaceRef ref = source.open();
    check(source, "echo saved > /home/sandbox/mark");
    String name = "disk-" + TAG;
    small.snapshot(ref, name);
    try {
      LocalSandbox fromSnapshot =
          LocalSandbox.builder().label(LABEL, TAG).snapshot(name).progress(line -> {}).build();
      Workspace copy = create(fromSnapshot);
      assertThat(check(copy, "cat /home/sandbox/mark")).isEqualTo("saved");
      assertThat(check(copy, String.format(FILL, 100, "/home/sandbox/big")))
          .isNotEqualTo("status=0");
    } finally {
      small.removeSnapshot(name);
    }
  }

  @Test
  void theQuotaHoldsAfterALiveForkAndAHibernate() {
    var why = Checkpoints.unavailable(small.engine().runtime());
    Prerequisites.require(why.isEmpty(), "checkpoint/restore: " + why.orElse(""));
    Workspace parent = create(small);
    WorkspaceRef parentRef = parent.open();
    check(parent, "nohup sleep 600 >/dev/null 2>&1 </dev/null &");

    ForkResult fork = small.fork(parentRef);
    own.add(fork.ref());
    assertThat(fork.processesCopied()).as(fork.reason()).isTrue();
    Workspace child = Workspace.of(small.backend(fork.ref()).orElseThrow());
    assertThat(check(child, String.format(FILL, 100, "/home/sandbox/big")))
        .as("after a live fork")
        .isNotEqualTo("status=0");
    check(child, "rm /home/sandbox/big");

    small.hibernate(fork.ref());
    assertThat(check(child, "pgrep -x sleep >/dev/null && echo restored")).isEqualTo("restored");
    assertThat(check(child, String.format(FILL, 100, "/home/sandbox/big")))
        .as("after hibernate and wake")
        .isNotEqualTo("status=0");
  }

  @Test
  void aCreateBelowTheReserveIsRefusedWithATypedErrorAndLeavesNothing() {
    LocalSandbox starved =
        LocalSandbox.builder()
            .label(LABEL, TAG)
            .diskReserve(Long.MAX_VALUE)
            .progress(line -> {})
            .build();
    int before = starved.list().size();
    assertThatThrownBy(() -> Workspace.of(starved.newBackend()).open())
        .isInstanceOf(InsufficientDiskException.class)
        .hasMessageContaining("below the reserve");
    assertThat(starved.list()).hasSize(before);

    WorkspaceRef parent = create(small).open();
    assertThatThrownBy(() -> starved.forkFiles(parent))
        .as("a fork is a create too")
        .isInstanceOf(InsufficientDiskException.class);
  }

  @Test
  void quotasOutOfRangeAreRefusedNamingTheSetting() {
    assertThatThrownBy(() -> LocalSandbox.builder().disk(MIB))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("disk must be from 64 MiB");
    assertThatThrownBy(() -> LocalSandbox.builder().diskInodes(10))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("diskInodes");
    assertThatThrownBy(() -> LocalSandbox.builder().diskReserve(-1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("diskReserve");
  }

  private Workspace create(LocalSandbox provider) {
    Workspace ws = Workspace.of(provider.newBackend());
    own.add(ws.open());
    return ws;
  }

  private static Path dir(String id) {
    return small.home().resolve("sandboxes").resolve(id);
  }

  /** Bytes the sandbox's directory holds on the host's file system, not counting other mounts. */
  private static long hostBytesOutsideTheDisk(String id) throws Exception {
    Path d = dir(id);
    String out =
        TestImages.run(
            List.of(
                "du",
                "-s",
                "-x",
                "-B1",
                "--exclude=" + SandboxDisk.IMAGE,
                "--exclude=checkpoint",
                d.toString()));
    return Long.parseLong(out.strip().split("\\s+")[0]);
  }

  private static String check(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script));
    return r.stdoutText().strip();
  }
}
