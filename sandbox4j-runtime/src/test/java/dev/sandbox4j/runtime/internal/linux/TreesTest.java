package dev.sandbox4j.runtime.internal.linux;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.TestImages;
import dev.sandbox4j.runtime.internal.engine.IdBlocks;
import dev.sandbox4j.runtime.internal.engine.Lifecycle;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.RootfsOwnership;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link Trees#copy} (how a writable layer is copied for a fork or a snapshot) keeps what {@code cp
 * -a} keeps and never reads outside the tree, even while something swaps a directory for a symlink
 * to a host directory; {@link Trees#delete} never follows a symlink nor crosses a mount. Needs root
 * (owners, device nodes, trusted xattrs, mounts).
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class TreesTest {
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;
  private static final String SECRET = "host secret, never to be copied";

  @TempDir Path temp;

  @BeforeEach
  void requireRoot() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
  }

  /**
   * A fork's or snapshot's copy moves the owners from one sandbox's block of host ids to another's
   * (issue 13 item 4): every id of the source block lands at the same offset of the target block,
   * ids outside it are kept, symlinks and special files are changed themselves (never followed),
   * and setuid/setgid bits survive the chown.
   */
  @Test
  void aCopyShiftsOwnersFromOneBlockToAnother() throws Exception {
    int from = (int) IdBlocks.BASE;
    int to = (int) IdBlocks.BASE + 3 * 65536;
    Path src = Files.createDirectories(temp.resolve("from"));
    Path dir = Files.createDirectories(src.resolve("home/sandbox"));
    chown(src, from, from);
    chown(src.resolve("home"), from, from);
    chown(dir, from + 1000, from + 1000);
    Path suid = Files.writeString(src.resolve("rootsh"), "binary");
    chown(suid, from, from + 50);
    Files.setAttribute(suid, "unix:mode", 06755);
    Path outsider = Files.writeString(dir.resolve("host-root"), "x");
    chown(outsider, 0, 0);
    Path link = Files.createSymbolicLink(dir.resolve("link"), suid);
    chown(link, from + 1000, from + 1000);
    Path victim = Files.writeString(temp.resolve("victim"), "host file");
    chown(victim, 7, 7);
    Files.createSymbolicLink(src.resolve("escape"), victim);
    OverlayMarks.mknodWhiteout(dir.resolve("gone"));
    chown(dir.resolve("gone"), from + 1000, from + 1000);

    Path dst = temp.resolve("to");
    Trees.copy(src, dst, from, to);

    assertThat(owner(dst)).isEqualTo(List.of(to, to));
    assertThat(owner(dst.resolve("home/sandbox"))).isEqualTo(List.of(to + 1000, to + 1000));
    assertThat(owner(dst.resolve("rootsh"))).isEqualTo(List.of(to, to + 50));
    assertThat(Files.getAttribute(dst.resolve("rootsh"), "unix:mode", NOFOLLOW))
        .as("setuid and setgid kept through the chown")
        .isEqualTo(0100000 | 06755);
    assertThat(owner(dst.resolve("home/sandbox/host-root")))
        .as("an id outside the block is kept")
        .isEqualTo(List.of(0, 0));
    assertThat(owner(dst.resolve("home/sandbox/link"))).isEqualTo(List.of(to + 1000, to + 1000));
    assertThat(owner(dst.resolve("home/sandbox/gone"))).isEqualTo(List.of(to + 1000, to + 1000));
    assertThat(owner(victim)).as("a symlink's target is never changed").isEqualTo(List.of(7, 7));
    assertThat(owner(suid)).as("the source is left as it was").isEqualTo(List.of(from, from + 50));
  }

  @Test
  void aLayerIsShiftedBackToTheCanonicalIdsInPlace() throws Exception {
    int from = (int) IdBlocks.BASE + 65536;
    Path layer = Files.createDirectories(temp.resolve("layer/usr/bin"));
    chown(layer.getParent().getParent(), from, from);
    chown(layer.getParent(), from, from);
    chown(layer, from, from);
    Path sudo = Files.writeString(layer.resolve("sudo"), "binary");
    chown(sudo, from, from);
    Files.setAttribute(sudo, "unix:mode", 04755);
    Path victim = Files.writeString(temp.resolve("victim"), "host file");
    chown(victim, 7, 7);
    Files.createSymbolicLink(layer.resolve("escape"), victim);

    RootfsOwnership.shiftBlock(layer.getParent().getParent(), from, Image.UID_SHIFT);

    assertThat(owner(layer)).isEqualTo(List.of(Image.UID_SHIFT, Image.UID_SHIFT));
    assertThat(owner(sudo)).isEqualTo(List.of(Image.UID_SHIFT, Image.UID_SHIFT));
    assertThat(Files.getAttribute(sudo, "unix:mode", NOFOLLOW)).isEqualTo(0100000 | 04755);
    assertThat(owner(victim)).isEqualTo(List.of(7, 7));
  }

  private static List<Object> owner(Path p) throws IOException {
    return List.of(
        Files.getAttribute(p, "unix:uid", NOFOLLOW), Files.getAttribute(p, "unix:gid", NOFOLLOW));
  }

  @Test
  void aCopyKeepsOwnersModesTimesLinksXattrsSpecialFilesAndHoles() throws Exception {
    Path from = Files.createDirectories(temp.resolve("from"));
    Path dir = Files.createDirectories(from.resolve("etc/opaque"));
    OverlayMarks.setOpaque(dir);
    chown(dir, 100_123, 100_456);
    Files.setAttribute(dir, "unix:mode", 0751);
    Path suid = Files.writeString(from.resolve("etc/sudo"), "binary");
    chown(suid, 100_000, 100_000);
    Files.setAttribute(suid, "unix:mode", 04755);
    Files.setLastModifiedTime(suid, FileTime.from(Instant.parse("2001-02-03T04:05:06Z")));
    OverlayMarks.setXattr(suid, "user.note", "kept".getBytes(StandardCharsets.UTF_8));
    Files.createLink(from.resolve("etc/sudo-again"), suid);
    Files.createSymbolicLink(from.resolve("abs"), Path.of("/etc/passwd"));
    Files.createSymbolicLink(from.resolve("rel"), Path.of("../../../../etc"));
    chown(from.resolve("rel"), 101_000, 101_000);
    OverlayMarks.mknodWhiteout(from.resolve("etc/gone"));
    TestImages.run(List.of("mkfifo", from.resolve("fifo").toString()));
    try (RandomAccessFile sparse = new RandomAccessFile(from.resolve("sparse").toFile(), "rw")) {
      sparse.setLength(1L << 30);
      sparse.seek(1L << 29);
      sparse.write("middle".getBytes(StandardCharsets.UTF_8));
    }
    Files.setLastModifiedTime(dir, FileTime.from(Instant.parse("2002-03-04T05:06:07Z")));

    Path to = temp.resolve("to");
    Trees.copy(from, to);

    assertThat(describe(to)).isEqualTo(describe(from));
    assertThat(OverlayMarks.isOpaque(to.resolve("etc/opaque"))).isTrue();
    assertThat(OverlayMarks.getXattr(to.resolve("etc/sudo"), "user.note"))
        .hasValueSatisfying(
            v -> assertThat(new String(v, StandardCharsets.UTF_8)).isEqualTo("kept"));
    assertThat(Files.getAttribute(to.resolve("etc/sudo"), "unix:ino"))
        .as("hard links stay linked")
        .isEqualTo(Files.getAttribute(to.resolve("etc/sudo-again"), "unix:ino"));
    assertThat(blocks(to.resolve("sparse"))).as("a hole stays a hole").isLessThan(1024);
    try (RandomAccessFile sparse = new RandomAccessFile(to.resolve("sparse").toFile(), "r")) {
      byte[] middle = new byte[6];
      sparse.seek(1L << 29);
      sparse.readFully(middle);
      assertThat(new String(middle, StandardCharsets.UTF_8)).isEqualTo("middle");
    }
  }

  /**
   * The attack on a copy: while it runs, a directory of the tree is swapped again and again for a
   * symlink to a host directory holding files of the same names. Nothing of the host's may end up
   * in a copy; a copy may fail instead.
   */
  @Test
  void aCopyNeverReadsThroughADirectorySwappedForASymlink() throws Exception {
    Path victim = Files.createDirectories(temp.resolve("victim"));
    Path from = Files.createDirectories(temp.resolve("from"));
    Path d = Files.createDirectories(from.resolve("d"));
    // each copy's window spans thousands of swaps already; more files would only cost disk time
    for (int i = 0; i < 100; i++) {
      Files.writeString(d.resolve("f" + i), "sandbox's own " + i);
      Files.writeString(victim.resolve("f" + i), SECRET);
    }
    Path aside = from.resolve("d-aside");
    Path link = from.resolve("d-link");
    Files.createSymbolicLink(link, victim);
    AtomicBoolean stop = new AtomicBoolean();
    Thread swapper =
        Thread.ofPlatform()
            .start(
                () -> {
                  try (Beneath tree = Beneath.open(from)) {
                    byte[] dName = "d".getBytes(StandardCharsets.UTF_8);
                    byte[] asideName = "d-aside".getBytes(StandardCharsets.UTF_8);
                    byte[] linkName = "d-link".getBytes(StandardCharsets.UTF_8);
                    while (!stop.get()) {
                      NativeFs.renameat(tree.fd(), dName, tree.fd(), asideName);
                      NativeFs.renameat(tree.fd(), linkName, tree.fd(), dName);
                      NativeFs.renameat(tree.fd(), dName, tree.fd(), linkName);
                      NativeFs.renameat(tree.fd(), asideName, tree.fd(), dName);
                    }
                  } catch (IOException | NativeFs.Errno e) {
                    throw new IllegalStateException(e);
                  }
                });
    int copied = 0;
    int refused = 0;
    try {
      for (int i = 0; i < 40; i++) {
        Path to = temp.resolve("copy-" + i);
        try {
          Lifecycle.copyTree(from, to);
          copied++;
        } catch (dev.sandbox4j.workspace.WorkspaceException e) {
          refused++;
          assertThat(e).hasMessageContaining("changed while it was copied");
        }
        if (Files.exists(to, NOFOLLOW)) {
          assertThat(contents(to)).as("copy " + i).doesNotContain(SECRET);
          Trees.delete(to);
        }
      }
    } finally {
      stop.set(true);
      swapper.join();
    }
    assertThat(copied + refused).isEqualTo(40);
    assertThat(victim.resolve("f0")).hasContent(SECRET);
  }

  @Test
  void aDeleteRemovesSymlinksNotTheirTargetsAndStopsAtAMount() throws Exception {
    Path victim = Files.createDirectories(temp.resolve("victim"));
    Files.writeString(victim.resolve("keep"), SECRET);
    Path tree = Files.createDirectories(temp.resolve("tree/a/b"));
    Files.createSymbolicLink(tree.resolve("abs"), victim);
    Files.createSymbolicLink(tree.resolve("rel"), Path.of("../../../victim"));
    Path deep = temp.resolve("tree/deep");
    StringBuilder chain = new StringBuilder();
    for (int i = 0; i < Trees.DELETE_DEPTH * 3 + 7; i++) {
      chain.append("/d");
    }
    Files.createDirectories(Path.of(deep + chain.toString()));

    Trees.delete(temp.resolve("tree"));

    assertThat(temp.resolve("tree")).doesNotExist();
    assertThat(victim.resolve("keep")).hasContent(SECRET);

    Path mounted = Files.createDirectories(temp.resolve("mounted/m"));
    TestImages.run(List.of("mount", "--bind", victim.toString(), mounted.toString()));
    try {
      assertThatThrownBy(() -> Trees.delete(temp.resolve("mounted")))
          .isInstanceOf(IOException.class)
          .hasMessageContaining("a file system is mounted at");
      assertThat(victim.resolve("keep")).hasContent(SECRET);
    } finally {
      TestImages.run(List.of("umount", mounted.toString()));
    }
    Trees.delete(temp.resolve("mounted"));
    assertThat(temp.resolve("mounted")).doesNotExist();
  }

  @Test
  void aCopyCrossesFileSystems() throws Exception {
    // A sandbox's writable layer lives on a disk image of its own: a fork or a snapshot copies it
    // to another file system, where the kernel's copy_file_range answers EXDEV.
    Path source = Files.createDirectories(temp.resolve("other-fs"));
    TestImages.run(List.of("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", source.toString()));
    try {
      byte[] data = new byte[3 * 1024 * 1024 + 17];
      new java.util.Random(13).nextBytes(data);
      Files.write(source.resolve("data"), data);
      try (RandomAccessFile sparse =
          new RandomAccessFile(source.resolve("sparse").toFile(), "rw")) {
        sparse.seek(5L << 20);
        sparse.write(SECRET.getBytes(StandardCharsets.UTF_8));
      }

      Trees.copy(source, temp.resolve("copy"));

      assertThat(Files.readAllBytes(temp.resolve("copy/data"))).isEqualTo(data);
      byte[] sparse = Files.readAllBytes(temp.resolve("copy/sparse"));
      assertThat(sparse).hasSize((5 << 20) + SECRET.length());
      assertThat(new String(sparse, 5 << 20, SECRET.length(), StandardCharsets.UTF_8))
          .isEqualTo(SECRET);
    } finally {
      TestImages.run(List.of("umount", source.toString()));
    }
  }

  // ---- helpers ----------------------------------------------------------------------------------

  private static void chown(Path p, int uid, int gid) throws IOException {
    Files.setAttribute(p, "unix:uid", uid, NOFOLLOW);
    Files.setAttribute(p, "unix:gid", gid, NOFOLLOW);
  }

  private static long blocks(Path p) throws IOException, InterruptedException {
    return Long.parseLong(TestImages.run(List.of("stat", "-c", "%b", p.toString())).strip());
  }

  /** Each entry: type, mode, owner, times, size, link text, rdev (what {@code cp -a} keeps). */
  private static List<String> describe(Path root) throws IOException {
    List<String> out = new ArrayList<>();
    try (Stream<Path> walk = Files.walk(root)) {
      for (Path p : walk.sorted().toList()) {
        Map<String, Object> a =
            Files.readAttributes(p, "unix:mode,uid,gid,size,rdev,lastModifiedTime", NOFOLLOW);
        boolean dir = Files.isDirectory(p, NOFOLLOW);
        out.add(
            root.relativize(p)
                + " "
                + Integer.toOctalString((Integer) a.get("mode"))
                + " "
                + a.get("uid")
                + ":"
                + a.get("gid")
                + (dir ? "" : " size " + a.get("size") + " mtime " + a.get("lastModifiedTime"))
                + " rdev "
                + a.get("rdev")
                + (Files.isSymbolicLink(p) ? " -> " + Files.readSymbolicLink(p) : ""));
      }
    }
    return out;
  }

  private static String contents(Path root) throws IOException {
    StringBuilder all = new StringBuilder();
    try (Stream<Path> walk = Files.walk(root)) {
      for (Path p : walk.toList()) {
        if (Files.isRegularFile(p, NOFOLLOW)) {
          all.append(Files.readString(p)).append('\n');
        }
      }
    }
    return all.toString();
  }

  /**
   * Two deleters of one tree (a gc beside a destroy of the same {@code .destroyed-} directory) both
   * end without an error: a directory the other removed while this one listed it is gone, which is
   * what a delete wants. Ten rounds in CI (-Dtrees.rounds=N for a longer hunt: 30 took 40 s on a
   * loaded 2-core machine).
   */
  @Test
  void twoDeletersOfOneTreeBothSucceed() throws Exception {
    int rounds = Integer.getInteger("trees.rounds", 10);
    for (int round = 0; round < rounds; round++) {
      Path tree = temp.resolve("shared-" + round);
      // 80 directories for the deleters to race on; files cost the test (about a millisecond each
      // to create on CI's disks) more than they add to the race
      for (int d = 0; d < 40; d++) {
        Path dir = Files.createDirectories(tree.resolve("d" + d).resolve("inner"));
        for (int f = 0; f < 8; f++) {
          Files.writeString(dir.resolve("f" + f), "x");
        }
      }
      List<Throwable> failures = new java.util.concurrent.CopyOnWriteArrayList<>();
      java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
      List<Thread> deleters = new ArrayList<>();
      for (int t = 0; t < 3; t++) {
        deleters.add(
            Thread.ofPlatform()
                .start(
                    () -> {
                      try {
                        go.await();
                        Trees.delete(tree);
                      } catch (Throwable e) {
                        failures.add(e);
                      }
                    }));
      }
      go.countDown();
      for (Thread t : deleters) {
        t.join();
      }
      assertThat(failures).as("round " + round).isEmpty();
      assertThat(tree).doesNotExist();
    }
  }
}
