package dev.sandbox4j.runtime.internal.linux;

import dev.sandbox4j.runtime.internal.engine.IdBlocks;
import dev.sandbox4j.runtime.internal.image.Image;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Copying and deleting the engine's directory trees: sandboxes, layers, leftovers of builds. */
public final class Trees {
  /** How deep {@link #copy} goes: each level holds two descriptors. */
  static final int MAX_COPY_DEPTH = 1000;

  /** How many multiply-linked files {@link #copy} keeps linked; more are copied as files. */
  private static final int MAX_LINKED = 4096;

  private Trees() {}

  /**
   * Deletes {@code root} and everything in it, never following a symlink and never crossing into
   * another file system (a leftover /proc or /dev mount inside a dead build, or an overlay still
   * mounted, would lead to the host's files): each directory is opened from its parent's descriptor
   * ({@code O_NOFOLLOW}, {@code RESOLVE_NO_XDEV}), never by a path string, so a directory swapped
   * for a symlink meanwhile is removed as the link it then is. A tree deeper than {@value
   * #DELETE_DEPTH} directories is flattened as it goes (its deep parts moved up to the top of
   * {@code root}), so neither descriptors nor the stack grow with its depth. Parts that someone
   * else deletes meanwhile are fine.
   */
  public static void delete(Path root) throws IOException {
    if (!NativeFs.AVAILABLE) {
      throw new IOException("cannot delete " + root + ": native file operations are unavailable");
    }
    Path abs = root.toAbsolutePath();
    Path parentPath = abs.getParent();
    if (parentPath == null) {
      throw new IllegalArgumentException("refusing to delete /");
    }
    byte[] name = bytes(abs.getFileName().toString());
    int parent;
    try {
      parent =
          NativeFs.openat(
              NativeFs.AT_FDCWD,
              bytes(parentPath.toString()),
              NativeFs.O_PATH | NativeFs.O_DIRECTORY,
              0);
    } catch (NativeFs.Errno e) {
      if (e.errno == NativeFs.ENOENT) {
        return;
      }
      throw new IOException("cannot delete " + root + ": " + e.getMessage(), e);
    }
    try {
      for (long pass = 0; ; pass++) {
        int top = openChild(parent, name, abs.toString());
        if (top < 0) {
          return; // gone, or not a directory and removed
        }
        try {
          empty(top, top, 0, abs.toString());
        } finally {
          NativeFs.close(top);
        }
        try {
          NativeFs.unlinkat(parent, name, NativeFs.AT_REMOVEDIR);
          return;
        } catch (NativeFs.Errno e) {
          if (e.errno == NativeFs.ENOENT) {
            return;
          }
          if (e.errno != NativeFs.ENOTEMPTY || pass > MAX_DELETE_PASSES) {
            throw e;
          }
          // deep parts moved to the top, or something added meanwhile: another pass
        }
      }
    } catch (NativeFs.Errno e) {
      throw new IOException("cannot delete " + root + ": " + e.getMessage(), e);
    } finally {
      NativeFs.close(parent);
    }
  }

  /** How deep {@link #delete} descends before it moves a directory up to the top. */
  static final int DELETE_DEPTH = 128;

  private static final long MAX_DELETE_PASSES = 1_000_000;
  private static final java.security.SecureRandom RANDOM = new java.security.SecureRandom();

  /** Removes what directory {@code dir} holds; moves what is too deep to directory {@code top}. */
  private static void empty(int dir, int top, int depth, String where)
      throws IOException, NativeFs.Errno {
    List<byte[]> children;
    try {
      children = NativeFs.readDirectory(dir);
    } catch (NativeFs.Errno e) {
      if (e.errno == NativeFs.ENOENT) {
        return; // removed meanwhile by another deleter (a gc beside a destroy): nothing left here
      }
      throw e;
    }
    for (byte[] child : children) {
      String path = where + "/" + new String(child, StandardCharsets.UTF_8);
      try {
        NativeFs.unlinkat(dir, child, 0);
        continue;
      } catch (NativeFs.Errno e) {
        if (e.errno == NativeFs.ENOENT) {
          continue;
        }
        if (e.errno != NativeFs.EISDIR && e.errno != NativeFs.EPERM) {
          throw e;
        }
      }
      if (depth + 1 >= DELETE_DEPTH) {
        byte[] moved = bytes(".deep-" + Long.toString(RANDOM.nextLong() & Long.MAX_VALUE, 36));
        NativeFs.renameat(dir, child, top, moved);
        continue;
      }
      int fd = openChild(dir, child, path);
      if (fd < 0) {
        continue;
      }
      try {
        empty(fd, top, depth + 1, path);
      } finally {
        NativeFs.close(fd);
      }
      try {
        NativeFs.unlinkat(dir, child, NativeFs.AT_REMOVEDIR);
      } catch (NativeFs.Errno e) {
        if (e.errno != NativeFs.ENOENT && e.errno != NativeFs.ENOTEMPTY) {
          throw e;
        }
        // not empty: its deep parts were moved up, the next pass takes the rest
      }
    }
  }

  /**
   * Directory {@code name} in {@code dir}, open for reading; -1 if it is gone, or was not a
   * directory (then it is removed: a file, or a symlink swapped in, never followed).
   */
  private static int openChild(int dir, byte[] name, String path)
      throws IOException, NativeFs.Errno {
    try {
      return NativeFs.openat2(
          dir,
          name,
          NativeFs.O_RDONLY | NativeFs.O_DIRECTORY | NativeFs.O_NOFOLLOW,
          0,
          NativeFs.RESOLVE_BENEATH
              | NativeFs.RESOLVE_NO_SYMLINKS
              | NativeFs.RESOLVE_NO_MAGICLINKS
              | NativeFs.RESOLVE_NO_XDEV);
    } catch (NativeFs.Errno e) {
      switch (e.errno) {
        case NativeFs.ENOENT -> {
          return -1;
        }
        case NativeFs.ELOOP, NativeFs.ENOTDIR -> {
          try {
            NativeFs.unlinkat(dir, name, 0);
          } catch (NativeFs.Errno gone) {
            if (gone.errno != NativeFs.ENOENT) {
              throw gone;
            }
          }
          return -1;
        }
        case NativeFs.EXDEV ->
            throw new IOException(
                "a file system is mounted at " + path + ": unmount it, then run gc again");
        default -> throw e;
      }
    }
  }

  /**
   * Copies directory {@code from} to {@code to} (which must not exist; its parent must) like {@code
   * cp -a}: types, owners, modes, times, extended attributes (overlay's {@code trusted.overlay.*}
   * markers), hard links, special files (overlay's whiteouts) and holes; data copy-on-write where
   * the file system can.
   *
   * <p>{@code from} is a tree a sandbox controls (its writable layer). The copy never resolves a
   * path string below {@code from}: each directory is opened from its parent's descriptor with
   * {@code O_NOFOLLOW} and {@code RESOLVE_NO_XDEV}, a symlink is copied as a symlink (its text,
   * never its target), and a file is opened for reading only without following a link and without
   * waiting (a FIFO or device is recreated from its lstat, never read). So even if something swaps
   * a directory for a symlink during the copy, nothing outside {@code from} is read: the copy fails
   * with an error instead.
   *
   * @throws IOException if the copy fails (what was copied is left for the caller to delete), or
   *     the tree is deeper than {@value #MAX_COPY_DEPTH} directories
   */
  public static void copy(Path from, Path to) throws IOException {
    copy(from, to, 0, 0);
  }

  /**
   * {@link #copy(Path, Path)}, the owners shifted from one block of host ids to another: a uid or
   * gid in {@code fromBase..fromBase+65535} becomes the same offset from {@code toBase} (a
   * sandbox's writable layer copied for another sandbox, or for a layer of the store: {@link
   * IdBlocks}). Ids outside that block are kept. Each new entry is given its owner by descriptor,
   * or with {@code fchownat(AT_SYMLINK_NOFOLLOW)} for a symlink or special file, never following a
   * link; setuid and setgid bits are set again after the chown that clears them.
   */
  public static void copy(Path from, Path to, int fromBase, int toBase) throws IOException {
    try (Beneath source = Beneath.open(from)) {
      int dst;
      try {
        NativeFs.Stat st = NativeFs.fstat(source.fd());
        NativeFs.mkdirat(NativeFs.AT_FDCWD, bytes(to.toString()), 0700);
        dst =
            NativeFs.openat(
                NativeFs.AT_FDCWD,
                bytes(to.toString()),
                NativeFs.O_RDONLY | NativeFs.O_DIRECTORY | NativeFs.O_NOFOLLOW,
                0);
        Copy copy = new Copy(from, fromBase, toBase);
        try {
          copy.directory(source.fd(), dst, "", 0);
          copy.finish(source.fd(), dst, st, "");
        } finally {
          NativeFs.close(dst);
          copy.links.values().forEach(NativeFs::close);
        }
      } catch (NativeFs.Errno e) {
        // The copy is new and private: a name it already has was listed twice, renamed while its
        // directory was read.
        String why =
            e.errno == NativeFs.EEXIST
                ? "the tree changed while it was copied: refused"
                : e.getMessage();
        throw new IOException("cannot copy " + from + " to " + to + ": " + why, e);
      }
    }
  }

  /** One copy's state: the multiply-linked files copied so far (their copies, open). */
  private static final class Copy {
    final Path from;
    final Map<List<Long>, Integer> links = new HashMap<>();
    boolean clone = true; // until the file system refuses a clone once

    final int fromBase;
    final int toBase;

    Copy(Path from, int fromBase, int toBase) {
      this.from = from;
      this.fromBase = fromBase;
      this.toBase = toBase;
    }

    /** {@code id} shifted from {@link #fromBase}'s block to {@link #toBase}'s. */
    int shift(int id) {
      long offset = (id & 0xffffffffL) - fromBase;
      return fromBase != toBase && offset >= 0 && offset < Image.ID_RANGE
          ? (int) (toBase + offset)
          : id;
    }

    void directory(int src, int dst, String where, int depth) throws IOException, NativeFs.Errno {
      if (depth >= MAX_COPY_DEPTH) {
        throw new IOException(
            "cannot copy "
                + from
                + ": "
                + where
                + " is deeper than "
                + MAX_COPY_DEPTH
                + " directories");
      }
      for (byte[] name : NativeFs.readDirectory(src)) {
        String path = where + "/" + new String(name, StandardCharsets.UTF_8);
        NativeFs.Stat st;
        try {
          st = NativeFs.lstatAt(src, name);
        } catch (NativeFs.Errno e) {
          if (e.errno == NativeFs.ENOENT) {
            continue;
          }
          throw e;
        }
        if (st.isDirectory()) {
          int s;
          try {
            s = open(src, name, NativeFs.O_RDONLY | NativeFs.O_DIRECTORY, path);
          } catch (NativeFs.Errno e) {
            if (e.errno == NativeFs.ENOENT) {
              continue; // removed (or renamed away) meanwhile
            }
            throw e;
          }
          try {
            NativeFs.Stat again = NativeFs.fstat(s);
            NativeFs.mkdirat(dst, name, 0700);
            int d =
                NativeFs.openat(
                    dst, name, NativeFs.O_RDONLY | NativeFs.O_DIRECTORY | NativeFs.O_NOFOLLOW, 0);
            try {
              directory(s, d, path, depth + 1);
              finish(s, d, again, path);
            } finally {
              NativeFs.close(d);
            }
          } finally {
            NativeFs.close(s);
          }
        } else if (st.isRegular()) {
          regular(src, dst, name, path);
        } else if (st.isSymlink()) {
          byte[] target;
          try {
            target = NativeFs.readlinkat(src, name);
          } catch (NativeFs.Errno e) {
            if (e.errno == NativeFs.ENOENT) {
              continue;
            }
            if (e.errno == NativeFs.EINVAL) {
              throw changed(path); // a symlink no more
            }
            throw e;
          }
          DescriptorCalls.symlinkat(target, dst, name);
          DescriptorCalls.lchownAt(dst, name, shift(st.uid()), shift(st.gid()));
          DescriptorCalls.setTimesAt(dst, name, st.accessed(), st.modified());
        } else {
          // A FIFO, socket or device node (overlay's whiteouts are character devices 0/0):
          // recreated from its lstat, never opened.
          DescriptorCalls.mknodat(dst, name, st.mode(), st.rdevMajor(), st.rdevMinor());
          DescriptorCalls.lchownAt(dst, name, shift(st.uid()), shift(st.gid()));
          DescriptorCalls.chmodAt(dst, name, st.mode() & 07777); // ours, just made: not a symlink
          DescriptorCalls.setTimesAt(dst, name, st.accessed(), st.modified());
        }
      }
    }

    private void regular(int src, int dst, byte[] name, String path)
        throws IOException, NativeFs.Errno {
      // Opened for reading at once: no symlink is followed (O_NOFOLLOW, RESOLVE_NO_SYMLINKS), and
      // if a FIFO was swapped in meanwhile, O_NONBLOCK opens it without waiting (a device node
      // other than a whiteout cannot be made in a sandbox's layer; a whiteout opens as ENXIO).
      int in;
      try {
        in = open(src, name, NativeFs.O_RDONLY | NativeFs.O_NONBLOCK | NativeFs.O_NOCTTY, path);
      } catch (NativeFs.Errno e) {
        if (e.errno == NativeFs.ENOENT) {
          return; // removed meanwhile
        }
        if (e.errno == NativeFs.ENXIO) {
          throw changed(path);
        }
        throw e;
      }
      int out = -1;
      try {
        NativeFs.Stat st = NativeFs.fstat(in);
        if (!st.isRegular()) {
          throw changed(path);
        }
        List<Long> key =
            st.nlink() > 1 ? List.of((long) st.devMajor(), (long) st.devMinor(), st.ino()) : null;
        Integer first = key == null ? null : links.get(key);
        if (first != null) {
          DescriptorCalls.linkFd(first, dst, name);
          return;
        }
        out =
            NativeFs.openat(
                dst,
                name,
                NativeFs.O_WRONLY | NativeFs.O_CREAT | NativeFs.O_EXCL | NativeFs.O_NOFOLLOW,
                0600);
        if (st.size() > 0) {
          clone = FileCopy.copyData(in, out, st.size(), clone);
        }
        FileCopy.copyXattrs(in, out);
        DescriptorCalls.fchown(out, shift(st.uid()), shift(st.gid()));
        NativeFs.fchmod(out, st.mode() & 07777); // after the chown, which clears setuid
        DescriptorCalls.setTimes(out, st.accessed(), st.modified());
        if (key != null && links.size() < MAX_LINKED) {
          links.put(key, out);
          out = -1; // kept open for its other names
        }
      } finally {
        NativeFs.close(in);
        NativeFs.close(out);
      }
    }

    /** A directory's attributes, once its entries are copied (they changed its times). */
    void finish(int src, int dst, NativeFs.Stat st, String path) throws NativeFs.Errno {
      FileCopy.copyXattrs(src, dst);
      DescriptorCalls.fchown(dst, shift(st.uid()), shift(st.gid()));
      NativeFs.fchmod(dst, st.mode() & 07777);
      DescriptorCalls.setTimes(dst, st.accessed(), st.modified());
    }

    /** Opens {@code name} in {@code dir} without following it or crossing a mount. */
    private int open(int dir, byte[] name, int flags, String path)
        throws IOException, NativeFs.Errno {
      try {
        return NativeFs.openat2(
            dir,
            name,
            flags | NativeFs.O_NOFOLLOW,
            0,
            NativeFs.RESOLVE_BENEATH
                | NativeFs.RESOLVE_NO_SYMLINKS
                | NativeFs.RESOLVE_NO_MAGICLINKS
                | NativeFs.RESOLVE_NO_XDEV);
      } catch (NativeFs.Errno e) {
        if (e.errno == NativeFs.ELOOP || e.errno == NativeFs.ENOTDIR || e.errno == NativeFs.EXDEV) {
          throw changed(path);
        }
        throw e;
      }
    }

    private IOException changed(String path) {
      return new IOException(
          "cannot copy "
              + from
              + ": "
              + path
              + " changed while it was copied (or is a mount point): refused");
    }
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
