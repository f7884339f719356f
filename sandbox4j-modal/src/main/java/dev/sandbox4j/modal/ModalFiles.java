package dev.sandbox4j.modal;

import com.google.protobuf.ByteString;
import dev.sandbox4j.modal.internal.proto.ContainerFileCloseRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFileMkdirRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFileOpenRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFileReadRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFileRmRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFileWriteRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecGetOutputRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecResponse;
import dev.sandbox4j.modal.internal.proto.FilesystemRuntimeOutputBatch;
import dev.sandbox4j.modal.internal.proto.SystemErrorMessage;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.FileType;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.SupportsCommands;
import dev.sandbox4j.workspace.SupportsFileSystem;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.security.SecureRandom;
import java.util.Iterator;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.function.BiFunction;

/**
 * The files of one Modal sandbox. Content goes through Modal's filesystem calls, the way Modal's
 * own clients move it: each operation is one {@code ContainerFilesystemExec} (open, read, write,
 * close, mkdir, rm) whose outcome, bytes or a {@code SystemErrorMessage}, is then streamed by
 * {@code ContainerFilesystemExecGetOutput} until a batch says eof. Bytes travel as protobuf {@code
 * bytes}, so every byte value survives, and in chunks of at most {@link #CHUNK_BYTES}, so that no
 * file, however large, is one message.
 *
 * <p>Modal's filesystem API has no stat, no rename, no chmod and no realpath, and its listing gives
 * names only. What needs those runs as commands, through {@code commandFiles} (the workspace's
 * command-built file system) or the one script here that ends a write:
 *
 * <ul>
 *   <li>{@link #openRead} asks {@code stat} first: opening a FIFO or device through the filesystem
 *       call could wait forever, and the contract refuses them at once;
 *   <li>{@link #write} uploads to a temporary file next to the target, then {@link #COMMIT} gives
 *       it the target's permissions and renames it over the target (the file the symlinks end at),
 *       so the replacement is atomic;
 *   <li>{@link #stat}, {@link #list}, {@link #remove} (which must resolve the path to refuse the
 *       working directory and its ancestors) and {@link #rename} are commands only.
 * </ul>
 */
final class ModalFiles implements SupportsFileSystem {
  /** The most bytes one read asks for, and one write sends. */
  static final int CHUNK_BYTES = 1 << 20;

  /** How long the server may hold one output stream open, in seconds, as Modal's clients ask. */
  private static final float OUTPUT_TIMEOUT_SECONDS = 55;

  /** How often an output stream is reopened after a retryable failure, as libmodal does. */
  private static final int OUTPUT_REOPENS = 10;

  private static final SecureRandom RANDOM = new SecureRandom();

  private static final int IS_DIRECTORY = 41;
  private static final int ACCESS_DENIED = 44;
  private static final int NOT_REGULAR_FILE = 46;

  /**
   * Ends a write: renames the uploaded temporary file {@code $2} over the file that {@code $1}'s
   * symlinks (dangling ones too) end at, after giving it that file's permissions, or the default
   * ({@code 0666} less the umask) for a new one. The temporary file goes on every failure.
   */
  static final String COMMIT =
      """
      p=$1 tmp=$2
      fail() {
        rm -f -- "$tmp"
        printf '%s\\n' "$1" >&2
        exit "${2:-1}"
      }
      # Runs a tool; its failure exits, permission errors with their own code.
      try() {
        err=$("$@" 2>&1) && return
        case $err in
          *': Permission denied' | *': Operation not permitted') fail "$err" 44 ;;
        esac
        fail "$err"
      }
      if [ -d "$p" ]; then fail "$p: Is a directory" 41; fi
      # the x keeps a trailing newline of a name from being eaten
      t=$(realpath -m -- "$p" && echo x) || fail "cannot resolve $p"
      t=${t%?x}
      # realpath -m stops at a symlink loop without complaint
      if [ -L "$t" ]; then fail "$p: Too many levels of symbolic links"; fi
      if [ -e "$t" ]; then
        if [ ! -f "$t" ]; then fail "$p: not a regular file" 46; fi
        # Renaming over the file would bypass its own permissions: honour them first.
        if [ ! -w "$t" ]; then fail "$p: Permission denied" 44; fi
        try chmod --reference="$t" -- "$tmp"
      else
        d=${t%/*}
        try mkdir -p -- "${d:-/}"
        try chmod "$(printf %o $((0666 & ~0$(umask))))" -- "$tmp"
      fi
      try mv -f -T -- "$tmp" "$t"
      """;

  private final ControlPlane control;
  private final String taskId;
  private final SupportsFileSystem commandFiles;
  private final SupportsCommands commands;
  private final BiFunction<String, StatusRuntimeException, WorkspaceException> grpcFailure;

  /**
   * @param grpcFailure turns a failed call (retries spent) into the exception to throw; {@code
   *     what} names the operation
   */
  ModalFiles(
      ControlPlane control,
      String taskId,
      SupportsFileSystem commandFiles,
      SupportsCommands commands,
      BiFunction<String, StatusRuntimeException, WorkspaceException> grpcFailure) {
    this.control = control;
    this.taskId = taskId;
    this.commandFiles = commandFiles;
    this.commands = commands;
    this.grpcFailure = grpcFailure;
  }

  /**
   * Streams a regular file in reads of {@link #CHUNK_BYTES}, one at a time as the caller reads;
   * closing the stream closes the file in the sandbox.
   */
  @Override
  public InputStream openRead(String path) {
    FileStat stat = commandFiles.stat(path);
    if (stat.type() == FileType.DIRECTORY) {
      throw new WorkspaceIsDirectoryException(path, "is a directory");
    }
    if (stat.type() != FileType.FILE) {
      throw new WorkspaceFileException(
          path, "not a regular file (a FIFO, socket or device): refused");
    }
    return new ReadStream(path, open(path, "r"));
  }

  /**
   * Creates the parent directories ({@code mkdir} with parents), uploads the content to a temporary
   * file beside the target in writes of {@link #CHUNK_BYTES}, and renames it over the target with
   * {@link #COMMIT}. If the content fails midway, the target is untouched, the temporary file is
   * removed, and the failure is rethrown as a {@link WorkspaceException} whose cause is the
   * content's exception.
   */
  @Override
  public void write(String path, InputStream content) {
    String parent = parent(path);
    if (!parent.equals("/")) {
      try {
        createDirectories(parent);
      } catch (WorkspaceFileAlreadyExistsException e) {
        // a non-directory where the parent goes: the path has a file where a directory goes
        throw new WorkspaceNotDirectoryException(path, "not a directory: " + e.getMessage());
      }
    }
    String temp =
        (parent.equals("/") ? "" : parent)
            + "/.sandbox4j-write."
            + Long.toString(RANDOM.nextLong() & Long.MAX_VALUE, 36);
    String fd = open(temp, "w");
    boolean committed = false;
    try {
      upload(path, fd, content);
      closeDescriptor(fd);
      fd = null;
      CommandResult result =
          commands.run(
              Command.argv("/bin/sh", "-c", COMMIT, "sh", path, temp),
              RunOptions.builder().env("LC_ALL", "C").build());
      if (!result.succeeded()) {
        throw commitFailure(path, result);
      }
      committed = true;
    } finally {
      if (!committed) {
        discard(fd, temp);
      }
    }
  }

  private void upload(String path, String fd, InputStream content) {
    byte[] buffer = new byte[CHUNK_BYTES];
    while (true) {
      int n;
      try {
        n = content.readNBytes(buffer, 0, buffer.length);
      } catch (IOException e) {
        throw new WorkspaceException(path + ": reading the content to write failed", e);
      } catch (RuntimeException e) {
        throw new WorkspaceException(path + ": reading the content to write failed", e);
      }
      if (n == 0) {
        return;
      }
      run(
          path,
          "writing",
          ContainerFilesystemExecRequest.newBuilder()
              .setFileWriteRequest(
                  ContainerFileWriteRequest.newBuilder()
                      .setFileDescriptor(fd)
                      .setData(ByteString.copyFrom(buffer, 0, n))));
    }
  }

  /**
   * After a failed write: closes the temporary file if it is open, and removes it, on a thread of
   * its own which this one waits for: a write fails also when its thread is interrupted, and a gRPC
   * call made on an interrupted thread fails at once.
   */
  private void discard(String fd, String temp) {
    Thread cleaner =
        Thread.ofVirtual().name("sandbox4j-modal-discard").start(() -> discardNow(fd, temp));
    boolean interrupted = false;
    while (true) {
      try {
        cleaner.join();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private void discardNow(String fd, String temp) {
    try {
      if (fd != null) {
        closeDescriptor(fd);
      }
      run(
          temp,
          "removing",
          ContainerFilesystemExecRequest.newBuilder()
              .setFileRmRequest(ContainerFileRmRequest.newBuilder().setPath(temp)));
    } catch (RuntimeException e) {
      // the write's own failure is the one to report; a sandbox that is gone took the file along
    }
  }

  private static WorkspaceFileException commitFailure(String path, CommandResult result) {
    String detail = result.stderrText().strip();
    return switch (result.exitCode()) {
      case IS_DIRECTORY -> new WorkspaceIsDirectoryException(path, "is a directory");
      case ACCESS_DENIED ->
          new WorkspaceAccessDeniedException(path, "permission denied: " + detail);
      case NOT_REGULAR_FILE ->
          new WorkspaceFileException(path, "not a regular file (a FIFO, socket or device)");
      default ->
          new WorkspaceFileException(
              path, "replacing the file failed (exit " + result.exitCode() + "): " + detail);
    };
  }

  /**
   * {@code mkdir} with parents. Modal documents no answer for a directory that already exists, so
   * "exists" is settled by the command-built file system, which knows a directory from a file.
   */
  @Override
  public void createDirectories(String path) {
    try {
      mkdir(path);
    } catch (WorkspaceFileAlreadyExistsException e) {
      commandFiles.createDirectories(path);
    }
  }

  private void mkdir(String path) {
    run(
        path,
        "creating directories",
        ContainerFilesystemExecRequest.newBuilder()
            .setFileMkdirRequest(
                ContainerFileMkdirRequest.newBuilder().setPath(path).setMakeParents(true)));
  }

  @Override
  public FileStat stat(String path) {
    return commandFiles.stat(path);
  }

  @Override
  public boolean exists(String path) {
    return commandFiles.exists(path);
  }

  @Override
  public List<DirectoryEntry> list(String path) {
    return commandFiles.list(path);
  }

  @Override
  public void remove(String path, boolean recursive) {
    commandFiles.remove(path, recursive);
  }

  @Override
  public void rename(String from, String to) {
    commandFiles.rename(from, to);
  }

  // ---- the filesystem calls ------------------------------------------------------------------

  /** Opens {@code path} in {@code mode} ({@code r}, {@code w}, ...); returns the descriptor. */
  private String open(String path, String mode) {
    ContainerFilesystemExecResponse response =
        run(
            path,
            "opening",
            ContainerFilesystemExecRequest.newBuilder()
                .setFileOpenRequest(
                    ContainerFileOpenRequest.newBuilder().setPath(path).setMode(mode)));
    if (!response.hasFileDescriptor()) {
      throw new WorkspaceFileException(path, "Modal opened the file but gave no descriptor");
    }
    return response.getFileDescriptor();
  }

  private void closeDescriptor(String fd) {
    run(
        fd,
        "closing",
        ContainerFilesystemExecRequest.newBuilder()
            .setFileCloseRequest(ContainerFileCloseRequest.newBuilder().setFileDescriptor(fd)));
  }

  /** One operation, its output ignored. */
  private ContainerFilesystemExecResponse run(
      String path, String what, ContainerFilesystemExecRequest.Builder request) {
    ContainerFilesystemExecResponse response = start(path, what, request);
    output(path, what, response.getExecId());
    return response;
  }

  private ContainerFilesystemExecResponse start(
      String path, String what, ContainerFilesystemExecRequest.Builder request) {
    ContainerFilesystemExecRequest built = request.setTaskId(taskId).build();
    try {
      // unary, so retried with one idempotency key: a retry is not a second write
      return control.call(s -> s.containerFilesystemExec(built));
    } catch (StatusRuntimeException e) {
      throw grpcFailure.apply(what + " " + path, e);
    }
  }

  /**
   * The output of exec {@code execId}, until a batch says eof. A stream that fails retryably is
   * reopened (at most {@link #OUTPUT_REOPENS} times); the batches a reopened stream repeats, by
   * {@code batch_index}, are skipped. One that simply ends (the server's timeout) is reopened
   * without limit, as the operation may still run.
   */
  private byte[] output(String path, String what, String execId) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    long lastBatch = -1;
    boolean reopened = false;
    int failures = 0;
    ContainerFilesystemExecGetOutputRequest request =
        ContainerFilesystemExecGetOutputRequest.newBuilder()
            .setExecId(execId)
            .setTimeout(OUTPUT_TIMEOUT_SECONDS)
            .build();
    while (true) {
      try {
        Iterator<FilesystemRuntimeOutputBatch> batches =
            control.streaming().containerFilesystemExecGetOutput(request);
        while (batches.hasNext()) {
          FilesystemRuntimeOutputBatch batch = batches.next();
          if (reopened && batch.getBatchIndex() <= lastBatch) {
            continue;
          }
          lastBatch = Math.max(lastBatch, batch.getBatchIndex());
          if (batch.hasError()) {
            throw fileError(path, what, batch.getError());
          }
          for (ByteString bytes : batch.getOutputList()) {
            bytes.writeTo(out);
          }
          if (batch.getEof()) {
            return out.toByteArray();
          }
        }
      } catch (StatusRuntimeException e) {
        if (Thread.currentThread().isInterrupted()) {
          throw new CancellationException("interrupted while " + what + " " + path);
        }
        Status.Code code = e.getStatus().getCode();
        if (!Retries.retryable(code) || failures >= OUTPUT_REOPENS) {
          throw grpcFailure.apply(what + " " + path, e);
        }
        Retries.sleep(Retries.delay(Math.min(failures, Retries.MAX_RETRIES)));
        failures++;
      } catch (IOException e) {
        throw new AssertionError("a ByteArrayOutputStream does not fail", e);
      }
      reopened = true;
    }
  }

  /**
   * The exception for a {@code SystemErrorMessage}: its code is the errno the operation met in the
   * sandbox, which names the cause; the message is Modal's.
   */
  private static WorkspaceFileException fileError(
      String path, String what, SystemErrorMessage error) {
    String reason = what + " failed: " + error.getErrorMessage();
    return switch (error.getErrorCode()) {
      case SYSTEM_ERROR_CODE_NOENT -> new WorkspaceNoSuchFileException(path, reason);
      case SYSTEM_ERROR_CODE_ISDIR -> new WorkspaceIsDirectoryException(path, reason);
      case SYSTEM_ERROR_CODE_NOTDIR -> new WorkspaceNotDirectoryException(path, reason);
      case SYSTEM_ERROR_CODE_EXIST -> new WorkspaceFileAlreadyExistsException(path, reason);
      case SYSTEM_ERROR_CODE_ACCES, SYSTEM_ERROR_CODE_PERM ->
          new WorkspaceAccessDeniedException(path, reason);
      default -> new WorkspaceFileException(path, reason + " (" + error.getErrorCode() + ")");
    };
  }

  private static String parent(String path) {
    int slash = path.lastIndexOf('/');
    return slash <= 0 ? "/" : path.substring(0, slash);
  }

  /** A file open in the sandbox, read a chunk at a time as the caller asks for bytes. */
  private final class ReadStream extends InputStream {
    private final String path;
    private String fd;
    private byte[] chunk = new byte[0];
    private int position;
    private boolean eof;
    private boolean closed;

    ReadStream(String path, String fd) {
      this.path = path;
      this.fd = fd;
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public synchronized int read(byte[] b, int off, int len) throws IOException {
      Objects.checkFromIndexSize(off, len, b.length);
      if (closed) {
        throw new IOException(path + ": stream closed");
      }
      if (len == 0) {
        return 0;
      }
      while (position == chunk.length) {
        if (eof) {
          return -1;
        }
        next();
      }
      int n = Math.min(len, chunk.length - position);
      System.arraycopy(chunk, position, b, off, n);
      position += n;
      return n;
    }

    @Override
    public synchronized int available() {
      return closed ? 0 : chunk.length - position;
    }

    /** The next chunk; an empty one is the end of the file, which is then closed. */
    private void next() {
      ContainerFilesystemExecResponse response =
          start(
              path,
              "reading",
              ContainerFilesystemExecRequest.newBuilder()
                  .setFileReadRequest(
                      ContainerFileReadRequest.newBuilder()
                          .setFileDescriptor(fd)
                          .setN(CHUNK_BYTES)));
      chunk = output(path, "reading", response.getExecId());
      position = 0;
      if (chunk.length == 0) {
        eof = true;
        closeFile();
      }
    }

    private void closeFile() {
      if (fd != null) {
        String open = fd;
        fd = null;
        closeDescriptor(open);
      }
    }

    /** Closes the file in the sandbox; a failure to (the sandbox gone, say) is not the reader's. */
    @Override
    public synchronized void close() {
      if (closed) {
        return;
      }
      closed = true;
      chunk = new byte[0];
      try {
        closeFile();
      } catch (WorkspaceException | CancellationException e) {
        // nothing was lost: the content read so far was whole
      }
    }
  }
}
