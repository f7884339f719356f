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
 * <p>Thread-safe: each call has a context of its own.
 */
public final class Nftables {
  private static final int NFT_CTX_DEFAULT = 0;
  private static final MethodHandle CTX_NEW;
  private static final MethodHandle CTX_FREE;
  private static final MethodHandle BUFFER_OUTPUT;
  private static final MethodHandle BUFFER_ERROR;
  private static final MethodHandle GET_OUTPUT;
  private static final MethodHandle GET_ERROR;
  private static final MethodHandle RUN;

  static {
    MethodHandle[] h = new MethodHandle[7];
    try {
      Linker linker = Linker.nativeLinker();
      SymbolLookup lib = SymbolLookup.libraryLookup("libnftables.so.1", Arena.global());
      ValueLayout i = ValueLayout.JAVA_INT;
      ValueLayout a = ValueLayout.ADDRESS;
      h[0] =
          linker.downcallHandle(lib.find("nft_ctx_new").orElseThrow(), FunctionDescriptor.of(a, i));
      h[1] =
          linker.downcallHandle(
              lib.find("nft_ctx_free").orElseThrow(), FunctionDescriptor.ofVoid(a));
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
    CTX_FREE = h[1];
    BUFFER_OUTPUT = h[2];
    BUFFER_ERROR = h[3];
    GET_OUTPUT = h[4];
    GET_ERROR = h[5];
    RUN = h[6];
  }

  private Nftables() {}

  /** Whether {@code nft} or its library is there to run scripts. */
  public static Optional<String> unavailable() {
    if (RUN != null || HostCommand.onPath("nft")) {
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
    if (RUN == null) {
      return HostCommand.checkWithInput(java.util.List.of("nft", "-f", "-"), script);
    }
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment ctx = (MemorySegment) CTX_NEW.invokeExact(NFT_CTX_DEFAULT);
      if (ctx.equals(MemorySegment.NULL)) {
        throw new WorkspaceException("nftables: cannot create a context");
      }
      try {
        int ignored = (int) BUFFER_OUTPUT.invokeExact(ctx);
        ignored = (int) BUFFER_ERROR.invokeExact(ctx);
        int rc = (int) RUN.invokeExact(ctx, arena.allocateFrom(script));
        if (rc != 0) {
          String error = string((MemorySegment) GET_ERROR.invokeExact(ctx)).strip();
          throw new WorkspaceException("nftables refused the rules: " + error);
        }
        return string((MemorySegment) GET_OUTPUT.invokeExact(ctx));
      } finally {
        CTX_FREE.invokeExact(ctx);
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
