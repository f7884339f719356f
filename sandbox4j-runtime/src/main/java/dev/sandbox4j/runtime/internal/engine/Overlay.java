package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.linux.MountCalls;
import dev.sandbox4j.runtime.internal.linux.NativeFs;
import dev.sandbox4j.runtime.internal.linux.UserNamespaces;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The sandbox's root: an overlayfs of the image's read-only layers and its private upper directory.
 *
 * <p>The mount on the host is {@code nosuid,nodev}: a setuid file or a device node the sandbox made
 * gives nothing to a host process that reaches it there. The container's own root must honour
 * setuid ({@code sudo}), and a mount namespace made inside a user namespace locks the flags it
 * copies, so the runtime is started with {@code nosuid} cleared on the host mount and it is set
 * again as soon as the container holds its own copy ({@link #whileStarting}). {@code nodev} stays
 * on: the container's {@code /dev} is a mount of its own.
 */
public final class Overlay {
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
  public static void mount(List<Path> lowers, Path upper, Path work, Path target) {
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
          MountCalls.mount("overlay", target, "overlay", SEALED, options);
        } catch (NativeFs.Errno e) {
          throw new WorkspaceException("cannot mount the overlay at " + target + ": " + e, e);
        }
        return;
      }
      HostCommand.check(
          List.of(
              "mount",
              "-t",
              "overlay",
              "overlay",
              "-o",
              "nosuid,nodev," + options,
              target.toString()));
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
                "nosuid,nodev," + relative,
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

  private static final long SEALED = MountCalls.MS_NOSUID | MountCalls.MS_NODEV;

  /**
   * Mounts a sandbox's root like {@link #mount(List, Path, Path, Path)}, its layers (owned by the
   * canonical ids {@link Image#UID_SHIFT}{@code ..}) seen as owned by the sandbox's block {@code
   * hostBase..} ({@link IdBlocks}): each layer is cloned as a detached idmapped mount ({@link
   * MountCalls#idmappedTree}, through a user namespace mapping the canonical block to {@code
   * hostBase}, {@link UserNamespaces#forBlock}) and given to overlay as a lower by its descriptor
   * ({@code /proc/self/fd/<n>}); the overlay keeps private clones of its lowers, so the descriptors
   * are closed right after, and nothing is left mounted but the overlay. The clones are read-only
   * and {@code nodev}, not {@code nosuid}: overlay honours a lower mount's {@code nosuid}, and the
   * container's {@code sudo} must stay setuid (the overlay itself is sealed, see the class
   * comment). With {@code hostBase} the canonical block (a sandbox made before blocks existed), the
   * layers are used as they are.
   */
  public static void mount(List<Path> lowers, Path upper, Path work, Path target, int hostBase) {
    if (hostBase == Image.UID_SHIFT) {
      mount(lowers, upper, work, target);
      return;
    }
    if (!NativeFs.AVAILABLE) {
      throw new WorkspaceException(
          "cannot mount the layers idmapped: native file operations are unavailable");
    }
    List<Integer> trees = new java.util.ArrayList<>();
    int userns = UserNamespaces.forBlock(hostBase);
    try {
      for (Path layer : lowers) {
        trees.add(
            MountCalls.idmappedTree(
                layer, userns, MountCalls.MOUNT_ATTR_RDONLY | MountCalls.MOUNT_ATTR_NODEV));
      }
      // Short names: about 60 layers fit the one page of options.
      mount(trees.stream().map(fd -> Path.of("/proc/self/fd/" + fd)).toList(), upper, work, target);
    } catch (NativeFs.Errno e) {
      throw new WorkspaceException(
          "cannot clone the layers of " + target + " idmapped to " + hostBase + ": " + e, e);
    } finally {
      // Closing a detached mount tree unmounts it, which waits for an RCU grace period: done off
      // the create's path (nothing is mounted anywhere meanwhile: the trees are detached).
      Thread.ofVirtual()
          .name("sandbox4j-idmapped-close")
          .start(
              () -> {
                NativeFs.close(userns);
                trees.forEach(NativeFs::close);
              });
    }
  }

  /**
   * Runs {@code start} (a runtime's {@code run} or {@code restore}, which bind the root into the
   * container's mount namespace) with setuid allowed on the host mount {@code target}, and forbids
   * it again after, whether {@code start} succeeded or not. The window is the runtime's start; the
   * mount sits in a directory only root and the sandbox's root may traverse ({@link
   * StateDirectory}).
   */
  static <T> T whileStarting(Path target, java.util.function.Supplier<T> start) {
    remount(target, MountCalls.MS_NODEV, "nodev");
    try {
      return start.get();
    } finally {
      remount(target, SEALED, "nosuid,nodev");
    }
  }

  /**
   * Sets {@code nosuid,nodev} on the host mount {@code target} if it is mounted: for a root mounted
   * before mounts were sealed (a running container keeps its own copy and is not affected).
   */
  static void seal(Path target) {
    if (isMounted(target)) {
      remount(target, SEALED, "nosuid,nodev");
    }
  }

  /** Changes only the flags of this one mount (MS_REMOUNT | MS_BIND), not of its superblock. */
  private static void remount(Path target, long flags, String options) {
    if (NativeFs.AVAILABLE) {
      try {
        MountCalls.mount(
            "none", target, "none", MountCalls.MS_REMOUNT | MountCalls.MS_BIND | flags, null);
      } catch (NativeFs.Errno e) {
        throw new WorkspaceException("cannot set " + options + " on " + target + ": " + e, e);
      }
      return;
    }
    HostCommand.check(List.of("mount", "-o", "remount,bind," + options, target.toString()));
  }

  /** Unmounts; a mount still busy is detached lazily so destroy can finish. */
  public static void unmount(Path target) {
    if (!isMounted(target)) {
      return;
    }
    if (NativeFs.AVAILABLE) {
      try {
        MountCalls.umount2(target, 0);
      } catch (NativeFs.Errno busy) {
        try {
          MountCalls.umount2(target, MountCalls.MNT_DETACH);
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

  public static boolean isMounted(Path target) {
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
