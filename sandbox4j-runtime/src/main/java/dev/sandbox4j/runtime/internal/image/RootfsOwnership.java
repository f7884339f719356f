package dev.sandbox4j.runtime.internal.image;

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * Shifts a freshly built root filesystem's or layer's ownership into the sandboxes' user namespace
 * range.
 *
 * <p>Done once per image rather than by an idmapped mount per sandbox: a chown of ~14k files takes
 * ~0.3 s, and every sandbox then mounts the image as is.
 */
public final class RootfsOwnership {
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;
  private static final int SETUID_SETGID = 06000;
  private static final int S_IFMT = 0170000;
  private static final int S_IFBLK = 0060000;
  private static final int S_IFCHR = 0020000;

  private RootfsOwnership() {}

  /**
   * Adds {@link Image#UID_SHIFT} to the uid and gid of every file under {@code rootfs} (symlinks
   * themselves, never their targets) and returns the total size of its regular files, each inode
   * counted once, so that the one walk the shift needs also sizes the image. Ids already at or
   * above the shift are taken as shifted before (a re-run).
   */
  static long shiftToHost(Path rootfs) throws IOException {
    return walk(rootfs, false);
  }

  /**
   * Shifts a layer extracted from an untrusted archive, like {@link #shiftToHost} but strictly:
   * every id must be below {@link Image#ID_RANGE} (an id the user namespace cannot map is an
   * error), and device nodes are deleted (a block or character device in an image would be a device
   * node on the host, reachable by whoever can reach the file), except overlayfs whiteouts
   * (character devices 0/0). Returns the size of the regular files.
   */
  static long shiftImported(Path layer) throws IOException {
    return walk(layer, true);
  }

  /**
   * Moves the owners of {@code root}'s files from one block of host ids to another, in place: a uid
   * or gid in {@code fromBase..fromBase+65535} becomes the same offset from {@code toBase}, others
   * are kept (an image build step's writable layer, owned by the step's own block, becoming a layer
   * of the store, owned by the canonical ids: see the engine's {@code IdBlocks}). Symlinks are
   * changed themselves, never followed; setuid and setgid bits are set again after the chown. For a
   * tree nothing runs in (the step's container is gone, the layer moved into the build's own
   * directory).
   */
  public static void shiftBlock(Path root, int fromBase, int toBase) throws IOException {
    if (fromBase == toBase) {
      return;
    }
    eachOnce(
        root,
        (path, attrs) -> {
          Map<String, Object> unix = Files.readAttributes(path, "unix:uid,gid,mode", NOFOLLOW);
          int uid = (Integer) unix.get("uid");
          int gid = (Integer) unix.get("gid");
          int newUid = moved(uid, fromBase, toBase);
          int newGid = moved(gid, fromBase, toBase);
          chown(path, attrs, unix, newUid == uid ? -1 : newUid, newGid == gid ? -1 : newGid);
        });
  }

  private static int moved(int id, int fromBase, int toBase) {
    long offset = (id & 0xffffffffL) - fromBase;
    return offset >= 0 && offset < Image.ID_RANGE ? (int) (toBase + offset) : id;
  }

  /** The size of the regular files under {@code root}, each inode once; changes nothing. */
  public static long sizeOf(Path root) throws IOException {
    long[] total = {0};
    eachOnce(
        root,
        (path, attrs) -> {
          if (attrs.isRegularFile()) {
            total[0] += attrs.size();
          }
        });
    return total[0];
  }

  private static long walk(Path root, boolean strict) throws IOException {
    long[] total = {0};
    eachOnce(
        root,
        (path, attrs) -> {
          if (strict && attrs.isOther() && isUnsafeDevice(path)) {
            Files.delete(path);
            return;
          }
          shift(path, attrs, strict);
          if (attrs.isRegularFile()) {
            total[0] += attrs.size();
          }
        });
    return total[0];
  }

  /** What a walk does to one directory or file. */
  private interface Step {
    void apply(Path path, BasicFileAttributes attrs) throws IOException;
  }

  /**
   * Applies {@code step} to every directory under {@code root} and to every other file once: a hard
   * link seen again was handled already (strict mode would take its shifted ids for ids outside the
   * range). walkFileTree without FOLLOW_LINKS reports a symlink as a file and never enters its
   * target.
   */
  private static void eachOnce(Path root, Step step) throws IOException {
    Set<Object> seen = new HashSet<>();
    Files.walkFileTree(
        root,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs)
              throws IOException {
            step.apply(dir, attrs);
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFile(Path file, BasicFileAttributes attrs)
              throws IOException {
            if (seen.add(attrs.fileKey())) {
              step.apply(file, attrs);
            }
            return FileVisitResult.CONTINUE;
          }
        });
  }

  /** A block device, or a character device other than 0/0 (an overlayfs whiteout). */
  private static boolean isUnsafeDevice(Path path) throws IOException {
    Map<String, Object> unix = Files.readAttributes(path, "unix:mode,rdev", NOFOLLOW);
    int type = (Integer) unix.get("mode") & S_IFMT;
    long rdev = (Long) unix.get("rdev");
    return type == S_IFBLK || (type == S_IFCHR && rdev != 0);
  }

  private static void shift(Path path, BasicFileAttributes attrs, boolean strict)
      throws IOException {
    Map<String, Object> unix = Files.readAttributes(path, "unix:uid,gid,mode", NOFOLLOW);
    int uid = (Integer) unix.get("uid");
    int gid = (Integer) unix.get("gid");
    // Ids already >= UID_SHIFT were shifted before (a hard link seen twice, or a re-run).
    chown(
        path,
        attrs,
        unix,
        strict || uid < Image.UID_SHIFT ? shifted(path, uid, "uid") : -1,
        strict || gid < Image.UID_SHIFT ? shifted(path, gid, "gid") : -1);
  }

  /**
   * Sets the uid and gid that are not -1 (as chown(2) reads -1: unchanged; lchown: "unix:uid" takes
   * a number, so ids without a host user name work) and then the setuid/setgid bits again: the
   * kernel clears them on chown, even root's, and sudo must stay setuid root.
   */
  private static void chown(
      Path path, BasicFileAttributes attrs, Map<String, Object> unix, int uid, int gid)
      throws IOException {
    if (uid != -1) {
      Files.setAttribute(path, "unix:uid", uid, NOFOLLOW);
    }
    if (gid != -1) {
      Files.setAttribute(path, "unix:gid", gid, NOFOLLOW);
    }
    int mode = (Integer) unix.get("mode");
    if ((uid != -1 || gid != -1) && !attrs.isSymbolicLink() && (mode & SETUID_SETGID) != 0) {
      Files.setAttribute(path, "unix:mode", mode & 07777, NOFOLLOW);
    }
  }

  private static int shifted(Path path, int id, String kind) {
    if (id >= Image.ID_RANGE) {
      throw new ImageBuildException(
          path
              + " is owned by "
              + kind
              + " "
              + id
              + ", outside the ids a sandbox maps (0.."
              + (Image.ID_RANGE - 1)
              + ")");
    }
    return id + Image.UID_SHIFT;
  }
}
