package dev.sandbox4j.runtime;

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;

/** Deleting the engine's directory trees: sandboxes, layers, leftovers of builds. */
final class Trees {
  private Trees() {}

  /**
   * Deletes {@code root} and everything in it, never following a symlink and never crossing into
   * another file system (a leftover /proc or /dev mount inside a dead build, or an overlay still
   * mounted, would lead to the host's files). Parts that someone else deletes meanwhile are fine.
   */
  static void delete(Path root) throws IOException {
    Object rootDevice;
    try {
      rootDevice = Files.getAttribute(root, "unix:dev", LinkOption.NOFOLLOW_LINKS);
    } catch (NoSuchFileException gone) {
      return;
    }
    Files.walkFileTree(
        root,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs)
              throws IOException {
            if (!rootDevice.equals(
                Files.getAttribute(dir, "unix:dev", LinkOption.NOFOLLOW_LINKS))) {
              throw new IOException(
                  "a file system is mounted at " + dir + ": unmount it, then run gc again");
            }
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFile(Path file, BasicFileAttributes attrs)
              throws IOException {
            Files.deleteIfExists(file);
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFileFailed(Path file, IOException e) throws IOException {
            if (e instanceof NoSuchFileException) {
              return FileVisitResult.CONTINUE;
            }
            throw e;
          }

          @Override
          public FileVisitResult postVisitDirectory(Path dir, IOException e) throws IOException {
            if (e != null && !(e instanceof NoSuchFileException)) {
              throw e;
            }
            Files.deleteIfExists(dir);
            return FileVisitResult.CONTINUE;
          }
        });
  }
}
