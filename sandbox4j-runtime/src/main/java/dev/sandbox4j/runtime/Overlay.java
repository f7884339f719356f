package dev.sandbox4j.runtime;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** The sandbox's root: an overlayfs of the read-only image and its private upper directory. */
final class Overlay {
  private Overlay() {}

  static void mount(Path lower, Path upper, Path work, Path target) {
    String options =
        "lowerdir=" + checked(lower) + ",upperdir=" + checked(upper) + ",workdir=" + checked(work);
    HostCommand.check(
        List.of("mount", "-t", "overlay", "overlay", "-o", options, target.toString()));
  }

  /** Unmounts; a mount still busy is detached lazily so destroy can finish. */
  static void unmount(Path target) {
    if (!isMounted(target)) {
      return;
    }
    if (!HostCommand.run(List.of("umount", target.toString())).ok()) {
      HostCommand.check(List.of("umount", "-l", target.toString()));
    }
  }

  static boolean isMounted(Path target) {
    try {
      String wanted = " " + target.toAbsolutePath() + " ";
      return Files.readAllLines(Path.of("/proc/self/mountinfo")).stream()
          .anyMatch(line -> line.contains(wanted));
    } catch (IOException e) {
      return false;
    }
  }

  /** overlayfs options cannot carry ',' or ':' in paths, and mountinfo escapes whitespace. */
  private static String checked(Path p) {
    String s = p.toAbsolutePath().toString();
    if (s.matches(".*[,:\\s\\\\].*")) {
      throw new IllegalArgumentException(
          "the sandbox4j state directory path must not contain ',', ':', '\\\\' or whitespace: "
              + s);
    }
    return s;
  }
}
