package dev.sandbox4j.runtime.internal.linux;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The file system identity of the calling thread, and of no other: {@code setfsuid}, {@code
 * setfsgid} and the <em>raw</em> {@code setgroups} system call (glibc's wrapper changes every
 * thread of the process, the system call only the calling one). A file operation done as the
 * sandbox's user takes its identity here and gives it back.
 */
public final class ThreadCredentials {
  private static final boolean AARCH64 = "aarch64".equals(System.getProperty("os.arch"));
  private static final int PR_GET_DUMPABLE = 3;
  private static final int PR_SET_DUMPABLE = 4;

  private static final long SYS_SETGROUPS = AARCH64 ? 159 : 116;
  private static final long SYS_GETGROUPS = AARCH64 ? 158 : 115;

  /**
   * Whether the process was dumpable when this class was loaded: before the first {@link #assume},
   * the only call that changes a file system id (and with it, the process's dumpable flag).
   */
  private static final boolean DUMPABLE = dumpable();

  private ThreadCredentials() {}

  /** A thread's file system identity: fsuid, fsgid and supplementary groups. */
  public record Identity(int fsuid, int fsgid, int[] groups) {}

  /**
   * Gives the calling thread, and only it, the file system identity of {@code uid}/{@code gid},
   * with {@code gid} as its only supplementary group; returns the identity it had, for {@link
   * #restore}. The thread must start as root (fsuid 0). If the new identity does not read back as
   * asked, the old one is restored and this fails.
   */
  public static Identity assume(int uid, int gid) throws NativeFs.Errno {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      MemorySegment groups = arena.allocate(ValueLayout.JAVA_INT, 1024);
      long n = (long) Libc.SYSCALL_2.invokeExact(state, SYS_GETGROUPS, 1024L, groups);
      if (n < 0) {
        throw new NativeFs.Errno("getgroups", Libc.errno(state));
      }
      int[] saved = groups.asSlice(0, n * 4).toArray(ValueLayout.JAVA_INT);
      int fsuid = (int) Libc.SETFSUID.invokeExact(state, -1); // -1 is invalid: only reads
      int fsgid = (int) Libc.SETFSGID.invokeExact(state, -1);
      if (fsuid != 0) {
        throw new NativeFs.Errno("assume the sandbox user's identity (not root)", NativeFs.EPERM);
      }
      Identity old = new Identity(fsuid, fsgid, saved);
      MemorySegment one = arena.allocate(ValueLayout.JAVA_INT, 1);
      one.set(ValueLayout.JAVA_INT, 0, gid);
      long r = (long) Libc.SYSCALL_2.invokeExact(state, SYS_SETGROUPS, 1L, one);
      if (r != 0) {
        throw new NativeFs.Errno("setgroups", Libc.errno(state));
      }
      int ignoredGid = (int) Libc.SETFSGID.invokeExact(state, gid);
      int ignoredUid = (int) Libc.SETFSUID.invokeExact(state, uid);
      if ((int) Libc.SETFSUID.invokeExact(state, -1) != uid
          || (int) Libc.SETFSGID.invokeExact(state, -1) != gid) {
        restore(old);
        throw new NativeFs.Errno("assume the sandbox user's identity", NativeFs.EPERM);
      }
      return old;
    } catch (NativeFs.Errno | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /**
   * Gives the calling thread back {@code old}. A change of fsuid makes the process non-dumpable:
   * that is undone too if the process was dumpable (its real and effective ids stay root
   * throughout, so this exposes nothing to the sandbox's user).
   */
  public static void restore(Identity old) {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(Libc.CAPTURE);
      int ignoredUid = (int) Libc.SETFSUID.invokeExact(state, old.fsuid());
      int ignoredGid = (int) Libc.SETFSGID.invokeExact(state, old.fsgid());
      MemorySegment groups = arena.allocate(ValueLayout.JAVA_INT, Math.max(1, old.groups().length));
      MemorySegment.copy(old.groups(), 0, groups, ValueLayout.JAVA_INT, 0, old.groups().length);
      long r =
          (long)
              Libc.SYSCALL_2.invokeExact(state, SYS_SETGROUPS, (long) old.groups().length, groups);
      if (r != 0 || (int) Libc.SETFSUID.invokeExact(state, -1) != old.fsuid()) {
        throw new IllegalStateException(
            "cannot restore a file thread's identity: " + NativeFs.strerror(Libc.errno(state)));
      }
      if (DUMPABLE) {
        int ignored = (int) Libc.PRCTL.invokeExact(state, PR_SET_DUMPABLE, 1L);
      }
    } catch (RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  private static boolean dumpable() {
    if (Libc.PRCTL == null) {
      return false;
    }
    try (Arena arena = Arena.ofConfined()) {
      return (int) Libc.PRCTL.invokeExact(arena.allocate(Libc.CAPTURE), PR_GET_DUMPABLE, 0L) == 1;
    } catch (Throwable t) {
      return false;
    }
  }
}
