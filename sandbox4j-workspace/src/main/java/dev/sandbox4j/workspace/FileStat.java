package dev.sandbox4j.workspace;

import java.time.Instant;
import java.util.Objects;

/**
 * Metadata of one file.
 *
 * @param path the absolute path that was asked about
 * @param type what it is
 * @param size size in bytes (for a directory, whatever the file system reports)
 * @param permissions the permission bits, such as {@code 0644}
 * @param modified the last modification time
 */
public record FileStat(String path, FileType type, long size, int permissions, Instant modified) {

  /** Validates the fields. */
  public FileStat {
    Objects.requireNonNull(path, "path");
    Objects.requireNonNull(type, "type");
    Objects.requireNonNull(modified, "modified");
    if (size < 0) {
      throw new IllegalArgumentException("size must not be negative, was " + size);
    }
    if (permissions < 0 || permissions > 07777) {
      throw new IllegalArgumentException("permissions out of range: " + permissions);
    }
  }

  /** Whether this is a regular file. */
  public boolean isFile() {
    return type == FileType.FILE;
  }

  /** Whether this is a directory. */
  public boolean isDirectory() {
    return type == FileType.DIRECTORY;
  }
}
