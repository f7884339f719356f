package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.NativeFs;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

/**
 * Opens TCP connections to a sandbox's own loopback from the host, with no veth and whatever the
 * sandbox's egress: the socket is created inside the sandbox's network namespace.
 *
 * <p>A socket belongs to the network namespace its creating thread was in when it called {@code
 * socket(2)}, for its whole life, whichever thread uses it later. So a fresh platform thread joins
 * the namespace of the sandbox's init ({@code setns(fd, CLONE_NEWNET)}, which changes only the
 * calling thread), creates an IPv4 socket, and ends; the caller connects it to {@code
 * 127.0.0.1:port} from any thread. A thread per connection costs tens of microseconds and means no
 * thread ever has to find its way back into the host's namespace: a thread that failed to would
 * open the next sandbox's socket in the wrong one.
 *
 * <p>The target is checked, because the pid comes from a file and pids are reused: the namespace
 * file is opened first, and only then is the process checked to be in the sandbox's cgroup (a pid
 * reused before the open fails that check; one reused after it leaves the descriptor on the
 * sandbox's namespace), and the namespace must not be the host's.
 */
public final class NetNamespace {
  private static final int CLONE_NEWNET = 0x40000000;
  private static final StructLayout CAPTURE = Linker.Option.captureStateLayout();
  private static final VarHandle ERRNO =
      CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
  private static final MethodHandle SETNS;

  static {
    MethodHandle setns = null;
    if (NativeFs.AVAILABLE) {
      try {
        Linker linker = Linker.nativeLinker();
        setns =
            linker.downcallHandle(
                linker.defaultLookup().find("setns").orElseThrow(),
                FunctionDescriptor.of(
                    ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT),
                Linker.Option.captureCallState("errno"));
      } catch (RuntimeException | Error e) {
        setns = null;
      }
    }
    SETNS = setns;
  }

  private NetNamespace() {}

  /** The sandbox has no running init to connect through (stopped, or being started). */
  public static final class NotRunning extends IOException {
    private static final long serialVersionUID = 1L;

    NotRunning(String message) {
      super(message);
    }
  }

  /**
   * A blocking socket connected to {@code 127.0.0.1:port} inside sandbox {@code id}'s network
   * namespace.
   *
   * @throws NotRunning if the sandbox's init is not there to connect through
   * @throws java.net.ConnectException if nothing listens on {@code port} there
   */
  public static SocketChannel connect(Engine engine, String id, int port) throws IOException {
    SocketChannel channel = openIn(engine, id);
    try {
      channel.connect(new InetSocketAddress("127.0.0.1", port));
      return channel;
    } catch (IOException | RuntimeException e) {
      channel.close();
      throw e;
    }
  }

  /** An unconnected IPv4 socket created in sandbox {@code id}'s network namespace. */
  static SocketChannel openIn(Engine engine, String id) throws IOException {
    if (SETNS == null) {
      throw new IOException("cannot enter network namespaces here: setns(2) is not available");
    }
    long pid =
        OciRuntime.initPid(engine.dir(id).resolve("bundle"))
            .orElseThrow(() -> new NotRunning("sandbox local:" + id + " has no running init"));
    int fd;
    try {
      fd =
          NativeFs.openat(
              NativeFs.AT_FDCWD,
              ("/proc/" + pid + "/ns/net").getBytes(StandardCharsets.UTF_8),
              NativeFs.O_RDONLY,
              0);
    } catch (NativeFs.Errno e) {
      throw new NotRunning("sandbox local:" + id + " has no running init (pid " + pid + " gone)");
    }
    try {
      String cgroup = engine.cgroups().pathOf(id);
      if (!inCgroup(pid, cgroup)) {
        throw new NotRunning(
            "sandbox local:"
                + id
                + " has no running init (pid "
                + pid
                + " is not in "
                + cgroup
                + ")");
      }
      if (NativeFs.fstat(fd).ino() == hostNamespaceInode()) {
        throw new IOException(
            "refusing to connect: sandbox local:" + id + " shares the host's network namespace");
      }
      int nsFd = fd;
      CompletableFuture<SocketChannel> opened = new CompletableFuture<>();
      Thread.ofPlatform()
          .name("sandbox4j-netns-" + id)
          .daemon()
          .start(
              () -> {
                try {
                  setns(nsFd);
                  opened.complete(SocketChannel.open(StandardProtocolFamily.INET));
                } catch (Throwable t) {
                  opened.completeExceptionally(t);
                }
                // the thread ends here, in the sandbox's namespace: nothing else runs on it
              });
      try {
        return opened.get();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        opened.thenAccept(NetNamespace::closeQuietly);
        throw new java.io.InterruptedIOException("interrupted while entering local:" + id);
      } catch (ExecutionException e) {
        throw e.getCause() instanceof IOException io
            ? io
            : new IOException("cannot open a socket in local:" + id + ": " + e.getCause(), e);
      }
    } catch (NativeFs.Errno e) {
      throw new IOException("cannot inspect the namespace of local:" + id + ": " + e.getMessage());
    } finally {
      NativeFs.close(fd);
    }
  }

  private static void setns(int fd) throws IOException {
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment state = arena.allocate(CAPTURE);
      int r = (int) SETNS.invokeExact(state, fd, CLONE_NEWNET);
      if (r != 0) {
        int errno = (int) ERRNO.get(state, 0L);
        throw new IOException("setns(CLONE_NEWNET): " + NativeFs.strerror(errno));
      }
    } catch (IOException | RuntimeException | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new IllegalStateException(t);
    }
  }

  /** Whether process {@code pid} is in cgroup {@code path} (or below it), on cgroup v2 or v1. */
  private static boolean inCgroup(long pid, String path) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/cgroup"))) {
        String p = line.substring(line.indexOf(':', line.indexOf(':') + 1) + 1);
        if (p.equals(path) || p.startsWith(path + "/")) {
          return true;
        }
      }
      return false;
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  private static long hostNamespaceInode() throws IOException {
    return ((Number) Files.getAttribute(Path.of("/proc/self/ns/net"), "unix:ino")).longValue();
  }

  private static void closeQuietly(SocketChannel c) {
    try {
      c.close();
    } catch (IOException e) {
      // nothing to do
    }
  }
}
