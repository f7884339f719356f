package dev.sandbox4j.runtime.internal.util;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.UUID;

/**
 * Files that hold secrets (header values, the proxy CA's key): owner-only (0600) from the moment
 * they exist, so no other user ever reads a window of them, and written as {@link AtomicFiles} does
 * (temp file, fsync, rename, fsync).
 */
public final class SecretFiles {
  private SecretFiles() {}

  public static void write(Path target, byte[] content) throws IOException {
    Path dir = target.getParent();
    Path temp = dir.resolve("." + target.getFileName() + ".tmp-" + UUID.randomUUID());
    try {
      try (FileChannel out =
          FileChannel.open(
              temp,
              java.util.Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE),
              PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))) {
        out.write(ByteBuffer.wrap(content));
        out.force(true);
      }
      Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      AtomicFiles.syncDirectory(dir);
    } finally {
      Files.deleteIfExists(temp);
    }
  }
}
