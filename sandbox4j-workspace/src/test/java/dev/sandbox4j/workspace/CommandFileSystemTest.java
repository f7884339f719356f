package dev.sandbox4j.workspace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.sandbox4j.workspace.spi.ProcessCommands;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link CommandFileSystem} against the host, through a minimal backend that runs commands with
 * {@link ProcessCommands}. The tests run as root in CI, so permission denied comes from {@code
 * chattr +i}, which stops root too.
 */
class CommandFileSystemTest {

  @TempDir Path tmp;

  private Path wd;
  private CommandFileSystem fs;

  @BeforeEach
  void setUp() throws IOException {
    wd = Files.createDirectory(tmp.resolve("ws")).toRealPath();
    HostCommands host = new HostCommands(wd);
    fs = new CommandFileSystem(host, host);
  }

  private String p(String relative) {
    return wd + "/" + relative;
  }

  @Test
  void binaryRoundTripOf8MiB() throws IOException {
    byte[] data = new byte[8 << 20];
    new Random(42).nextBytes(data);

    fs.writeBytes(p("dir/sub/data.bin"), data);

    assertThat(Files.readAllBytes(wd.resolve("dir/sub/data.bin"))).isEqualTo(data);
    assertThat(fs.readBytes(p("dir/sub/data.bin"))).isEqualTo(data);
    FileStat stat = fs.stat(p("dir/sub/data.bin"));
    assertThat(stat.type()).isEqualTo(FileType.FILE);
    assertThat(stat.size()).isEqualTo(data.length);
    assertThat(names(p("dir/sub"))).as("no temporary file left").containsExactly("data.bin");
  }

  @Test
  void readStreamsAndClosingEarlyReturnsPromptly() throws IOException {
    byte[] data = new byte[8 << 20];
    new Random(7).nextBytes(data);
    Files.write(wd.resolve("big"), data);

    assertTimeoutPreemptively(
        Duration.ofSeconds(10),
        () -> {
          try (InputStream in = fs.openRead(p("big"))) {
            assertThat(in.readNBytes(10)).isEqualTo(Arrays.copyOf(data, 10));
          }
        });
    // a slow reader still gets every byte
    try (InputStream in = fs.openRead(p("big"))) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      byte[] buffer = new byte[100_000];
      int n;
      while ((n = in.read(buffer)) >= 0) {
        out.write(buffer, 0, n);
        if (out.size() < 300_000) {
          sleep(50);
        }
      }
      assertThat(out.toByteArray()).isEqualTo(data);
    }
    assertThat(fs.readBytes(p("big"))).isEqualTo(data);
    Files.write(wd.resolve("empty"), new byte[0]);
    assertThat(fs.readBytes(p("empty"))).isEmpty();
  }

  @Test
  void aReaderPausingNearTheEndOutlastsTheBackendsDrainGrace() throws IOException {
    byte[] data = new byte[4 << 20];
    new Random(3).nextBytes(data);
    Files.write(wd.resolve("big"), data);
    // Paused here, the rest fills the queue and the pipe: dd has exited, the backend's stdout
    // reader waits on the handover, and the backend's grace runs out during the pause.
    int tail = (1 << 20) + 100_000;

    try (InputStream in = fs.openRead(p("big"))) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      out.write(in.readNBytes(data.length - tail));
      sleep(ProcessCommands.DRAIN_GRACE.toMillis() + 500);
      in.transferTo(out);
      assertThat(out.toByteArray()).isEqualTo(data);
    }
  }

  @Test
  void writeGoesThroughSymlinksAndKeepsThem() throws IOException {
    Files.writeString(wd.resolve("target.txt"), "old");
    Files.createSymbolicLink(wd.resolve("link"), Path.of("target.txt"));
    Files.createSymbolicLink(wd.resolve("link2"), Path.of("link"));
    Files.createSymbolicLink(wd.resolve("dangling"), Path.of("later/made.txt"));

    fs.writeBytes(p("link2"), "new".getBytes(StandardCharsets.UTF_8));
    fs.writeBytes(p("dangling"), "made".getBytes(StandardCharsets.UTF_8));

    assertThat(Files.readString(wd.resolve("target.txt"))).isEqualTo("new");
    assertThat(Files.isSymbolicLink(wd.resolve("link"))).isTrue();
    assertThat(Files.isSymbolicLink(wd.resolve("link2"))).isTrue();
    assertThat(Files.isSymbolicLink(wd.resolve("dangling"))).isTrue();
    assertThat(Files.readString(wd.resolve("later/made.txt"))).isEqualTo("made");
    assertThat(new String(fs.readBytes(p("link2")), StandardCharsets.UTF_8)).isEqualTo("new");
  }

  @Test
  void fifoAndDeviceAreRefusedAtOnce() throws Exception {
    host("mkfifo", p("fifo"));

    assertTimeoutPreemptively(
        Duration.ofSeconds(10),
        () -> {
          assertThatThrownBy(() -> fs.openRead(p("fifo")))
              .isExactlyInstanceOf(WorkspaceFileException.class)
              .hasMessageContaining(p("fifo"))
              .hasMessageContaining("not a regular file");
          assertThatThrownBy(() -> fs.openRead("/dev/zero"))
              .isExactlyInstanceOf(WorkspaceFileException.class);
        });
    assertThat(fs.stat(p("fifo")).type()).isEqualTo(FileType.OTHER);
  }

  @Test
  void listingDoesNotFollowSymlinksSoLoopsAreHarmless() throws IOException {
    Files.createSymbolicLink(wd.resolve("loop1"), Path.of("loop2"));
    Files.createSymbolicLink(wd.resolve("loop2"), Path.of("loop1"));
    Files.createSymbolicLink(wd.resolve("self"), Path.of("self"));
    Files.createSymbolicLink(wd.resolve("up"), Path.of(".."));
    Files.writeString(wd.resolve("b.txt"), "12345");
    Files.createDirectory(wd.resolve("a"));

    List<DirectoryEntry> entries = fs.list(wd.toString());

    assertThat(entries)
        .extracting(DirectoryEntry::name)
        .containsExactly("a", "b.txt", "loop1", "loop2", "self", "up");
    assertThat(entries)
        .extracting(DirectoryEntry::type)
        .containsExactly(
            FileType.DIRECTORY,
            FileType.FILE,
            FileType.SYMLINK,
            FileType.SYMLINK,
            FileType.SYMLINK,
            FileType.SYMLINK);
    assertThat(entries.get(1).size()).isEqualTo(5);
    assertThat(fs.exists(p("loop1"))).isFalse();
    assertThatThrownBy(() -> fs.stat(p("loop1")))
        .isInstanceOf(WorkspaceFileException.class)
        .hasMessageContaining("Too many levels of symbolic links");
    assertThatThrownBy(() -> fs.writeBytes(p("loop1"), new byte[1]))
        .isInstanceOf(WorkspaceFileException.class);
    assertThat(Files.isSymbolicLink(wd.resolve("loop1"))).isTrue();
    assertThat(fs.list(p("up"))).extracting(DirectoryEntry::name).contains("ws");
  }

  @Test
  void noSuchFile() throws IOException {
    Files.createSymbolicLink(wd.resolve("dangling"), Path.of("nowhere"));
    Files.createDirectory(wd.resolve("d"));

    assertError(() -> fs.openRead(p("missing")), WorkspaceNoSuchFileException.class, "missing");
    assertError(() -> fs.openRead(p("dangling")), WorkspaceNoSuchFileException.class, "dangling");
    assertError(() -> fs.stat(p("dangling")), WorkspaceNoSuchFileException.class, "dangling");
    assertError(() -> fs.stat(p("a/b/c")), WorkspaceNoSuchFileException.class, "a/b/c");
    assertError(() -> fs.list(p("missing")), WorkspaceNoSuchFileException.class, "missing");
    assertError(() -> fs.remove(p("missing"), true), WorkspaceNoSuchFileException.class, "missing");
    assertError(
        () -> fs.rename(p("missing"), p("x")), WorkspaceNoSuchFileException.class, "missing");
    assertError(() -> fs.rename(p("d"), p("no/such")), WorkspaceNoSuchFileException.class, "d");
    assertThat(fs.exists(p("dangling"))).isFalse();
    assertThat(fs.exists(p("missing"))).isFalse();
    assertThat(fs.exists(p("d"))).isTrue();
  }

  @Test
  void isDirectory() throws IOException {
    Files.createDirectories(wd.resolve("d/e"));
    Files.writeString(wd.resolve("f"), "f");

    assertError(() -> fs.openRead(p("d")), WorkspaceIsDirectoryException.class, "d");
    assertError(() -> fs.writeBytes(p("d"), new byte[1]), WorkspaceIsDirectoryException.class, "d");
    assertError(() -> fs.rename(p("f"), p("d")), WorkspaceIsDirectoryException.class, "f");
    assertError(() -> fs.openRead(p("d/e/..")), WorkspaceIsDirectoryException.class, "d/e/..");
  }

  @Test
  void notDirectory() throws IOException {
    Files.writeString(wd.resolve("f"), "f");
    Files.createDirectory(wd.resolve("d"));

    assertError(() -> fs.list(p("f")), WorkspaceNotDirectoryException.class, "f");
    assertError(() -> fs.openRead(p("f/x")), WorkspaceNotDirectoryException.class, "f/x");
    assertError(() -> fs.stat(p("f/x")), WorkspaceNotDirectoryException.class, "f/x");
    assertError(
        () -> fs.writeBytes(p("f/x"), new byte[1]), WorkspaceNotDirectoryException.class, "f/x");
    assertError(
        () -> fs.writeBytes(p("f/x/y"), new byte[1]),
        WorkspaceNotDirectoryException.class,
        "f/x/y");
    assertError(() -> fs.createDirectories(p("f/x")), WorkspaceNotDirectoryException.class, "f/x");
    assertError(() -> fs.rename(p("d"), p("f")), WorkspaceNotDirectoryException.class, "d");
    // ".." after a file is not resolved lexically: the kernel says f is not a directory
    assertError(
        () -> fs.writeBytes(p("f/.."), new byte[1]), WorkspaceNotDirectoryException.class, "f/..");
    assertThat(Files.readString(wd.resolve("f"))).isEqualTo("f");
  }

  @Test
  void alreadyExists() throws IOException {
    Files.writeString(wd.resolve("f"), "f");
    Files.createSymbolicLink(wd.resolve("dangling"), Path.of("nowhere"));

    assertError(() -> fs.createDirectories(p("f")), WorkspaceFileAlreadyExistsException.class, "f");
    assertError(
        () -> fs.createDirectories(p("dangling")),
        WorkspaceFileAlreadyExistsException.class,
        "dangling");
    fs.createDirectories(p("new/deep/dir"));
    fs.createDirectories(p("new/deep/dir"));
    assertThat(fs.stat(p("new/deep/dir")).isDirectory()).isTrue();
  }

  @Test
  void accessDeniedForAnImmutableFileAndDirectory() throws IOException {
    Files.writeString(wd.resolve("locked.txt"), "keep");
    Files.createDirectory(wd.resolve("lockeddir"));
    host("chattr", "+i", p("locked.txt"), p("lockeddir"));
    try {
      assertError(
          () -> fs.writeBytes(p("locked.txt"), new byte[1]),
          WorkspaceAccessDeniedException.class,
          "locked.txt");
      assertError(
          () -> fs.remove(p("locked.txt"), false),
          WorkspaceAccessDeniedException.class,
          "locked.txt");
      assertError(
          () -> fs.writeBytes(p("lockeddir/new.txt"), new byte[1]),
          WorkspaceAccessDeniedException.class,
          "lockeddir/new.txt");
      assertError(
          () -> fs.rename(p("locked.txt"), p("moved.txt")),
          WorkspaceAccessDeniedException.class,
          "locked.txt");
      assertThat(Files.readString(wd.resolve("locked.txt"))).isEqualTo("keep");
      assertThat(fs.readBytes(p("locked.txt"))).asString().isEqualTo("keep");
    } finally {
      host("chattr", "-i", p("locked.txt"), p("lockeddir"));
    }
  }

  @Test
  void directoryNotEmpty() throws IOException {
    Files.createDirectories(wd.resolve("full/sub"));
    Files.createDirectories(wd.resolve("other/sub"));

    assertError(
        () -> fs.remove(p("full"), false), WorkspaceDirectoryNotEmptyException.class, "full");
    assertError(
        () -> fs.rename(p("other"), p("full")), WorkspaceDirectoryNotEmptyException.class, "other");
    fs.remove(p("full"), true);
    assertThat(wd.resolve("full")).doesNotExist();
  }

  @Test
  void removeRefusesTheWorkingDirectoryAndItsAncestors() throws IOException {
    Files.createDirectories(wd.resolve("sub"));
    Files.createSymbolicLink(tmp.resolve("wd-link"), wd);
    Files.createSymbolicLink(wd.resolve("sub/wd-link"), wd);
    for (String refused :
        List.of(
            wd.toString(),
            wd.getParent().toString(),
            "/",
            p("sub/.."),
            p("sub/../.."),
            p("sub/wd-link/sub/.."))) {
      assertThatThrownBy(() -> fs.remove(refused, true))
          .as(refused)
          .isInstanceOf(WorkspaceAccessDeniedException.class)
          .hasMessageContaining(refused)
          .hasMessageContaining("working directory");
      assertThatThrownBy(() -> fs.rename(refused, tmp + "/elsewhere"))
          .as(refused)
          .isInstanceOf(WorkspaceAccessDeniedException.class)
          .hasMessageContaining("working directory");
    }
    assertThat(wd.resolve("sub")).isDirectory();

    // a symlink to the working directory is only a link: it goes, the directory stays
    fs.remove(tmp + "/wd-link", false);
    fs.remove(p("sub/wd-link"), true);
    assertThat(tmp.resolve("wd-link")).doesNotExist();
    assertThat(wd.resolve("sub")).isDirectory();
  }

  @Test
  void recursiveRemoveNeverFollowsSymlinks() throws IOException {
    Path outside = Files.createDirectory(tmp.resolve("outside"));
    Files.writeString(outside.resolve("precious"), "x");
    Files.createDirectories(wd.resolve("tree/a/b"));
    Files.writeString(wd.resolve("tree/a/b/file"), "x");
    Files.createSymbolicLink(wd.resolve("tree/a/out"), outside);
    Files.createSymbolicLink(wd.resolve("to-outside"), outside);

    fs.remove(p("tree"), true);
    fs.remove(p("to-outside"), true);

    assertThat(wd.resolve("tree")).doesNotExist();
    assertThat(wd.resolve("to-outside")).doesNotExist();
    assertThat(outside.resolve("precious")).hasContent("x");
    Files.createDirectory(wd.resolve("empty"));
    fs.remove(p("empty"), false);
    assertThat(wd.resolve("empty")).doesNotExist();
  }

  @Test
  void namesWithSpacesNewlinesQuotesAndLeadingDashes() throws IOException {
    List<String> names =
        List.of("--", "-n", "-rf", "a b", "new\nline", "quote's \"q\"", "star*", "trailing\n");
    for (String name : names) {
      fs.writeBytes(p("odd/" + name), name.getBytes(StandardCharsets.UTF_8));
    }

    assertThat(names(p("odd"))).containsExactlyElementsOf(names.stream().sorted().toList());
    for (String name : names) {
      assertThat(Files.readString(wd.resolve("odd").resolve(name))).isEqualTo(name);
      assertThat(fs.readBytes(p("odd/" + name))).asString().isEqualTo(name);
      assertThat(fs.stat(p("odd/" + name)).size()).isEqualTo(name.length());
    }
    fs.rename(p("odd/-n"), p("odd/-e x\n"));
    assertThat(fs.readBytes(p("odd/-e x\n"))).asString().isEqualTo("-n");
    assertThat(CommandFileSystem.realpath(fsCommands(), p("odd/trailing\n")))
        .isEqualTo(p("odd/trailing\n"));
    for (String name : names) {
      fs.remove(p("odd/" + (name.equals("-n") ? "-e x\n" : name)), false);
    }
    assertThat(fs.list(p("odd"))).isEmpty();
  }

  @Test
  void permissionBitsAreKeptOnOverwriteAndNewFilesGetTheUmaskDefault() throws IOException {
    Path file = wd.resolve("script.sh");
    Files.writeString(file, "old");
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rwxr-x---"));
    host("chmod", "u+s", file.toString());

    fs.writeBytes(file.toString(), "new".getBytes(StandardCharsets.UTF_8));

    assertThat(Files.readString(file)).isEqualTo("new");
    assertThat(fs.stat(file.toString()).permissions()).isEqualTo(04750);

    int umask = Integer.parseInt(hostOutput("/bin/sh", "-c", "umask").strip(), 8);
    fs.writeBytes(p("fresh"), new byte[0]);
    assertThat(fs.stat(p("fresh")).permissions()).isEqualTo(0666 & ~umask);
  }

  @Test
  void statReportsTypeSizeAndNanosecondModificationTime() throws IOException {
    Files.writeString(wd.resolve("f"), "hello");
    Files.createDirectory(wd.resolve("d"));
    Files.createSymbolicLink(wd.resolve("l"), Path.of("f"));

    FileStat stat = fs.stat(p("l"));

    assertThat(stat.path()).isEqualTo(p("l"));
    assertThat(stat.type()).isEqualTo(FileType.FILE);
    assertThat(stat.size()).isEqualTo(5);
    assertThat(stat.modified()).isEqualTo(Files.getLastModifiedTime(wd.resolve("f")).toInstant());
    assertThat(fs.stat(p("d")).type()).isEqualTo(FileType.DIRECTORY);
  }

  @Test
  void renameHasRename2Semantics() throws IOException {
    Files.writeString(wd.resolve("a"), "a");
    Files.writeString(wd.resolve("b"), "b");
    Files.createDirectories(wd.resolve("dir/inner"));
    Files.createDirectory(wd.resolve("empty"));
    Files.createSymbolicLink(wd.resolve("link"), Path.of("a"));
    Files.createLink(wd.resolve("hard"), wd.resolve("b"));

    fs.rename(p("a"), p("b"));
    assertThat(wd.resolve("a")).doesNotExist();
    assertThat(wd.resolve("b")).hasContent("a");

    fs.rename(p("dir"), p("empty"));
    assertThat(wd.resolve("empty/inner")).isDirectory();

    fs.rename(p("link"), p("moved-link"));
    assertThat(Files.readSymbolicLink(wd.resolve("moved-link"))).isEqualTo(Path.of("a"));

    fs.rename(p("empty"), p("empty"));
    assertThat(wd.resolve("empty/inner")).isDirectory();
    fs.rename(p("hard"), p("hard"));
    assertThat(wd.resolve("hard")).hasContent("b");
  }

  @Test
  void realpathResolvesSymlinksPhysicallyAndKeepsAMissingTail() throws IOException {
    Files.createDirectories(wd.resolve("x/y"));
    Files.createSymbolicLink(wd.resolve("l"), Path.of("x/y"));

    assertThat(CommandFileSystem.realpath(fsCommands(), p("l/../z/missing")))
        .isEqualTo(p("x/z/missing"));
    assertThat(CommandFileSystem.realpath(fsCommands(), p("l"))).isEqualTo(p("x/y"));
    assertThat(CommandFileSystem.realpath(fsCommands(), "/")).isEqualTo("/");
  }

  @Test
  void contentThatFailsMidwayLeavesTheFileUnchanged() throws IOException {
    Files.writeString(wd.resolve("keep.txt"), "old");
    InputStream failing =
        new InputStream() {
          private int left = 3 << 20;

          @Override
          public int read() throws IOException {
            if (left-- <= 0) {
              throw new IOException("source broke");
            }
            return 'x';
          }
        };

    assertThatThrownBy(() -> fs.write(p("keep.txt"), failing))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("stdin")
        .hasRootCauseMessage("source broke");

    assertThat(wd.resolve("keep.txt")).hasContent("old");
    assertThat(names(wd.toString())).containsExactly("keep.txt");
  }

  private SupportsCommands fsCommands() {
    return new HostCommands(wd);
  }

  private List<String> names(String dir) {
    return fs.list(dir).stream().map(DirectoryEntry::name).toList();
  }

  private static void assertError(
      Runnable action, Class<? extends WorkspaceFileException> type, String pathSuffix) {
    assertThatThrownBy(action::run)
        .isExactlyInstanceOf(type)
        .satisfies(e -> assertThat(((WorkspaceFileException) e).path()).endsWith("/" + pathSuffix))
        .hasMessageContaining(pathSuffix);
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  private static void host(String... argv) {
    hostOutput(argv);
  }

  private static String hostOutput(String... argv) {
    try {
      Process process = new ProcessBuilder(argv).redirectErrorStream(true).start();
      String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (process.waitFor() != 0) {
        throw new AssertionError(String.join(" ", argv) + " failed: " + out);
      }
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  /**
   * Runs commands on the host in the working directory, through the same {@link ProcessCommands}
   * every local backend uses: just enough of a backend for this.
   */
  private record HostCommands(Path wd) implements WorkspaceBackend, SupportsCommands {
    @Override
    public Optional<WorkspaceRef> ref() {
      return Optional.empty();
    }

    @Override
    public String workingDirectory() {
      return wd.toString();
    }

    @Override
    public CommandResult run(Command command, RunOptions options) {
      ProcessBuilder builder = new ProcessBuilder(command.toArgv()).directory(wd.toFile());
      builder.environment().putAll(options.env());
      try {
        return ProcessCommands.run(
            builder,
            options,
            System.nanoTime(),
            process ->
                () -> {
                  List<ProcessHandle> descendants = process.descendants().toList();
                  process.destroyForcibly();
                  descendants.forEach(ProcessHandle::destroyForcibly);
                });
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }
}
