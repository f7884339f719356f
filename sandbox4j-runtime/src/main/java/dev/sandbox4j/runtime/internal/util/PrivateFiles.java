package dev.sandbox4j.runtime.internal.util;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * Files and directories private to root: each is given its mode when it is created ({@code 0700}
 * for a directory, {@code 0600} for a file), never widened after, so there is no window in which
 * another host user could open it. Everything the engine keeps in its state directory is made this
 * way (see {@code StateDirectory} for the few entries a sandbox must traverse).
 */
public final class PrivateFiles {
  private PrivateFiles() {}

  public static final Set<PosixFilePermission> PRIVATE_DIR =
      PosixFilePermissions.fromString("rwx------");
  public static final Set<PosixFilePermission> PRIVATE_FILE =
      PosixFilePermissions.fromString("rw-------");

  private static final FileAttribute<Set<PosixFilePermission>> DIR_ATTR =
      PosixFilePermissions.asFileAttribute(PRIVATE_DIR);
  private static final FileAttribute<Set<PosixFilePermission>> FILE_ATTR =
      PosixFilePermissions.asFileAttribute(PRIVATE_FILE);

  /** Makes directory {@code dir} ({@code 0700}) and missing parents, like createDirectories. */
  public static Path createPrivateDirectories(Path dir) throws IOException {
    if (Files.isDirectory(dir)) {
      return dir;
    }
    Path parent = dir.toAbsolutePath().getParent();
    if (parent != null) {
      createPrivateDirectories(parent);
    }
    try {
      Files.createDirectory(dir, DIR_ATTR);
    } catch (FileAlreadyExistsException raced) {
      if (!Files.isDirectory(dir)) {
        throw raced;
      }
    }
    return dir;
  }

  /** Makes the new directory {@code dir}, {@code 0700}. */
  public static Path createPrivateDirectory(Path dir) throws IOException {
    return Files.createDirectory(dir, DIR_ATTR);
  }

  /** Opens {@code file} for writing, creating it {@code 0600} if missing (for logs). */
  public static Path createPrivateFile(Path file) throws IOException {
    try (FileChannel c =
        FileChannel.open(
            file, Set.of(StandardOpenOption.CREATE, StandardOpenOption.WRITE), FILE_ATTR)) {
      return file;
    }
  }

  /** Writes the new file {@code file} ({@code 0600}); fails if it exists. */
  public static void writeNew(Path file, byte[] content) throws IOException {
    try (FileChannel c =
        FileChannel.open(
            file, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE), FILE_ATTR)) {
      ByteBuffer b = ByteBuffer.wrap(content);
      while (b.hasRemaining()) {
        c.write(b);
      }
    }
  }

  /** The attribute that creates a file {@code 0600}. */
  public static FileAttribute<Set<PosixFilePermission>> privateFile() {
    return FILE_ATTR;
  }

  /** The attribute that creates a directory {@code 0700}. */
  public static FileAttribute<Set<PosixFilePermission>> privateDirectory() {
    return DIR_ATTR;
  }
}
