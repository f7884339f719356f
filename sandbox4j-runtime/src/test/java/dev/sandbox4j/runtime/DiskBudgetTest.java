package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.Overlay;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.engine.SpareDisks;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 13, item 6: sandboxes' sparse disks together cannot take the home's file system below its
 * reserve ({@link SandboxDisk.Budget}). The home lives on a small file system of its own (a 1 GiB
 * ext4 image), so that filling it harms nothing else; sandboxes there write as attackers would, all
 * at once, until their writes fail.
 */
class DiskBudgetTest {
  private static final long MIB = 1L << 20;
  private static final long RESERVE = 256 * MIB;
  private static final long QUOTA = 160 * MIB;

  @TempDir Path temp;
  private Path mount;
  private Path home;
  private LocalSandbox sandboxes;
  private final List<WorkspaceRef> own = new ArrayList<>();

  @BeforeEach
  void setUp() throws Exception {
    Prerequisites.requireLocalEngine();
    TestImages.requireBusybox();
    Files.setPosixFilePermissions( // the sandboxes' root walks through it (see privateHome)
        temp, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
    Path fs = temp.resolve("fs.img");
    TestImages.run(List.of("mkfs.ext4", "-q", "-F", "-m", "0", fs.toString(), "1024M"));
    mount = Files.createDirectories(temp.resolve("fs"));
    TestImages.run(List.of("mount", "-o", "loop", fs.toString(), mount.toString()));
    home = TestImages.privateHome(mount);
    LocalSandbox setup = LocalSandbox.builder().home(home).progress(line -> {}).build();
    Path rootfs = TestImages.busyboxRootfs(temp.resolve("rootfs"));
    setup
        .engine()
        .images()
        .importArchive("bb", TestImages.tar(rootfs, temp.resolve("bb.tar")), line -> {});
  }

  @AfterEach
  void tearDown() throws Exception {
    if (sandboxes != null) {
      for (WorkspaceRef ref : own) {
        sandboxes.destroy(ref);
      }
    }
    if (home != null) {
      TestImages.destroyAllAndDelete(sandboxes, home);
      SpareDisks.Release.await();
    }
    if (mount != null && Overlay.isMounted(mount)) {
      TestImages.run(List.of("umount", mount.toString()));
    }
  }

  /**
   * At overcommit 1, creates are admitted only while every disk's remaining growth fits above the
   * reserve; then all the admitted sandboxes fill their disks at once, and the file system keeps
   * its reserve, every sandbox still runs commands, and a destroy lets a create in again.
   */
  @Test
  void sandboxesFillingTheirDisksTogetherLeaveTheReserve() throws Exception {
    sandboxes = provider(1);
    long above = free() - RESERVE;
    long perDisk = new SandboxDisk.Limit(QUOTA, 2048).imageBytes();
    int fits = (int) (above / perDisk);
    assertThat(fits).as("the test file system fits a few disks").isBetween(2, 6);

    List<Workspace> admitted = new ArrayList<>();
    for (int i = 0; i < fits; i++) {
      admitted.add(create());
    }
    assertThatThrownBy(this::create)
        .isInstanceOf(InsufficientDiskException.class)
        .hasMessageContaining("diskOvercommit")
        .hasMessageContaining("may still write");

    try (var pool = Executors.newFixedThreadPool(admitted.size())) {
      List<Future<CommandResult>> fills = new ArrayList<>();
      for (Workspace ws : admitted) {
        fills.add(
            pool.submit(
                () ->
                    ws.run(
                        Command.shell(
                            "i=0; while dd if=/dev/zero of=/home/sandbox/f$i bs=1048576 count=16"
                                + " 2>/tmp/err; do"
                                + " i=$((i+1)); done; cat /tmp/err >&2; sync; echo filled=$i"))));
      }
      for (Future<CommandResult> f : fills) {
        CommandResult r = f.get();
        assertThat(r.stdoutText()).contains("filled=");
        assertThat(r.stderrText()).contains("No space left on device");
      }
    }
    TestImages.run(List.of("sync"));
    assertThat(free())
        .as("the sandboxes' writes left the home's file system its reserve")
        .isGreaterThanOrEqualTo(RESERVE);
    for (Workspace ws : admitted) {
      assertThat(ws.run(Command.shell("echo alive")).stdoutText()).isEqualTo("alive\n");
    }

    WorkspaceRef first = own.removeFirst();
    sandboxes.destroy(first);
    SpareDisks.Release.await(); // its blocks return once its disk is unmounted
    create(); // there is room again
  }

  /** Overcommit is an operator's choice: above 1, more sandboxes are admitted. */
  @Test
  void overcommitAdmitsMoreAndBadFactorsAreRefused() throws Exception {
    sandboxes = provider(3);
    long above = free() - RESERVE;
    long perDisk = new SandboxDisk.Limit(QUOTA, 2048).imageBytes();
    int strict = (int) (above / perDisk);
    for (int i = 0; i <= strict; i++) {
      create(); // one more than overcommit 1 would admit
    }
    assertThatThrownBy(() -> LocalSandbox.builder().diskOvercommit(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("diskOvercommit");
    assertThatThrownBy(() -> LocalSandbox.builder().diskOvercommit(Double.NaN))
        .isInstanceOf(IllegalArgumentException.class);
  }

  private LocalSandbox provider(double overcommit) {
    return LocalSandbox.builder()
        .home(home)
        .image("bb")
        .disk(QUOTA)
        .diskInodes(2048)
        .diskReserve(RESERVE)
        .diskOvercommit(overcommit)
        .progress(line -> {})
        .build();
  }

  private Workspace create() {
    Workspace ws = Workspace.of(sandboxes.newBackend());
    own.add(ws.open());
    return ws;
  }

  private long free() throws Exception {
    return Files.getFileStore(home).getUsableSpace();
  }
}
