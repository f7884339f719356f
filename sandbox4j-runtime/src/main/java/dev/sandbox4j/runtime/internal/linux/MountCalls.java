package dev.sandbox4j.runtime.internal.linux;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * {@code mount}/{@code umount2} of sandbox roots (a spawned {@code mount(8)} cost a few
 * milliseconds of every create and destroy), and idmapped clones of a mount tree with the new mount
 * API ({@code open_tree}, {@code mount_setattr}). Every call returns or throws {@link
 * NativeFs.Errno}.
 */
public final class MountCalls {
  private MountCalls() {}

  public static final int MNT_DETACH = 2;

  public static final long MS_NOSUID = 2;
  public static final long MS_NODEV = 4;
  public static final long MS_REMOUNT = 32;
  public static final long MS_BIND = 4096;

  /** {@code mount(source, target, type, 0, options)}: a new mount, with no flags. */
  public static void mount(String source, Path target, String type, String options)
      throws NativeFs.Errno {
    mount(source, target, type, 0L, options);
  }

  /** {@code mount(source, target, type, flags, options)}; {@code options} may be null. */
  public static void mount(String source, Path target, String type, long flags, String options)
      throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment data =
          options == null
              ? MemorySegment.NULL
              : Libc.cString(arena, options.getBytes(StandardCharsets.UTF_8));
      int r =
          (int)
              Libc.MOUNT.invokeExact(
                  state,
                  Libc.cString(arena, source.getBytes(StandardCharsets.UTF_8)),
                  Libc.cString(arena, Libc.utf8(target)),
                  Libc.cString(arena, type.getBytes(StandardCharsets.UTF_8)),
                  flags,
                  data);
      if (r != 0) {
        throw new NativeFs.Errno("mount", Libc.errno(state));
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  // The new mount API: the same numbers on x86-64 and aarch64.
  private static final long SYS_OPEN_TREE = 428;
  private static final long SYS_MOUNT_SETATTR = 442;
  private static final long OPEN_TREE_CLONE = 1;
  private static final long OPEN_TREE_CLOEXEC = 02000000;
  public static final long MOUNT_ATTR_RDONLY = 0x1;
  static final long MOUNT_ATTR_NOSUID = 0x2;
  public static final long MOUNT_ATTR_NODEV = 0x4;
  private static final long MOUNT_ATTR_IDMAP = 0x00100000;

  /**
   * A detached clone of the mount tree at {@code source} with its ids shown through the user
   * namespace {@code usernsFd} (an idmapped mount: a file whose on-disk uid is {@code k} in that
   * namespace shows as the host id {@code k} maps to) and {@code attributes} set, mounted nowhere
   * ({@code open_tree(OPEN_TREE_CLONE)}, {@code mount_setattr(MOUNT_ATTR_IDMAP)}, no {@code
   * move_mount}): the returned descriptor ({@code O_CLOEXEC}; the caller closes it) names it, and
   * {@code /proc/self/fd/<fd>} reaches it for as long as it is open (an overlay lower, say, which
   * keeps a private clone of it).
   */
  public static int idmappedTree(Path source, int usernsFd, long attributes) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment empty = Libc.cString(arena, new byte[0]);
      long tree =
          (long)
              Libc.SYSCALL_3.invokeExact(
                  state,
                  SYS_OPEN_TREE,
                  (long) NativeFs.AT_FDCWD,
                  Libc.cString(arena, Libc.utf8(source)),
                  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
      if (tree < 0) {
        throw new NativeFs.Errno("open_tree", Libc.errno(state));
      }
      MemorySegment attr = arena.allocate(32); // struct mount_attr
      attr.set(ValueLayout.JAVA_LONG, 0, MOUNT_ATTR_IDMAP | attributes); // attr_set
      attr.set(ValueLayout.JAVA_LONG, 24, usernsFd); // userns_fd
      long r =
          (long)
              Libc.SYSCALL_5.invokeExact(
                  state, SYS_MOUNT_SETATTR, tree, empty, (long) NativeFs.AT_EMPTY_PATH, attr, 32L);
      if (r != 0) {
        NativeFs.Errno e = new NativeFs.Errno("mount_setattr", Libc.errno(state));
        NativeFs.close((int) tree);
        throw e;
      }
      return (int) tree;
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** {@code umount2(target, flags)}. */
  public static void umount2(Path target, int flags) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      int r = (int) Libc.UMOUNT2.invokeExact(state, Libc.cString(arena, Libc.utf8(target)), flags);
      if (r != 0) {
        throw new NativeFs.Errno("umount2", Libc.errno(state));
      }
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }
}
