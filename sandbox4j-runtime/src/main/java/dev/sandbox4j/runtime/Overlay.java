package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The sandbox's root: an overlayfs of the image's read-only layers and its private upper directory.
 */
final class Overlay {
  private Overlay() {}

  /** The longest mount option string the kernel takes (one page, with its terminating NUL). */
  private static final int MAX_OPTIONS = 4095;

  /**
   * Mounts the layers {@code lowers} (<b>bottom first</b>, as {@link Image#layers()} lists them)
   * under the private {@code upper}, at {@code target}. overlayfs takes {@code lowerdir} top first,
   * colon-separated. The kernel takes one page of mount options: if absolute paths of many layers
   * do not fit and all layers share one parent directory (the store's {@code layers/}), they are
   * named relative to it and {@code mount} runs there, which fits about 60 layers. Options that fit
   * as they are go to {@code mount(2)} directly (spawning {@code mount(8)} cost a few milliseconds
   * of every create); relative names cannot, as the JVM's working directory is not {@code layers/}.
   */
  static void mount(List<Path> lowers, Path upper, Path work, Path target) {
    if (lowers.isEmpty()) {
      throw new IllegalArgumentException("an overlay needs at least one lower layer");
    }
    List<Path> topFirst = lowers.reversed();
    String tail = ",upperdir=" + checked(upper) + ",workdir=" + checked(work);
    String options =
        "lowerdir=" + String.join(":", topFirst.stream().map(Overlay::checked).toList()) + tail;
    if (options.length() <= MAX_OPTIONS) {
      if (NativeFs.AVAILABLE) {
        try {
          NativeFs.mount("overlay", target, "overlay", options);
        } catch (NativeFs.Errno e) {
          throw new WorkspaceException("cannot mount the overlay at " + target + ": " + e, e);
        }
        return;
      }
      HostCommand.check(
          List.of("mount", "-t", "overlay", "overlay", "-o", options, target.toString()));
      return;
    }
    Path parent = topFirst.getFirst().toAbsolutePath().getParent();
    if (parent != null
        && topFirst.stream().allMatch(l -> parent.equals(l.toAbsolutePath().getParent()))) {
      String relative =
          "lowerdir="
              + String.join(
                  ":", topFirst.stream().map(l -> checkedName(l.getFileName().toString())).toList())
              + tail;
      if (relative.length() <= MAX_OPTIONS) {
        HostCommand.check(
            List.of(
                "/bin/sh",
                "-c",
                "cd -- \"$1\" && shift && exec \"$@\"",
                "sh",
                checked(parent),
                "mount",
                "-t",
                "overlay",
                "overlay",
                "-o",
                relative,
                target.toString()));
        return;
      }
    }
    throw new WorkspaceException(
        "cannot mount an image of "
            + lowers.size()
            + " layers: their paths exceed the "
            + MAX_OPTIONS
            + " bytes of overlayfs mount options (build the image with fewer steps)");
  }

  /** Unmounts; a mount still busy is detached lazily so destroy can finish. */
  static void unmount(Path target) {
    if (!isMounted(target)) {
      return;
    }
    if (NativeFs.AVAILABLE) {
      try {
        NativeFs.umount2(target, 0);
      } catch (NativeFs.Errno busy) {
        try {
          NativeFs.umount2(target, NativeFs.MNT_DETACH);
        } catch (NativeFs.Errno e) {
          if (e.errno != NativeFs.EINVAL) { // EINVAL: no longer a mount point
            throw new WorkspaceException("cannot unmount " + target + ": " + e, e);
          }
        }
      }
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

  private static String checkedName(String name) {
    return checked(Path.of("/", name)).substring(1);
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
