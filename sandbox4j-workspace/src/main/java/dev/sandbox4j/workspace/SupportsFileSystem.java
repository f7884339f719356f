package dev.sandbox4j.workspace;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.List;

/**
 * A backend with native file access. Every path is absolute and resolved by {@link Workspace};
 * every operation acts with the permissions of the workspace user and reports failures with the
 * {@link WorkspaceFileException} subclasses.
 *
 * <p>A backend that only runs commands does not implement this: {@link Workspace} then builds a
 * file system from commands (POSIX {@code sh} and GNU coreutils/findutils in the workspace).
 */
public interface SupportsFileSystem {

  /**
   * The file system built from commands that {@link Workspace} uses for a backend without its own:
   * for backends that have a native path but fall back to commands for some operations or hosts.
   * {@code backend} gives the working directory, {@code commands} runs the scripts (POSIX {@code
   * sh}, GNU coreutils and findutils in the workspace); both are usually the same object.
   */
  static SupportsFileSystem fromCommands(WorkspaceBackend backend, SupportsCommands commands) {
    return new CommandFileSystem(backend, commands);
  }

  /**
   * Opens a regular file for reading, following symlinks. A FIFO, socket or device is refused at
   * once with {@link WorkspaceFileException}, never waited on.
   *
   * @throws WorkspaceNoSuchFileException, WorkspaceIsDirectoryException,
   *     WorkspaceNotDirectoryException, WorkspaceAccessDeniedException
   */
  InputStream openRead(String path);

  /**
   * Writes {@code content} to a file, creating missing parent directories, and replacing the file
   * atomically (a temporary file renamed over it: readers see the old or the new content, never a
   * mix). A symlink is written through: its target is replaced, the link stays. An existing file's
   * permissions are kept; a new one gets the default ({@code 0666} less the umask).
   *
   * @throws WorkspaceIsDirectoryException if the path is a directory
   * @throws WorkspaceAccessDeniedException if the file or directory may not be written
   */
  void write(String path, InputStream content);

  /** Metadata of the file at {@code path}, following symlinks. */
  FileStat stat(String path);

  /**
   * The entries of a directory, sorted by name, without {@code .} and {@code ..}. Symlinks are
   * listed, not followed.
   */
  List<DirectoryEntry> list(String path);

  /**
   * Creates a directory and any missing parents, like {@code mkdir -p}; an existing directory is
   * fine.
   *
   * @throws WorkspaceFileAlreadyExistsException if a non-directory is in the way at {@code path}
   */
  void createDirectories(String path);

  /**
   * Removes a file, a symlink (not its target) or a directory. A non-empty directory needs {@code
   * recursive}; recursion never follows symlinks. The working directory and its ancestors are
   * refused with {@link WorkspaceAccessDeniedException}.
   *
   * @throws WorkspaceDirectoryNotEmptyException for a non-empty directory without {@code recursive}
   */
  void remove(String path, boolean recursive);

  /**
   * Renames {@code from} to {@code to} with {@code rename(2)} semantics: an existing file at {@code
   * to} is replaced, an empty directory too. The working directory and its ancestors are refused.
   */
  void rename(String from, String to);

  /** Whether something exists at {@code path}, following symlinks (a dangling link is false). */
  default boolean exists(String path) {
    try {
      stat(path);
      return true;
    } catch (WorkspaceNoSuchFileException | WorkspaceNotDirectoryException e) {
      return false;
    }
  }

  /** Reads a whole file. */
  default byte[] readBytes(String path) {
    try (InputStream in = openRead(path)) {
      return in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException("reading " + path, e);
    }
  }

  /** Writes a whole file, as {@link #write(String, InputStream)}. */
  default void writeBytes(String path, byte[] content) {
    write(path, new ByteArrayInputStream(content));
  }
}
