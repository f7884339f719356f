package dev.sandbox4j.workspace;

/** What a directory entry or stat result is. */
public enum FileType {
  /** A regular file. */
  FILE,
  /** A directory. */
  DIRECTORY,
  /** A symbolic link (only reported where links are not followed, as in listings). */
  SYMLINK,
  /** Anything else: FIFO, socket, device. */
  OTHER
}
