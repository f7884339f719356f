package dev.sandbox4j.runtime.internal.engine;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;

/**
 * The system calls of the exec helper's host side ({@link ExecHelper}): a private socket pair,
 * pipes, a spawn that hands the socket to {@code crun exec} as its stdin and stdout (the JDK's
 * {@link ProcessBuilder} passes no descriptor but 0, 1 and 2, and cannot open a socket through
 * {@code /proc/self/fd}), descriptor passing ({@code SCM_RIGHTS}), and reads and writes. Linux on
 * x86-64 and AArch64 (whose {@code msghdr}, {@code cmsghdr} and {@code iovec} layouts agree) with
 * native access only: elsewhere {@link #AVAILABLE} is false.
 */
final class HelperCalls {
  private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
  private static final VarHandle ERRNO =
      CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));

  static final boolean AVAILABLE;
  private static final MethodHandle SOCKETPAIR;
  private static final MethodHandle PIPE2;
  private static final MethodHandle OPEN;
  private static final MethodHandle CLOSE;
  private static final MethodHandle READ;
  private static final MethodHandle SEND;
  private static final MethodHandle SENDMSG;
  private static final MethodHandle SHUTDOWN;
  private static final MethodHandle WAITPID;
  private static final MethodHandle SPAWN;
  private static final MethodHandle FA_INIT;
  private static final MethodHandle FA_DESTROY;
  private static final MethodHandle FA_DUP2;
  private static final MethodHandle FA_OPEN;
  private static final MethodHandle FA_CLOSEFROM;
  private static final MethodHandle STRERROR;
  private static final MethodHandle WRITE;
  private static final MethodHandle SYSCALL;

  static final int O_WRONLY = 01;
  static final int O_CLOEXEC = 02000000;
  private static final int O_CREAT = 0100;
  private static final int O_TRUNC = 01000;
  private static final int MSG_NOSIGNAL = 0x4000;

  static {
    MethodHandle[] h = new MethodHandle[18];
    boolean available = false;
    String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    String arch = System.getProperty("os.arch", "");
    if (os.equals("linux") && (arch.equals("amd64") || arch.equals("aarch64"))) {
      try {
        Linker linker = Linker.nativeLinker();
        SymbolLookup libc = linker.defaultLookup();
        Linker.Option errno = Linker.Option.captureCallState("errno");
        ValueLayout i = ValueLayout.JAVA_INT;
        ValueLayout l = ValueLayout.JAVA_LONG;
        ValueLayout a = ValueLayout.ADDRESS;
        h[0] = down(linker, libc, "socketpair", FunctionDescriptor.of(i, i, i, i, a), errno);
        h[1] = down(linker, libc, "pipe2", FunctionDescriptor.of(i, a, i), errno);
        h[2] =
            linker.downcallHandle(
                libc.find("open").orElseThrow(),
                FunctionDescriptor.of(i, a, i, i),
                errno,
                Linker.Option.firstVariadicArg(2));
        h[3] = down(linker, libc, "close", FunctionDescriptor.of(i, i), errno);
        h[4] = down(linker, libc, "read", FunctionDescriptor.of(l, i, a, l), errno);
        h[5] = down(linker, libc, "send", FunctionDescriptor.of(l, i, a, l, i), errno);
        h[6] = down(linker, libc, "sendmsg", FunctionDescriptor.of(l, i, a, i), errno);
        h[7] = down(linker, libc, "shutdown", FunctionDescriptor.of(i, i, i), errno);
        h[8] = down(linker, libc, "waitpid", FunctionDescriptor.of(i, i, a, i), errno);
        h[9] = down(linker, libc, "posix_spawn", FunctionDescriptor.of(i, a, a, a, a, a, a), null);
        h[10] =
            down(linker, libc, "posix_spawn_file_actions_init", FunctionDescriptor.of(i, a), null);
        h[11] =
            down(
                linker,
                libc,
                "posix_spawn_file_actions_destroy",
                FunctionDescriptor.of(i, a),
                null);
        h[12] =
            down(
                linker,
                libc,
                "posix_spawn_file_actions_adddup2",
                FunctionDescriptor.of(i, a, i, i),
                null);
        h[13] =
            down(
                linker,
                libc,
                "posix_spawn_file_actions_addopen",
                FunctionDescriptor.of(i, a, i, a, i, i),
                null);
        h[14] =
            down(
                linker,
                libc,
                "posix_spawn_file_actions_addclosefrom_np",
                FunctionDescriptor.of(i, a, i),
                null);
        h[15] = down(linker, libc, "strerror", FunctionDescriptor.of(a, i), null);
        h[16] = down(linker, libc, "write", FunctionDescriptor.of(l, i, a, l), errno);
        h[17] =
            linker.downcallHandle(
                libc.find("syscall").orElseThrow(),
                FunctionDescriptor.of(l, l, l, l, l, l),
                errno,
                Linker.Option.firstVariadicArg(1));
        available = true;
      } catch (RuntimeException | Error unavailable) {
        java.util.Arrays.fill(h, null); // no native access, or an older libc: the slow path
      }
    }
    AVAILABLE = available;
    SOCKETPAIR = h[0];
    PIPE2 = h[1];
    OPEN = h[2];
    CLOSE = h[3];
    READ = h[4];
    SEND = h[5];
    SENDMSG = h[6];
    SHUTDOWN = h[7];
    WAITPID = h[8];
    SPAWN = h[9];
    FA_INIT = h[10];
    FA_DESTROY = h[11];
    FA_DUP2 = h[12];
    FA_OPEN = h[13];
    FA_CLOSEFROM = h[14];
    STRERROR = h[15];
    WRITE = h[16];
    SYSCALL = h[17];
  }

  private HelperCalls() {}

  private static MethodHandle down(
      Linker linker, SymbolLookup libc, String name, FunctionDescriptor fd, Linker.Option errno) {
    MemorySegment symbol = libc.find(name).orElseThrow();
    return errno == null
        ? linker.downcallHandle(symbol, fd)
        : linker.downcallHandle(symbol, fd, errno);
  }

  private static int errno(MemorySegment state) {
    return (int) ERRNO.get(state, 0L);
  }

  static String strerror(int errno) {
    try {
      MemorySegment s = (MemorySegment) STRERROR.invokeExact(errno);
      return s.reinterpret(256).getString(0);
    } catch (Throwable t) {
      return "errno " + errno;
    }
  }

  private static IOException failure(String call, int errno) {
    return new IOException(call + ": " + strerror(errno) + " (errno " + errno + ")");
  }

  private static RuntimeException rethrow(Throwable t) {
    if (t instanceof RuntimeException r) {
      return r;
    }
    if (t instanceof Error e) {
      throw e;
    }
    return new IllegalStateException(t);
  }

  /** A connected pair of unix stream sockets, close-on-exec. */
  static int[] socketPair() throws IOException {
    return descriptorPair(
        "socketpair",
        (state, fds) ->
            (int) SOCKETPAIR.invokeExact(state, 1 /* AF_UNIX */, 1 | O_CLOEXEC, 0, fds));
  }

  /** A pipe, close-on-exec: {read end, write end}. */
  static int[] pipe() throws IOException {
    return descriptorPair("pipe2", (state, fds) -> (int) PIPE2.invokeExact(state, fds, O_CLOEXEC));
  }

  /** A call that fills {@code fds} with two descriptors; negative on failure, errno in state. */
  private interface PairCall {
    int call(MemorySegment state, MemorySegment fds) throws Throwable;
  }

  private static int[] descriptorPair(String name, PairCall call) throws IOException {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment fds = arena.allocate(ValueLayout.JAVA_INT, 2);
      if (call.call(state, fds) < 0) {
        throw failure(name, errno(state));
      }
      return new int[] {
        fds.getAtIndex(ValueLayout.JAVA_INT, 0), fds.getAtIndex(ValueLayout.JAVA_INT, 1)
      };
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  /** Opens {@code path} (a host path the engine chose, e.g. {@code /proc/self/fd/N}). */
  static int open(String path, int flags) throws IOException {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      int fd = (int) OPEN.invokeExact(state, arena.allocateFrom(path), flags | O_CLOEXEC, 0);
      if (fd < 0) {
        throw failure("open " + path, errno(state));
      }
      return fd;
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  static void close(int fd) {
    if (fd < 0) {
      return;
    }
    try (Arena arena = Arena.ofConfined()) {
      int ignored = (int) CLOSE.invokeExact(arena.allocate(CAPTURE), fd);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  /** Shuts both directions of socket {@code fd} down: wakes a thread blocked reading it. */
  static void shutdown(int fd) {
    try (Arena arena = Arena.ofConfined()) {
      int ignored = (int) SHUTDOWN.invokeExact(arena.allocate(CAPTURE), fd, 2 /* SHUT_RDWR */);
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  /**
   * Reads exactly {@code buffer.length} bytes, or returns false at EOF before the first byte (a
   * partial message then EOF is an error).
   */
  static boolean readFully(int fd, byte[] buffer) throws IOException {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment buf = arena.allocate(buffer.length);
      int got = 0;
      while (got < buffer.length) {
        long n = (long) READ.invokeExact(state, fd, buf.asSlice(got), (long) (buffer.length - got));
        if (n < 0) {
          int e = errno(state);
          if (e == 4 /* EINTR */) {
            continue;
          }
          throw failure("read", e);
        }
        if (n == 0) {
          if (got == 0) {
            return false;
          }
          throw new IOException("the stream ended inside a message");
        }
        got += (int) n;
      }
      MemorySegment.copy(buf, ValueLayout.JAVA_BYTE, 0, buffer, 0, buffer.length);
      return true;
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  /** Writes all of {@code data} to socket or pipe {@code fd}, without SIGPIPE for a pipe. */
  static void writeFully(int fd, byte[] data) throws IOException {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment buf = arena.allocateFrom(ValueLayout.JAVA_BYTE, data);
      long done = 0;
      while (done < data.length) {
        long n =
            (long) SEND.invokeExact(state, fd, buf.asSlice(done), data.length - done, MSG_NOSIGNAL);
        if (n < 0) {
          int e = errno(state);
          if (e == 4) {
            continue;
          }
          if (e == 88 /* ENOTSOCK */) {
            n = write(fd, buf.asSlice(done), data.length - done);
          } else {
            throw failure("send", e);
          }
        }
        done += n;
      }
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  private static long write(int fd, MemorySegment buf, long len) throws IOException {
    // a pipe: the JVM ignores SIGPIPE, so a closed reader is an EPIPE here
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      long n = (long) WRITE.invokeExact(state, fd, buf, len);
      if (n < 0) {
        throw failure("write", errno(state));
      }
      return n;
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  /** Sends {@code data} with descriptors {@code fds} attached ({@code SCM_RIGHTS}). */
  static void sendWithFds(int socket, byte[] data, int[] fds) throws IOException {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment buf = arena.allocateFrom(ValueLayout.JAVA_BYTE, data);
      MemorySegment iov = arena.allocate(16, 8);
      iov.set(ValueLayout.ADDRESS, 0, buf);
      iov.set(ValueLayout.JAVA_LONG, 8, data.length);
      long cmsgLen = 16 + 4L * fds.length;
      long space = (cmsgLen + 7) & ~7L;
      MemorySegment control = arena.allocate(space, 8);
      control.set(ValueLayout.JAVA_LONG, 0, cmsgLen);
      control.set(ValueLayout.JAVA_INT, 8, 1); // SOL_SOCKET
      control.set(ValueLayout.JAVA_INT, 12, 1); // SCM_RIGHTS
      for (int k = 0; k < fds.length; k++) {
        control.set(ValueLayout.JAVA_INT, 16 + 4L * k, fds[k]);
      }
      MemorySegment msg = arena.allocate(56, 8);
      msg.set(ValueLayout.ADDRESS, 16, iov);
      msg.set(ValueLayout.JAVA_LONG, 24, 1);
      msg.set(ValueLayout.ADDRESS, 32, control);
      msg.set(ValueLayout.JAVA_LONG, 40, space);
      while (true) {
        long n = (long) SENDMSG.invokeExact(state, socket, msg, MSG_NOSIGNAL);
        if (n < 0 && errno(state) == 4) {
          continue;
        }
        if (n < 0) {
          throw failure("sendmsg", errno(state));
        }
        if (n != data.length) {
          throw new IOException("sendmsg sent " + n + " of " + data.length + " bytes");
        }
        return;
      }
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  /**
   * Spawns {@code argv} with exactly {@code env}, {@code socket} as its stdin and stdout, stderr
   * into {@code log} (a host file the engine chose), no other descriptor; returns its pid.
   */
  static int spawn(List<String> argv, List<String> env, int socket, String log) throws IOException {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment actions = arena.allocate(256, 16);
      int r = (int) FA_INIT.invokeExact(actions);
      if (r != 0) {
        throw failure("posix_spawn_file_actions_init", r);
      }
      try {
        check((int) FA_DUP2.invokeExact(actions, socket, 0), "adddup2");
        check((int) FA_DUP2.invokeExact(actions, socket, 1), "adddup2");
        check(
            (int)
                FA_OPEN.invokeExact(
                    actions, 2, arena.allocateFrom(log), O_WRONLY | O_CREAT | O_TRUNC, 0600),
            "addopen");
        check((int) FA_CLOSEFROM.invokeExact(actions, 3), "addclosefrom");
        MemorySegment pid = arena.allocate(ValueLayout.JAVA_INT);
        r =
            (int)
                SPAWN.invokeExact(
                    pid,
                    arena.allocateFrom(argv.getFirst()),
                    actions,
                    MemorySegment.NULL,
                    strings(arena, argv),
                    strings(arena, env));
        if (r != 0) {
          throw failure("posix_spawn " + argv.getFirst(), r);
        }
        return pid.get(ValueLayout.JAVA_INT, 0);
      } finally {
        int ignored = (int) FA_DESTROY.invokeExact(actions);
      }
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  private static void check(int r, String call) throws IOException {
    if (r != 0) {
      throw failure("posix_spawn_file_actions_" + call, r);
    }
  }

  private static MemorySegment strings(Arena arena, List<String> values) {
    MemorySegment array = arena.allocate(ValueLayout.ADDRESS, values.size() + 1L);
    for (int k = 0; k < values.size(); k++) {
      array.setAtIndex(
          ValueLayout.ADDRESS, k, arena.allocateFrom(values.get(k), StandardCharsets.UTF_8));
    }
    array.setAtIndex(ValueLayout.ADDRESS, values.size(), MemorySegment.NULL);
    return array;
  }

  /**
   * Waits for child {@code pid} of this process; returns its exit code (128 + signal if killed).
   */
  static int waitFor(int pid) throws IOException {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      MemorySegment status = arena.allocate(ValueLayout.JAVA_INT);
      while (true) {
        int r = (int) WAITPID.invokeExact(state, pid, status, 0);
        if (r < 0 && errno(state) == 4) {
          continue;
        }
        if (r < 0) {
          throw failure("waitpid", errno(state));
        }
        int s = status.get(ValueLayout.JAVA_INT, 0);
        return (s & 0x7f) == 0 ? (s >> 8) & 0xff : 128 + (s & 0x7f);
      }
    } catch (IOException e) {
      throw e;
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  /** A pidfd of process {@code pid} ({@code pidfd_open}), close-on-exec; -1 if it is gone. */
  static int pidfdOpen(long pid) {
    try (Arena arena = Arena.ofConfined()) {
      long r = (long) SYSCALL.invokeExact(arena.allocate(CAPTURE), 434L, pid, 0L, 0L, 0L);
      return (int) r;
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }

  /** Whether the process of {@code pidfd} has not been reaped ({@code pidfd_send_signal} 0). */
  static boolean pidfdAlive(int pidfd) {
    try (Arena arena = Arena.ofConfined()) {
      long r = (long) SYSCALL.invokeExact(arena.allocate(CAPTURE), 424L, (long) pidfd, 0L, 0L, 0L);
      return r == 0;
    } catch (Throwable t) {
      throw rethrow(t);
    }
  }
}
