package dev.sandbox4j.runtime.internal.util;

import dev.sandbox4j.runtime.internal.engine.StateDirectory;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.UUID;

/**
 * Writes that a crash leaves either wholly old or wholly new: temp file, fsync, rename, fsync. The
 * file is owner-only (0600) from its creation, like everything the engine keeps ({@link
 * StateDirectory}).
 */
public final class AtomicFiles {
  private AtomicFiles() {}

  public static void write(Path target, byte[] content) throws IOException {
    Path dir = target.getParent();
    Path temp = dir.resolve("." + target.getFileName() + ".tmp-" + UUID.randomUUID());
    try {
      try (FileChannel out =
          FileChannel.open(
              temp,
              java.util.Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE),
              PrivateFiles.privateFile())) {
        out.write(java.nio.ByteBuffer.wrap(content));
        out.force(true);
      }
      Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      syncDirectory(dir);
    } finally {
      Files.deleteIfExists(temp);
    }
  }

  /** Makes a rename or a new entry in {@code dir} durable. */
  public static void syncDirectory(Path dir) throws IOException {
    try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
      d.force(true);
    }
  }
}
