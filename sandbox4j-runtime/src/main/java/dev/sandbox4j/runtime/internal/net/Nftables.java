package dev.sandbox4j.runtime.internal.net;

import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.workspace.WorkspaceException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Optional;

/**
 * Runs nftables scripts in this process through {@code libnftables} ({@code java.lang.foreign}),
 * the library {@code nft(8)} is a front end of: a script is one kernel transaction (all or
 * nothing), and no process is spawned (a spawned {@code nft -f} costs 10-20 ms of every create).
 * Where the library cannot be loaded, {@code nft -f -} runs the script instead.
 *
 * <p><b>One context, made early.</b> libnftables 1.0.6 waits for the kernel's answer with {@code
 * select(2)} on its netlink socket, and glibc aborts the whole process ("bit out of range 0 -
 * FD_SETSIZE on fd_set") when that socket's number is 1024 or more. A context opens its socket when
 * it is made, at the lowest free number; a JVM that made one per call died as soon as it held about
 * a thousand descriptors (an exec helper's socket per sandbox it ran a command in: about 500
 * sandboxes, measured by {@code bench/density}). So the JVM makes one context, when this class is
 * loaded ({@link #prepare}: when an engine is built, before its sandboxes' descriptors exist), and
 * keeps it, with its socket at that low number, for every script. A JVM that holds more than {@link
 * #SAFE_DESCRIPTORS} descriptors when the class loads makes none and spawns {@code nft -f -}.
 *
 * <p>Thread-safe: calls take turns on the one context (a libnftables context is not thread-safe).
 */
public final class Nftables {
  private static final int NFT_CTX_DEFAULT = 0;
  private static final MethodHandle CTX_NEW;
  private static final MethodHandle BUFFER_OUTPUT;
  private static final MethodHandle BUFFER_ERROR;
  private static final MethodHandle GET_OUTPUT;
  private static final MethodHandle GET_ERROR;
  private static final MethodHandle RUN;

  /**
   * Below FD_SETSIZE (1024) with room to spare: a JVM that already holds more when this class loads
   * runs {@code nft -f -} instead, whose socket is numbered in a process of its own.
   */
  private static final int SAFE_DESCRIPTORS = 900;

  /**
   * The JVM's context; null where the library is missing or made none. Guarded by {@link #LOCK}.
   */
  private static final MemorySegment CONTEXT;

  private static final Object LOCK = new Object();

  static {
    MethodHandle[] h = new MethodHandle[7];
    try {
      Linker linker = Linker.nativeLinker();
      SymbolLookup lib = SymbolLookup.libraryLookup("libnftables.so.1", Arena.global());
      ValueLayout i = ValueLayout.JAVA_INT;
      ValueLayout a = ValueLayout.ADDRESS;
      h[0] =
          linker.downcallHandle(lib.find("nft_ctx_new").orElseThrow(), FunctionDescriptor.of(a, i));
      // h[1] unused: the JVM's one context lives as long as the JVM
      h[2] =
          linker.downcallHandle(
              lib.find("nft_ctx_buffer_output").orElseThrow(), FunctionDescriptor.of(i, a));
      h[3] =
          linker.downcallHandle(
              lib.find("nft_ctx_buffer_error").orElseThrow(), FunctionDescriptor.of(i, a));
      h[4] =
          linker.downcallHandle(
              lib.find("nft_ctx_get_output_buffer").orElseThrow(), FunctionDescriptor.of(a, a));
      h[5] =
          linker.downcallHandle(
              lib.find("nft_ctx_get_error_buffer").orElseThrow(), FunctionDescriptor.of(a, a));
      h[6] =
          linker.downcallHandle(
              lib.find("nft_run_cmd_from_buffer").orElseThrow(), FunctionDescriptor.of(i, a, a));
    } catch (RuntimeException | UnsatisfiedLinkError e) {
      h = new MethodHandle[7];
    }
    CTX_NEW = h[0];
    BUFFER_OUTPUT = h[2];
    BUFFER_ERROR = h[3];
    GET_OUTPUT = h[4];
    GET_ERROR = h[5];
    RUN = h[6];
    CONTEXT = RUN == null || openDescriptors() > SAFE_DESCRIPTORS ? null : newContext();
  }

  /** Loads this class, and so makes the JVM's context, if not done yet. */
  public static void prepare() {
    // nothing else: loading the class is the point
  }

  /** Descriptors this process holds, or MAX_VALUE if unknown (then no context is made). */
  private static long openDescriptors() {
    try (java.util.stream.Stream<java.nio.file.Path> fds =
        java.nio.file.Files.list(java.nio.file.Path.of("/proc/self/fd"))) {
      return fds.count();
    } catch (java.io.IOException | RuntimeException e) {
      return Long.MAX_VALUE;
    }
  }

  /** A context whose output and errors go to buffers, or null if the library makes none. */
  private static MemorySegment newContext() {
    try {
      MemorySegment ctx = (MemorySegment) CTX_NEW.invokeExact(NFT_CTX_DEFAULT);
      if (ctx.equals(MemorySegment.NULL)) {
        return null;
      }
      int ignored = (int) BUFFER_OUTPUT.invokeExact(ctx);
      ignored = (int) BUFFER_ERROR.invokeExact(ctx);
      return ctx;
    } catch (Throwable e) {
      return null;
    }
  }

  private Nftables() {}

  /** Whether {@code nft} or its library is there to run scripts. */
  public static Optional<String> unavailable() {
    if (CONTEXT != null || HostCommand.onPath("nft")) {
      return Optional.empty();
    }
    return Optional.of(
        "nftables is not installed: run `sandbox4j setup` (apt-get install nftables)");
  }

  /**
   * Runs {@code script} as one transaction and returns what it printed (for {@code list} commands).
   *
   * @throws WorkspaceException with nft's error message if the script fails (nothing of it then
   *     took effect)
   */
  public static String run(String script) {
    if (CONTEXT == null) {
      return HostCommand.checkWithInput(java.util.List.of("nft", "-f", "-"), script);
    }
    try (Arena arena = Arena.ofConfined()) {
      synchronized (LOCK) {
        int rc = (int) RUN.invokeExact(CONTEXT, arena.allocateFrom(script));
        // both read on every call: reading a buffer is what empties it for the next script
        String output = string((MemorySegment) GET_OUTPUT.invokeExact(CONTEXT));
        String error = string((MemorySegment) GET_ERROR.invokeExact(CONTEXT)).strip();
        if (rc != 0) {
          throw new WorkspaceException("nftables refused the rules: " + error);
        }
        return output;
      }
    } catch (WorkspaceException e) {
      throw e;
    } catch (Throwable e) {
      throw new WorkspaceException("nftables: " + e, e);
    }
  }

  private static String string(MemorySegment s) {
    return s.equals(MemorySegment.NULL) ? "" : s.reinterpret(Long.MAX_VALUE).getString(0);
  }
}
