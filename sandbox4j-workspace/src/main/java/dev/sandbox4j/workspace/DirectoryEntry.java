package dev.sandbox4j.workspace;

import java.util.Objects;

/**
 * One entry of a directory listing. Symlinks are reported as {@link FileType#SYMLINK}, not
 * followed.
 *
 * @param name the entry's name, without a directory part
 * @param type what it is, without following a symlink
 * @param size size in bytes as {@code lstat} reports it
 */
public record DirectoryEntry(String name, FileType type, long size) {

  /** Validates the fields. */
  public DirectoryEntry {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(type, "type");
    if (name.isEmpty() || name.indexOf('/') >= 0 || name.equals(".") || name.equals("..")) {
      throw new IllegalArgumentException("invalid directory entry name '" + name + "'");
    }
  }
}
