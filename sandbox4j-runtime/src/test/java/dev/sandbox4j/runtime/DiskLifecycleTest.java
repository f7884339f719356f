package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.engine.SpareDisks;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Issue 13, item 6 (speed): a create claims a disk made ahead of time ({@link SpareDisks}) and a
 * destroy takes its disk out of the mount table at once and finishes the unmount off its path
 * ({@link SandboxDisk#release}). Checks that a claimed disk is a fresh one (never another
 * sandbox's, private like one made on the create's path), that nothing stays mounted or bound to a
 * loop device (read from {@code /proc/self/mountinfo} and {@code /sys/block/loop*}), and that gc
 * removes the spare files a dead process left.
 */
class DiskLifecycleTest {
  private static final String LABEL = "sandbox4j.test";
  private static final String TAG = "spare-" + UUID.randomUUID().toString().substring(0, 8);
  private static final long QUOTA = 80L << 20; // a size no other test uses: pools of its own

  private static LocalSandbox sandboxes;
  private static Path home;
  private final List<WorkspaceRef> own = new ArrayList<>();

  @BeforeAll
  static void setUp() {
    Prerequisites.requireLocalEngine();
    sandboxes =
        LocalSandbox.builder()
            .label(LABEL, TAG)
            .disk(QUOTA)
            .diskInodes(4096)
            .progress(line -> {})
            .build();
    home = sandboxes.home();
  }

  @AfterEach
  void destroy() {
    for (WorkspaceRef ref : own) {
      sandboxes.destroy(ref);
    }
    own.clear();
  }

  /**
   * After a first create of a size, spares of that size are made in the background; the next
   * create's disk is one of them (the same file), empty, 0600, though the sandbox before it wrote
   * into a disk of the same size and was destroyed.
   */
  @Test
  void aCreateClaimsAFreshSpareNeverAUsedDisk() throws Exception {
    Workspace first = create();
    WorkspaceRef firstRef = first.open();
    String firstId = firstRef.id();
    Path firstImage = dir(firstId).resolve(SandboxDisk.IMAGE);
    Object firstInode = Files.getAttribute(firstImage, "unix:ino");
    first.run(
        Command.shell("head -c 4M /dev/urandom > /home/sandbox/secret && echo marker > /tmp/m"));
    sandboxes.destroy(firstRef);
    own.remove(firstRef);

    Set<Object> spares = awaitSpares();
    assertThat(spares).doesNotContain(firstInode);
    for (Path spare : spareFiles()) {
      assertThat(Files.getPosixFilePermissions(spare, LinkOption.NOFOLLOW_LINKS))
          .as("a spare is private to root, as a sandbox's own disk")
          .isEqualTo(PosixFilePermissions.fromString("rw-------"));
    }

    Workspace second = create();
    String id = second.open().id();
    Path image = dir(id).resolve(SandboxDisk.IMAGE);
    assertThat(Files.getAttribute(image, "unix:ino"))
        .as("the create took a spare made ahead of time")
        .isIn(spares);
    assertThat(Files.getPosixFilePermissions(image, LinkOption.NOFOLLOW_LINKS))
        .isEqualTo(PosixFilePermissions.fromString("rw-------"));
    assertThat(Files.getAttribute(image, "unix:uid")).isEqualTo(0);
    String seen =
        second
            .run(Command.shell("ls -A /home/sandbox; cat /tmp/m 2>&1; df -k / | tail -1"))
            .stdoutText();
    assertThat(seen).doesNotContain("secret").doesNotContain("marker\n");
    assertThat(SandboxDisk.isMounted(dir(id))).isTrue();
    assertThat(
            second
                .run(Command.shell("head -c 120M /dev/zero > /home/sandbox/big; echo status=$?"))
                .stdoutText())
        .as("the claimed disk has the quota asked for")
        .doesNotContain("status=0");
  }

  /**
   * A destroy leaves nothing in the mount table when it returns, and once the background unmounts
   * are done and the spares dropped, no loop device is bound to a file of this home.
   */
  @Test
  void destroyedDisksLeaveNoMountAndNoLoopDevice() throws Exception {
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      Workspace ws = create();
      ids.add(ws.open().id());
      ws.run(Command.shell("head -c 8M /dev/urandom > /home/sandbox/f; sync"));
    }
    for (WorkspaceRef ref : List.copyOf(own)) {
      sandboxes.destroy(ref);
      own.remove(ref);
    }
    for (String id : ids) {
      assertThat(mountsUnder(home.resolve("sandboxes")))
          .as("nothing of a destroyed sandbox is mounted once destroy returned")
          .noneMatch(m -> m.contains(id));
      assertThat(Files.exists(dir(id))).isFalse();
    }

    List<String> spares = SpareDisks.ours().stream().map(p -> p.getFileName().toString()).toList();
    SpareDisks.drop(home);
    assertThat(SpareDisks.Release.pending()).isZero();
    assertThat(spareFiles())
        .as("dropped spares leave no file")
        .noneMatch(f -> spares.contains(f.getFileName().toString()));
    // Only what this test made is looked for: other JVMs may use this home meanwhile, and the
    // loop device of a killed JVM's spare (CrashSafetyTest's, say) is released by the kernel some
    // time after its process died, when its detached mount is finally torn down.
    assertThat(loopDevicesBackedUnder(home))
        .as("no loop device is bound to a destroyed sandbox's disk or a spare of %s", spares)
        .noneMatch(d -> spares.stream().anyMatch(d::contains))
        .noneMatch(d -> ids.stream().anyMatch(d::contains));
    assertThat(mountsUnder(home))
        .as("nothing of the destroyed sandboxes or the spares is mounted")
        .noneMatch(m -> m.contains("/" + SandboxDisk.TEMPLATES + "/"))
        .noneMatch(m -> ids.stream().anyMatch(m::contains));
  }

  /** A spare file nobody holds (its process died) is removed by gc; one in use is not. */
  @Test
  void gcRemovesTheSpareFilesOfADeadProcessOnly() throws Exception {
    create().open();
    awaitSpares();
    Set<Path> live = new TreeSet<>(SpareDisks.ours()); // not another process's: they come and go
    assertThat(live).as("this JVM made spares").isNotEmpty();
    Path dead = home.resolve(SandboxDisk.TEMPLATES).resolve(SpareDisks.PREFIX + "deadbeef.img");
    Files.write(dead, new byte[4096], StandardOpenOption.CREATE_NEW);
    Files.setPosixFilePermissions(dead, PosixFilePermissions.fromString("rw-------"));

    List<String> removed = sandboxes.gc();

    assertThat(removed).anyMatch(r -> r.contains("deadbeef"));
    assertThat(Files.exists(dead)).isFalse();
    for (Path p : live) {
      assertThat(Files.exists(p)).as("this JVM's spare " + p + " is kept").isTrue();
      try (FileChannel c = FileChannel.open(p, StandardOpenOption.READ)) {
        assertThat(c.size()).isPositive();
      }
    }
  }

  private Workspace create() {
    Workspace ws = Workspace.of(sandboxes.newBackend());
    own.add(ws.open());
    return ws;
  }

  private static Path dir(String id) {
    return home.resolve("sandboxes").resolve(id);
  }

  /** Waits until this size's pool holds its spares; returns their inodes. */
  private static Set<Object> awaitSpares() throws Exception {
    long end = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (SpareDisks.ours().size() < SpareDisks.perSize() || SpareDisks.ready() == 0) {
      assertThat(System.nanoTime()).as("spares made within 60 s").isLessThan(end);
      Thread.sleep(50);
    }
    Set<Object> inodes = new java.util.HashSet<>();
    for (Path p : SpareDisks.ours()) {
      inodes.add(Files.getAttribute(p, "unix:ino"));
    }
    return inodes;
  }

  private static List<Path> spareFiles() throws IOException {
    Path disks = home.resolve(SandboxDisk.TEMPLATES);
    if (!Files.isDirectory(disks)) {
      return List.of();
    }
    try (Stream<Path> files = Files.list(disks)) {
      return files
          .filter(p -> p.getFileName().toString().startsWith(SpareDisks.PREFIX))
          .filter(p -> !p.getFileName().toString().contains("deadbeef"))
          .sorted()
          .toList();
    }
  }

  private static List<String> mountsUnder(Path dir) throws IOException {
    List<String> found = new ArrayList<>();
    for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
      String mountPoint = line.split(" ")[4];
      if (mountPoint.startsWith(dir + "/")) {
        found.add(mountPoint);
      }
    }
    return found;
  }

  /** Loop devices whose backing file (as the kernel names it now) is under {@code dir}. */
  static List<String> loopDevicesBackedUnder(Path dir) throws IOException {
    List<String> found = new ArrayList<>();
    try (Stream<Path> devices = Files.list(Path.of("/sys/block"))) {
      for (Path d : devices.filter(p -> p.getFileName().toString().startsWith("loop")).toList()) {
        Path backing = d.resolve("loop").resolve("backing_file");
        try {
          String file = Files.readString(backing).strip();
          if (file.startsWith(dir + "/")) {
            found.add(d.getFileName() + " " + file);
          }
        } catch (IOException unbound) {
          // no file bound
        }
      }
    }
    return found;
  }
}
