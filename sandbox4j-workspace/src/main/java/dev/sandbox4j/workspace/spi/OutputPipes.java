package dev.sandbox4j.workspace.spi;

import java.io.File;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * stdout and stderr pipes that the JDK does not manage.
 *
 * <p>When a {@link Process} exits, the JDK drains what its own stdout/stderr pipes hold at that
 * instant and closes them. Output that a background child writes a moment later is then lost, and
 * the child's next write gets SIGPIPE. These pipes are made with {@code pipe2(2)} instead and
 * handed to the child through {@code /proc/self/fd}, so they stay open until every writer has
 * closed them: output within the drain grace is kept, and a background child never loses its
 * reader. On systems without {@code /proc/self/fd} or without native access, {@link #open()}
 * returns null and the JDK's pipes are used.
 *
 * <p>The read ends are read through {@link FileChannel}s, whose close wakes a thread blocked in a
 * read (a {@link FileInputStream}'s does not): once output has been handed over ({@link #readEnd}),
 * the reading threads end at once. This object keeps its own descriptor of each read end until
 * {@link #close}, so that the read end can be handed to another process.
 */
final class OutputPipes implements AutoCloseable {
  private static final int O_CLOEXEC = 02000000;
  private static final MethodHandle PIPE2;
  private static final MethodHandle CLOSE;

  static {
    MethodHandle pipe2 = null;
    MethodHandle close = null;
    if (Files.isDirectory(Path.of("/proc/self/fd"))) {
      try {
        Linker linker = Linker.nativeLinker();
        var libc = linker.defaultLookup();
        pipe2 =
            linker.downcallHandle(
                libc.find("pipe2").orElseThrow(),
                FunctionDescriptor.of(
                    ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
        close =
            linker.downcallHandle(
                libc.find("close").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
      } catch (RuntimeException | Error unavailable) {
        pipe2 = null; // native access denied or no libc: fall back to the JDK's pipes
      }
    }
    PIPE2 = pipe2;
    CLOSE = close;
  }

  private final int[] stdout;
  private final int[] stderr;
  private boolean writeEndsClosed;

  private OutputPipes(int[] stdout, int[] stderr) {
    this.stdout = stdout;
    this.stderr = stderr;
  }

  /** Two fresh pipes, or null where they cannot be made (use the JDK's pipes then). */
  static OutputPipes open() {
    if (PIPE2 == null) {
      return null;
    }
    int[] out = pipe();
    if (out == null) {
      return null;
    }
    int[] err = pipe();
    if (err == null) {
      closeFd(out[0]);
      closeFd(out[1]);
      return null;
    }
    return new OutputPipes(out, err);
  }

  /** The write end of stdout or stderr, as a file a child's output can be redirected to. */
  File writeEnd(boolean isStderr) {
    int fd = (isStderr ? stderr : stdout)[1];
    if (fd < 0 || writeEndsClosed) {
      throw new IllegalStateException("the write ends are closed");
    }
    return procFd(fd);
  }

  /** Closes this JVM's write ends: call once the child has started (it holds its own). */
  void closeWriteEnds() {
    if (!writeEndsClosed) {
      writeEndsClosed = true;
      closeFd(stdout[1]);
      closeFd(stderr[1]);
    }
  }

  /**
   * The read end of stdout, as a stream that reaches EOF when every writer has closed, and whose
   * close ends a read blocked in another thread.
   */
  InputStream stdout() throws IOException {
    return reopen(stdout);
  }

  /** The read end of stderr, as {@link #stdout()}. */
  InputStream stderr() throws IOException {
    return reopen(stderr);
  }

  /**
   * The read end of stdout or stderr as a file that a child process's stdin can be redirected from
   * (until {@link #close}).
   */
  File readEnd(boolean isStderr) {
    int fd = (isStderr ? stderr : stdout)[0];
    if (fd < 0) {
      throw new IllegalStateException("the pipes are closed");
    }
    return procFd(fd);
  }

  private static InputStream reopen(int[] pipe) throws IOException {
    if (pipe[0] < 0) {
      throw new IllegalStateException("the pipes are closed");
    }
    return Channels.newInputStream(
        FileChannel.open(procFd(pipe[0]).toPath(), StandardOpenOption.READ));
  }

  @Override
  public void close() {
    closeWriteEnds();
    for (int[] pipe : new int[][] {stdout, stderr}) {
      if (pipe[0] >= 0) {
        closeFd(pipe[0]);
        pipe[0] = -1;
      }
    }
  }

  private static File procFd(int fd) {
    return new File("/proc/self/fd/" + fd);
  }

  private static int[] pipe() {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment fds = arena.allocate(ValueLayout.JAVA_INT, 2);
      int rc = (int) PIPE2.invokeExact(fds, O_CLOEXEC);
      if (rc != 0) {
        return null;
      }
      return new int[] {
        fds.getAtIndex(ValueLayout.JAVA_INT, 0), fds.getAtIndex(ValueLayout.JAVA_INT, 1)
      };
    } catch (Throwable t) {
      return null;
    }
  }

  private static void closeFd(int fd) {
    try {
      int ignored = (int) CLOSE.invokeExact(fd);
    } catch (Throwable t) {
      // nothing more to do for a descriptor we cannot close
    }
  }
}
