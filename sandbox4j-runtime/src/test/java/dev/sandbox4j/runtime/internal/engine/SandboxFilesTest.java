package dev.sandbox4j.runtime.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.TestImages;
import dev.sandbox4j.workspace.BackgroundCommand;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The native file path of local sandboxes ({@link SandboxFiles}): it is the one in use, what it
 * creates belongs to the sandbox user, and a sandbox swapping symlinks as fast as it can never
 * makes it reach a host file.
 */
class SandboxFilesTest {

  private static final LocalSandbox SANDBOXES = new LocalSandbox();
  private static Workspace ws;

  @BeforeAll
  static void createSandbox() {
    Prerequisites.requireLocalEngine();
    ws = Workspace.of(SANDBOXES.newBackend());
    ws.open();
  }

  @AfterAll
  static void destroySandbox() {
    if (ws != null && ws.ref().isPresent()) {
      SANDBOXES.destroy(ws.ref().get());
    }
  }

  @Test
  void theNativePathIsUsedAsRoot() {
    assertThat(SandboxFiles.usable())
        .as("as root on Linux the kernel enforces the sandbox user's identity on the file threads")
        .isTrue();
  }

  @Test
  void whatTheApiCreatesBelongsToTheSandboxUser() throws IOException {
    ws.writeText("owned/file.txt", "mine");
    ws.createDirectories("owned/dir/sub");
    Path rootfs =
        SANDBOXES.home().resolve("sandboxes").resolve(ws.ref().get().id()).resolve("rootfs");
    String wd = ws.workingDirectory();
    int user = TestImages.engineOf(SANDBOXES).record(ws.ref().get().id()).hostBase() + 1000;
    assertThat((long) user - 1000)
        .as("the sandbox's own block of host ids")
        .matches(IdBlocks::isBlock);
    for (String p : List.of("owned", "owned/file.txt", "owned/dir", "owned/dir/sub")) {
      Path host = rootfs.resolve(wd.substring(1)).resolve(p);
      assertThat(Files.getAttribute(host, "unix:uid", LinkOption.NOFOLLOW_LINKS))
          .as("%s is owned by host uid base + 1000 (container 1000)", p)
          .isEqualTo(user);
      assertThat(Files.getAttribute(host, "unix:gid", LinkOption.NOFOLLOW_LINKS))
          .as("%s has host gid base + 1000 (container 1000)", p)
          .isEqualTo(user);
    }
    assertThat(ok("stat -c '%u:%g %a' owned owned/file.txt owned/dir/sub"))
        .isEqualTo("1000:1000 755\n1000:1000 644\n1000:1000 755\n");
  }

  @Test
  void rootOnlyFilesStayClosed() {
    ok("sudo sh -c 'echo root-only > /root-only.txt && chmod 600 /root-only.txt'");
    try {
      org.assertj.core.api.Assertions.assertThatThrownBy(() -> ws.readText("/root-only.txt"))
          .isInstanceOf(dev.sandbox4j.workspace.WorkspaceAccessDeniedException.class);
      org.assertj.core.api.Assertions.assertThatThrownBy(() -> ws.writeText("/etc/passwd", "x"))
          .isInstanceOf(dev.sandbox4j.workspace.WorkspaceAccessDeniedException.class);
      org.assertj.core.api.Assertions.assertThatThrownBy(() -> ws.list("/root"))
          .isInstanceOf(dev.sandbox4j.workspace.WorkspaceAccessDeniedException.class);
    } finally {
      ok("sudo rm -f /root-only.txt");
    }
  }

  @Test
  void symlinkSwapsNeverReachTheHost() throws Exception {
    String secret = "host-secret-" + UUID.randomUUID();
    Path hostDir = Files.createTempDirectory("sandbox4j-race-");
    Path marker = hostDir.resolve("marker.txt");
    Files.writeString(marker, secret);
    String rel = hostDir.toString().substring(1) + "/marker.txt";
    // link flips between a regular file, a link to / and a link up the tree; dir between a real
    // directory and the same links. Renames make every flip atomic.
    String flipper =
        """
        cd "$HOME"
        mkdir -p realdir
        while :; do
          ln -sfn / link.tmp && mv -Tf link.tmp link
          ln -sfn / dir.tmp && mv -Tf dir.tmp dir
          printf 'sandbox file' > link.tmp && mv -Tf link.tmp link
          mkdir -p dir.d && rm -rf dir && mv -Tf dir.d dir
          ln -sfn ../../../../../.. link.tmp && mv -Tf link.tmp link
          ln -sfn ../../../../../.. dir.tmp && mv -Tf dir.tmp dir
          ln -sfn %s link.tmp && mv -Tf link.tmp link
        done
        """
            .formatted("/" + rel);
    BackgroundCommand flips = ws.start(Command.shell(flipper), RunOptions.defaults());
    try {
      List<String> paths =
          List.of(
              "link",
              "link/" + rel,
              "link/etc/passwd",
              "dir/" + rel,
              "dir/../../../../../" + rel,
              "link/../../../../" + rel,
              "/" + rel);
      AtomicInteger reads = new AtomicInteger();
      AtomicInteger writes = new AtomicInteger();
      AtomicInteger refusals = new AtomicInteger();
      long end = System.nanoTime() + Duration.ofSeconds(4).toNanos();
      int rounds = 0;
      while (System.nanoTime() < end) {
        rounds++;
        for (String path : paths) {
          try {
            assertThat(ws.readText(path)).as("read %s", path).doesNotContain(secret);
            reads.incrementAndGet();
          } catch (WorkspaceException e) {
            refusals.incrementAndGet();
          }
          try {
            ws.writeText(path, "overwritten by the API");
            writes.incrementAndGet();
          } catch (WorkspaceException e) {
            refusals.incrementAndGet();
          }
          try {
            for (DirectoryEntry entry :
                ws.list(path.contains("/") ? path.substring(0, path.lastIndexOf('/')) : path)) {
              assertThat(entry.name()).isNotEqualTo(hostDir.getFileName().toString() + "-never");
            }
          } catch (WorkspaceException e) {
            refusals.incrementAndGet();
          }
          try {
            ws.stat(path);
          } catch (WorkspaceException e) {
            refusals.incrementAndGet();
          }
        }
        assertThat(Files.readString(marker))
            .as("rule: no write reaches a host file (round %d)", rounds)
            .isEqualTo(secret);
      }
      assertThat(flips.isRunning()).as("the flipping loop ran throughout").isTrue();
      assertThat(reads.get()).as("some reads succeeded (of sandbox files)").isPositive();
      assertThat(writes.get()).as("some writes succeeded (into the sandbox)").isPositive();
      try (Stream<Path> files = Files.list(hostDir)) {
        assertThat(files.toList())
            .as("nothing was created in the host directory")
            .containsExactly(marker);
      }
      assertThat(Files.readString(marker)).isEqualTo(secret);
      assertThat(Files.getAttribute(marker, "unix:uid")).isEqualTo(0);
    } finally {
      flips.kill();
      Files.deleteIfExists(marker);
      Files.deleteIfExists(hostDir);
    }
  }

  @Test
  void aFifoSwappedInIsRefusedNotWaitedOn() throws Exception {
    String flipper =
        """
        cd "$HOME"
        while :; do
          rm -f f.tmp && mkfifo f.tmp && mv -Tf f.tmp f
          printf 'regular' > f.tmp && mv -Tf f.tmp f
        done
        """;
    BackgroundCommand flips = ws.start(Command.shell(flipper), RunOptions.defaults());
    try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
      Future<int[]> reading =
          pool.submit(
              () -> {
                int[] outcomes = new int[2];
                long end = System.nanoTime() + Duration.ofSeconds(2).toNanos();
                while (System.nanoTime() < end) {
                  try {
                    assertThat(ws.readText("f")).isEqualTo("regular");
                    outcomes[0]++;
                  } catch (WorkspaceException refused) {
                    outcomes[1]++;
                  }
                }
                return outcomes;
              });
      int[] outcomes = reading.get(30, TimeUnit.SECONDS);
      assertThat(outcomes[0] + outcomes[1])
          .as("reads went on; none waited on the FIFO")
          .isPositive();
    } finally {
      flips.kill();
    }
  }

  @Test
  void threadsOfTheJvmKeepTheirOwnIdentity() throws Exception {
    Path dir = Files.createTempDirectory("sandbox4j-identity-");
    Path secret = Files.writeString(dir.resolve("root-only.txt"), "root");
    Files.setPosixFilePermissions(secret, PosixFilePermissions.fromString("rw-------"));
    Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwx------"));
    try (ExecutorService pool = Executors.newVirtualThreadPerTaskExecutor()) {
      List<Future<String>> results = new ArrayList<>();
      for (int i = 0; i < 200; i++) {
        int n = i;
        results.add(
            pool.submit(
                () -> {
                  ws.writeText("identity/" + n + ".txt", "n" + n);
                  assertThat(ws.readText("identity/" + n + ".txt")).isEqualTo("n" + n);
                  // whatever thread runs this, and whichever thread created it, is still root
                  String uids =
                      Files.readAllLines(Path.of("/proc/thread-self/status")).stream()
                          .filter(l -> l.startsWith("Uid:"))
                          .findFirst()
                          .orElseThrow();
                  // real, effective, saved and file system uid of the carrier thread
                  return Files.readString(secret) + " " + uids.replaceAll("\\s+", " ");
                }));
      }
      for (Future<String> r : results) {
        assertThat(r.get(60, TimeUnit.SECONDS)).isEqualTo("root Uid: 0 0 0 0");
      }
    } finally {
      Files.deleteIfExists(secret);
      Files.deleteIfExists(dir);
    }
    assertThat(
            ForkJoinPool.commonPool()
                .submit(() -> Files.readString(Path.of("/proc/self/status")))
                .get())
        .contains("Uid:\t0\t0\t0\t0");
  }

  private static String ok(String script) {
    CommandResult r = ws.run(Command.shell(script), RunOptions.withTimeout(Duration.ofSeconds(60)));
    if (r.exitCode() != 0) {
      throw new UncheckedIOException(new IOException("command failed: " + script + "\n" + r));
    }
    return r.stdoutText();
  }
}
