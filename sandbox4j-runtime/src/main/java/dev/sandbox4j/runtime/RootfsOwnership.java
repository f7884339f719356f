package dev.sandbox4j.runtime;

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
final class RootfsOwnership {
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
   * of the store, owned by the canonical ids: see {@link IdBlocks}). Symlinks are changed
   * themselves, never followed; setuid and setgid bits are set again after the chown. For a tree
   * nothing runs in (the step's container is gone, the layer moved into the build's own directory).
   */
  static void shiftBlock(Path root, int fromBase, int toBase) throws IOException {
    if (fromBase == toBase) {
      return;
    }
    Set<Object> seen = new HashSet<>();
    Files.walkFileTree(
        root,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs)
              throws IOException {
            move(dir, attrs);
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFile(Path file, BasicFileAttributes attrs)
              throws IOException {
            if (seen.add(attrs.fileKey())) { // a hard link seen again is moved already
              move(file, attrs);
            }
            return FileVisitResult.CONTINUE;
          }

          private void move(Path path, BasicFileAttributes attrs) throws IOException {
            Map<String, Object> unix = Files.readAttributes(path, "unix:uid,gid,mode", NOFOLLOW);
            int uid = (Integer) unix.get("uid");
            int gid = (Integer) unix.get("gid");
            int mode = (Integer) unix.get("mode");
            int newUid = moved(uid);
            int newGid = moved(gid);
            if (newUid != uid) {
              Files.setAttribute(path, "unix:uid", newUid, NOFOLLOW);
            }
            if (newGid != gid) {
              Files.setAttribute(path, "unix:gid", newGid, NOFOLLOW);
            }
            if ((newUid != uid || newGid != gid)
                && !attrs.isSymbolicLink()
                && (mode & SETUID_SETGID) != 0) {
              Files.setAttribute(path, "unix:mode", mode & 07777, NOFOLLOW);
            }
          }

          private int moved(int id) {
            long offset = (id & 0xffffffffL) - fromBase;
            return offset >= 0 && offset < Image.ID_RANGE ? (int) (toBase + offset) : id;
          }
        });
  }

  /** The size of the regular files under {@code root}, each inode once; changes nothing. */
  static long sizeOf(Path root) throws IOException {
    long[] total = {0};
    Set<Object> seen = new HashSet<>();
    Files.walkFileTree(
        root,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
            if (attrs.isRegularFile() && seen.add(attrs.fileKey())) {
              total[0] += attrs.size();
            }
            return FileVisitResult.CONTINUE;
          }
        });
    return total[0];
  }

  private static long walk(Path root, boolean strict) throws IOException {
    long[] total = {0};
    Set<Object> seen = new HashSet<>();
    // walkFileTree without FOLLOW_LINKS reports a symlink as a file and never enters its target.
    Files.walkFileTree(
        root,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs)
              throws IOException {
            shift(dir, attrs, strict);
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFile(Path file, BasicFileAttributes attrs)
              throws IOException {
            // A hard link seen again: shifted already (strict mode would take it for an id
            // outside the range).
            if (!seen.add(attrs.fileKey())) {
              return FileVisitResult.CONTINUE;
            }
            if (strict && attrs.isOther() && isUnsafeDevice(file)) {
              Files.delete(file);
              return FileVisitResult.CONTINUE;
            }
            shift(file, attrs, strict);
            if (attrs.isRegularFile()) {
              total[0] += attrs.size();
            }
            return FileVisitResult.CONTINUE;
          }
        });
    return total[0];
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
    int mode = (Integer) unix.get("mode");
    boolean changed = false;
    // Ids already >= UID_SHIFT were shifted before (a hard link seen twice, or a re-run).
    if (strict || uid < Image.UID_SHIFT) {
      // "unix:uid" takes a number, so ids without a host user name work; NOFOLLOW means lchown.
      Files.setAttribute(path, "unix:uid", shifted(path, uid, "uid"), NOFOLLOW);
      changed = true;
    }
    if (strict || gid < Image.UID_SHIFT) {
      Files.setAttribute(path, "unix:gid", shifted(path, gid, "gid"), NOFOLLOW);
      changed = true;
    }
    // The kernel clears setuid/setgid on chown, even root's; sudo must stay setuid root.
    if (changed && !attrs.isSymbolicLink() && (mode & SETUID_SETGID) != 0) {
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
