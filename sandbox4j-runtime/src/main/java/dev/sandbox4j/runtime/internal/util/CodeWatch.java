package dev.sandbox4j.runtime.internal.util;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;

/**
 * Notices the jars a long-lived process runs from being rebuilt or replaced under it. A JVM loads
 * classes from its jars lazily, so a jar overwritten in place (a rebuild, an upgrade of the
 * launcher's jar) fails the process at the first class it had not loaded yet: a supervisor that
 * lived through a rebuild served port URLs but failed every egress-proxy connection with {@code
 * ClassNotFoundException}. The supervisor asks {@link #replacedAndSettled} on every scan and hands
 * over to a new supervisor started from the new jars.
 *
 * <p>Only regular files on the class path are watched (jars); a directory of classes changes file
 * by file and is what a developer's IDE runs from, where this does not apply. Not thread-safe.
 */
public final class CodeWatch {

  /** One jar as it was: what a rewrite or a replacement changes. */
  private record Jar(Path path, boolean exists, long size, FileTime modified, Object fileKey) {
    static Jar of(Path path) {
      try {
        BasicFileAttributes a = Files.readAttributes(path, BasicFileAttributes.class);
        return new Jar(path, true, a.size(), a.lastModifiedTime(), a.fileKey());
      } catch (IOException e) {
        return new Jar(path, false, -1, null, null);
      }
    }
  }

  private final List<Path> jars;
  private final List<Jar> started;
  private List<Jar> pending; // a change seen at the previous look, null if none

  /**
   * Watches the jars of {@code classPath} (entries joined by the path separator) as they are now.
   */
  public CodeWatch(String classPath) {
    List<Path> files = new ArrayList<>();
    for (String entry : classPath.split(File.pathSeparator)) {
      if (!entry.isEmpty() && Files.isRegularFile(Path.of(entry))) {
        files.add(Path.of(entry));
      }
    }
    this.jars = List.copyOf(files);
    this.started = look();
  }

  private List<Jar> look() {
    return jars.stream().map(Jar::of).toList();
  }

  /**
   * Whether a jar changed since the start and has stayed as it is now since the previous call, with
   * every jar present: a jar still being written, or gone, is not one to start from.
   */
  public boolean replacedAndSettled() {
    List<Jar> now = look();
    if (now.equals(started)) {
      pending = null;
      return false;
    }
    boolean settled = now.equals(pending) && now.stream().allMatch(Jar::exists);
    pending = now;
    return settled;
  }
}
