package dev.sandbox4j.modal;

import dev.sandbox4j.modal.internal.proto.ContainerFileMkdirRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFileOpenRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFileReadRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecRequest;
import dev.sandbox4j.modal.internal.proto.SystemErrorCode;
import dev.sandbox4j.modal.internal.proto.SystemErrorMessage;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The open files of one fake sandbox, and the filesystem operations of {@code
 * ContainerFilesystemExec} on its local workspace, as Modal's clients document them (Python's
 * {@code FileIO} mimics {@code io.FileIO}): open with a mode of {@code r}, {@code w}, {@code a} or
 * {@code x} (and {@code b}), read {@code n} bytes or the rest, write (buffered until flush or
 * close), flush, close, mkdir (with or without parents) and rm (recursive or not). Every operation
 * acts as the local sandbox's user; a failure becomes a {@link SystemErrorMessage} whose code is
 * the errno the operation met, as Python's client maps codes to {@code FileNotFoundError} and the
 * like.
 */
final class FakeFilesystem {
  private final Workspace workspace;
  private final Map<String, OpenFile> open = new ConcurrentHashMap<>();
  private final AtomicInteger descriptors = new AtomicInteger();

  FakeFilesystem(Workspace workspace) {
    this.workspace = workspace;
  }

  /** The outcome of one operation: the descriptor an open made, the bytes a read got. */
  record Outcome(String fileDescriptor, byte[] output) {}

  /** A failed operation: what the output stream reports instead of output. */
  static final class Failure extends RuntimeException {
    final SystemErrorMessage error;

    Failure(SystemErrorCode code, String message) {
      super(message, null, false, false);
      this.error =
          SystemErrorMessage.newBuilder().setErrorCode(code).setErrorMessage(message).build();
    }
  }

  private static final class OpenFile {
    final String path;
    final InputStream in; // readable files
    final ByteArrayOutputStream content; // writable files: the whole content they will have

    OpenFile(String path, InputStream in, ByteArrayOutputStream content) {
      this.path = path;
      this.in = in;
      this.content = content;
    }
  }

  /** Runs one operation; throws {@link Failure} for what Modal reports as a SystemErrorMessage. */
  Outcome run(ContainerFilesystemExecRequest r) {
    try {
      return switch (r.getFileExecRequestOneofCase()) {
        case FILE_OPEN_REQUEST -> new Outcome(open(r.getFileOpenRequest()), new byte[0]);
        case FILE_READ_REQUEST -> new Outcome(null, read(r.getFileReadRequest()));
        case FILE_WRITE_REQUEST -> {
          writable(file(r.getFileWriteRequest().getFileDescriptor()))
              .content
              .writeBytes(r.getFileWriteRequest().getData().toByteArray());
          yield new Outcome(null, new byte[0]);
        }
        case FILE_FLUSH_REQUEST -> {
          flush(writable(file(r.getFileFlushRequest().getFileDescriptor())));
          yield new Outcome(null, new byte[0]);
        }
        case FILE_CLOSE_REQUEST -> {
          close(r.getFileCloseRequest().getFileDescriptor());
          yield new Outcome(null, new byte[0]);
        }
        case FILE_MKDIR_REQUEST -> {
          mkdir(r.getFileMkdirRequest());
          yield new Outcome(null, new byte[0]);
        }
        case FILE_RM_REQUEST -> {
          workspace.remove(r.getFileRmRequest().getPath(), r.getFileRmRequest().getRecursive());
          yield new Outcome(null, new byte[0]);
        }
        case FILEEXECREQUESTONEOF_NOT_SET ->
            throw new Failure(SystemErrorCode.SYSTEM_ERROR_CODE_INVAL, "no operation");
      };
    } catch (WorkspaceFileException e) {
      throw new Failure(errno(e), e.getMessage());
    }
  }

  /** The errno a workspace file failure stands for. */
  private static SystemErrorCode errno(WorkspaceFileException e) {
    return switch (e) {
      case WorkspaceNoSuchFileException x -> SystemErrorCode.SYSTEM_ERROR_CODE_NOENT;
      case WorkspaceIsDirectoryException x -> SystemErrorCode.SYSTEM_ERROR_CODE_ISDIR;
      case WorkspaceNotDirectoryException x -> SystemErrorCode.SYSTEM_ERROR_CODE_NOTDIR;
      case WorkspaceFileAlreadyExistsException x -> SystemErrorCode.SYSTEM_ERROR_CODE_EXIST;
      case WorkspaceAccessDeniedException x -> SystemErrorCode.SYSTEM_ERROR_CODE_ACCES;
      // ENOTEMPTY and the rest have no code of their own: the message says what happened
      default -> SystemErrorCode.SYSTEM_ERROR_CODE_UNSPECIFIED;
    };
  }

  private String open(ContainerFileOpenRequest r) {
    String mode = r.getMode();
    Set<Character> seen = new HashSet<>();
    for (char c : mode.toCharArray()) {
      if ("rwaxb+".indexOf(c) < 0 || !seen.add(c)) {
        throw new Failure(SystemErrorCode.SYSTEM_ERROR_CODE_INVAL, "invalid mode " + mode);
      }
    }
    long kinds = mode.chars().filter(c -> "rwax".indexOf(c) >= 0).count();
    if (kinds != 1 || seen.contains('+')) {
      throw new Failure(
          SystemErrorCode.SYSTEM_ERROR_CODE_INVAL, "mode " + mode + " is not supported here");
    }
    String path = r.getPath();
    OpenFile file;
    if (seen.contains('r')) {
      file = new OpenFile(path, workspace.openRead(path), null);
    } else {
      FileStat stat = statOrNull(path);
      if (stat != null && stat.isDirectory()) {
        throw new WorkspaceIsDirectoryException(path, "Is a directory");
      }
      if (stat != null && seen.contains('x')) {
        throw new WorkspaceFileAlreadyExistsException(path, "File exists");
      }
      if (stat == null) {
        requireDirectory(parent(path));
      }
      ByteArrayOutputStream content = new ByteArrayOutputStream();
      if (seen.contains('a') && stat != null) {
        content.writeBytes(workspace.readBytes(path));
      }
      // opening creates or truncates the file at once
      workspace.writeBytes(path, content.toByteArray());
      file = new OpenFile(path, null, content);
    }
    String fd = "fd-" + descriptors.incrementAndGet();
    open.put(fd, file);
    return fd;
  }

  private byte[] read(ContainerFileReadRequest r) {
    OpenFile file = file(r.getFileDescriptor());
    if (file.in == null) {
      throw new Failure(SystemErrorCode.SYSTEM_ERROR_CODE_INVAL, "file not open for reading");
    }
    try {
      return r.hasN() ? file.in.readNBytes(r.getN()) : file.in.readAllBytes();
    } catch (IOException e) {
      throw new Failure(SystemErrorCode.SYSTEM_ERROR_CODE_IO, e.toString());
    }
  }

  private void flush(OpenFile file) {
    workspace.writeBytes(file.path, file.content.toByteArray());
  }

  private void close(String fd) {
    OpenFile file = file(fd);
    try {
      if (file.content != null) {
        flush(file);
      }
    } finally {
      open.remove(fd);
      if (file.in != null) {
        try {
          file.in.close();
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      }
    }
  }

  private void mkdir(ContainerFileMkdirRequest r) {
    String path = r.getPath();
    if (!r.getMakeParents()) {
      if (statOrNull(path) != null) {
        throw new WorkspaceFileAlreadyExistsException(path, "File exists");
      }
      requireDirectory(parent(path));
    }
    // with parents, like mkdir -p: an existing directory is fine, a file in the way is EEXIST
    workspace.createDirectories(path);
  }

  private OpenFile file(String fd) {
    OpenFile file = open.get(fd);
    if (file == null) {
      throw new Failure(SystemErrorCode.SYSTEM_ERROR_CODE_UNSPECIFIED, "bad file descriptor " + fd);
    }
    return file;
  }

  private static OpenFile writable(OpenFile file) {
    if (file.content == null) {
      throw new Failure(SystemErrorCode.SYSTEM_ERROR_CODE_INVAL, "file not open for writing");
    }
    return file;
  }

  private FileStat statOrNull(String path) {
    try {
      return workspace.stat(path);
    } catch (WorkspaceNoSuchFileException e) {
      return null;
    }
  }

  private void requireDirectory(String path) {
    if (!workspace.stat(path).isDirectory()) {
      throw new WorkspaceNotDirectoryException(path, "Not a directory");
    }
  }

  private static String parent(String path) {
    int slash = path.lastIndexOf('/');
    return slash <= 0 ? "/" : path.substring(0, slash);
  }
}
