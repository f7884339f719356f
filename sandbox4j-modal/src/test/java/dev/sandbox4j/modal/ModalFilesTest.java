package dev.sandbox4j.modal;

import static dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecRequest.FileExecRequestOneofCase.FILE_MKDIR_REQUEST;
import static dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecRequest.FileExecRequestOneofCase.FILE_OPEN_REQUEST;
import static dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecRequest.FileExecRequestOneofCase.FILE_READ_REQUEST;
import static dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecRequest.FileExecRequestOneofCase.FILE_RM_REQUEST;
import static dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecRequest.FileExecRequestOneofCase.FILE_WRITE_REQUEST;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecRequest.FileExecRequestOneofCase;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.SequenceInputStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Files of a Modal sandbox through Modal's filesystem calls, against the fake: the fake counts the
 * operations it ran, so a client that quietly moved content through commands fails here.
 */
class ModalFilesTest {
  private static final Duration BOUND = Duration.ofSeconds(30);

  private static FakeModal modal;
  private static ModalSandbox client;
  private static Workspace ws;
  @TempDir static Path home;

  @BeforeAll
  static void start() {
    LocalEngine.require();
    modal = new FakeModal();
    client = modal.client(home).image("debian:bookworm-slim").build();
    ws = Workspace.of(client.newBackend());
    ws.open();
  }

  @AfterAll
  static void stop() {
    if (client != null) {
      ws.ref().ifPresent(client::destroy);
      client.close();
    }
    if (modal != null) {
      modal.close();
    }
  }

  /** Counts one kind of filesystem operation from now on. */
  private static final class Ops {
    private final FileExecRequestOneofCase kind;
    private final int before;

    Ops(FileExecRequestOneofCase kind) {
      this.kind = kind;
      this.before = modal.filesystemOps(kind);
    }

    int since() {
      return modal.filesystemOps(kind) - before;
    }
  }

  private static int commandsSince(int before) {
    return modal.calls("TaskExecStart").size() - before;
  }

  private static void sh(String script, String... args) {
    String[] argv = new String[args.length + 4];
    argv[0] = "/bin/sh";
    argv[1] = "-c";
    argv[2] = script;
    argv[3] = "sh";
    System.arraycopy(args, 0, argv, 4, args.length);
    var result = ws.run(Command.argv(argv), RunOptions.withTimeout(BOUND));
    assertThat(result.exitCode()).as(result.stderrText()).isZero();
  }

  private static byte[] random(int size, long seed) {
    byte[] bytes = new byte[size];
    new Random(seed).nextBytes(bytes);
    return bytes;
  }

  @Test
  void everyByteValueRoundTripsThroughTheFilesystemCalls() {
    byte[] all = new byte[256 * 3];
    for (int i = 0; i < all.length; i++) {
      all[i] = (byte) i;
    }
    Ops writes = new Ops(FILE_WRITE_REQUEST);
    Ops reads = new Ops(FILE_READ_REQUEST);
    int commands = modal.calls("TaskExecStart").size();

    ws.writeBytes("bytes/all.bin", all);
    assertThat(commandsSince(commands)).as("only the rename that ends a write").isEqualTo(1);
    assertThat(writes.since()).isEqualTo(1);

    assertThat(ws.readBytes("bytes/all.bin")).isEqualTo(all);
    assertThat(reads.since()).as("the content, then the end").isEqualTo(2);
    assertThat(commandsSince(commands)).as("and the stat before a read").isEqualTo(2);
  }

  @Test
  void anEmptyFileIsWrittenWithoutDataAndReadsEmpty() {
    Ops writes = new Ops(FILE_WRITE_REQUEST);
    Ops opens = new Ops(FILE_OPEN_REQUEST);
    ws.writeBytes("empty.bin", new byte[0]);
    assertThat(writes.since()).isZero();
    assertThat(opens.since()).isEqualTo(1);
    assertThat(ws.stat("empty.bin").size()).isZero();
    assertThat(ws.readBytes("empty.bin")).isEmpty();
  }

  @Test
  void aMultiMebibyteFileMovesInBoundedChunks() throws IOException {
    byte[] content = random(5 * ModalFiles.CHUNK_BYTES + 123, 5);
    Ops writes = new Ops(FILE_WRITE_REQUEST);
    Ops reads = new Ops(FILE_READ_REQUEST);
    ws.writeBytes("big/five.bin", content);
    assertThat(writes.since()).isEqualTo(6);

    ByteArrayOutputStream read = new ByteArrayOutputStream();
    try (InputStream in = ws.openRead("big/five.bin")) {
      byte[] first = in.readNBytes(10);
      assertThat(reads.since()).as("a stream reads as it is read").isEqualTo(1);
      read.writeBytes(first);
      in.transferTo(read);
    }
    assertThat(read.toByteArray()).isEqualTo(content);
    assertThat(reads.since()).isEqualTo(7);
  }

  @Test
  void aWriteReplacesALongerFileAndKeepsItsPermissions() {
    ws.writeText("replace.txt", "a much longer first content\n");
    sh("chmod 640 replace.txt");
    ws.writeText("replace.txt", "short");
    assertThat(ws.readText("replace.txt")).isEqualTo("short");
    assertThat(ws.stat("replace.txt").permissions()).isEqualTo(0640);
  }

  @Test
  void aWriteGoesThroughASymlinkToItsTarget() {
    ws.writeText("link-target.txt", "old");
    sh("ln -s link-target.txt link.txt");
    ws.writeText("link.txt", "new");
    assertThat(ws.readText("link-target.txt")).isEqualTo("new");
    assertThat(ws.list(".").stream().filter(e -> e.name().equals("link.txt")))
        .singleElement()
        .extracting(DirectoryEntry::type)
        .isEqualTo(dev.sandbox4j.workspace.FileType.SYMLINK);
  }

  @Test
  void aPathWithSpacesAndANewlineWorks() {
    String path = "odd dir/with\nnewline and space.bin";
    byte[] content = random(1000, 7);
    Ops writes = new Ops(FILE_WRITE_REQUEST);
    Ops reads = new Ops(FILE_READ_REQUEST);
    ws.writeBytes(path, content);
    assertThat(ws.readBytes(path)).isEqualTo(content);
    assertThat(writes.since()).isEqualTo(1);
    assertThat(reads.since()).isEqualTo(2);
    assertThat(ws.list("odd dir"))
        .extracting(DirectoryEntry::name)
        .contains("with\nnewline and space.bin");
  }

  @Test
  void directoriesAreMadeByTheMkdirCall() {
    Ops mkdirs = new Ops(FILE_MKDIR_REQUEST);
    ws.createDirectories("tree/a/b/c");
    assertThat(mkdirs.since()).isEqualTo(1);
    assertThat(ws.stat("tree/a/b/c").isDirectory()).isTrue();
    ws.createDirectories("tree/a/b/c"); // an existing directory is fine
    ws.writeText("tree/file", "x");
    assertThatThrownBy(() -> ws.createDirectories("tree/file"))
        .isInstanceOf(WorkspaceFileAlreadyExistsException.class);
    assertThatThrownBy(() -> ws.createDirectories("tree/file/below"))
        .isInstanceOf(WorkspaceNotDirectoryException.class);
    assertThatThrownBy(() -> ws.writeText("tree/file/below/f", "x"))
        .isInstanceOf(WorkspaceNotDirectoryException.class);
  }

  @Test
  void missingPathsDirectoriesAndUnreadableFilesFailAsTheContractSays() {
    assertThatThrownBy(() -> ws.readBytes("no/such/file"))
        .isInstanceOf(WorkspaceNoSuchFileException.class);
    ws.createDirectories("a-dir");
    assertThatThrownBy(() -> ws.readBytes("a-dir"))
        .isInstanceOf(WorkspaceIsDirectoryException.class);
    assertThatThrownBy(() -> ws.writeText("a-dir", "x"))
        .isInstanceOf(WorkspaceIsDirectoryException.class);

    // the fake's user is not root: the filesystem call's open meets EACCES
    ws.writeText("secret.txt", "x");
    sh("chmod 000 secret.txt");
    Ops opens = new Ops(FILE_OPEN_REQUEST);
    assertThatThrownBy(() -> ws.readBytes("secret.txt"))
        .isInstanceOf(WorkspaceAccessDeniedException.class)
        .hasMessageContaining("opening failed");
    assertThat(opens.since()).isEqualTo(1);

    // nor may it make a directory in /: the mkdir call meets EACCES
    assertThatThrownBy(() -> ws.writeText("/not-for-the-user/f", "x"))
        .isInstanceOf(WorkspaceAccessDeniedException.class);
  }

  @Test
  void aFailingContentLeavesTheFileAsItWasAndNoTemporaryFile() {
    ws.writeText("kept/file.txt", "before");
    InputStream failing =
        new SequenceInputStream(
            new java.io.ByteArrayInputStream(random(ModalFiles.CHUNK_BYTES + 10, 9)),
            new InputStream() {
              @Override
              public int read() throws IOException {
                throw new IOException("the source broke");
              }
            });
    Ops removes = new Ops(FILE_RM_REQUEST);
    assertThatThrownBy(() -> ws.write("kept/file.txt", failing))
        .isInstanceOf(WorkspaceException.class)
        .hasRootCauseMessage("the source broke");
    assertThat(ws.readText("kept/file.txt")).isEqualTo("before");
    assertThat(ws.list("kept")).extracting(DirectoryEntry::name).containsExactly("file.txt");
    assertThat(removes.since()).isEqualTo(1);
  }

  @Test
  void anOutputStreamCutMidwayIsReopenedWithoutRepeatingBytes() {
    byte[] content = random(ModalFiles.CHUNK_BYTES + 77, 11);
    ws.writeBytes("cut.bin", content);
    int streams = modal.calls("ContainerFilesystemExecGetOutput").size();
    modal.cutFilesystemOutputAfterBatches = 3; // of the first read's 16 batches
    assertThat(ws.readBytes("cut.bin")).isEqualTo(content);
    assertThat(modal.cutFilesystemOutputAfterBatches).as("the cut happened").isZero();
    // open, read (twice: cut, reopened), read, read (the end), close
    assertThat(modal.calls("ContainerFilesystemExecGetOutput").size() - streams).isEqualTo(6);
  }

  @Test
  void lostAnswersAreRetriedWithTheSameKeyAndAppliedOnce() {
    byte[] content = random(2 * ModalFiles.CHUNK_BYTES, 13);
    Ops writes = new Ops(FILE_WRITE_REQUEST);
    // mkdir, open and the first write: each is handled, its answer lost, and retried
    for (int i = 0; i < 3; i++) {
      modal.loseNextResponse("ContainerFilesystemExec");
    }
    ws.writeBytes("retried/file.bin", content);
    assertThat(writes.since()).as("each chunk written once").isEqualTo(2);
    assertThat(ws.readBytes("retried/file.bin")).isEqualTo(content);
  }

  @Test
  void filesOfATerminatedSandboxAreUnavailable() {
    try (ModalSandbox other = modal.client(home).image("debian:bookworm-slim").build()) {
      Workspace gone = Workspace.of(other.newBackend());
      WorkspaceRef ref = gone.open();
      gone.writeText("f.txt", "x");
      other.destroy(ref);
      assertThatThrownBy(() -> gone.readText("f.txt"))
          .isInstanceOf(dev.sandbox4j.workspace.WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> gone.createDirectories("d"))
          .isInstanceOf(dev.sandbox4j.workspace.WorkspaceUnavailableException.class);
    }
  }
}
