package dev.sandbox4j.kubernetes;

import io.fabric8.kubernetes.api.model.Status;
import io.fabric8.kubernetes.client.dsl.ExecWatch;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A pod exec seen as a {@link Process}, so that {@code ProcessCommands} drives it by the same rules
 * as a local one. The exec's WebSocket (subprotocol {@code v4.channel.k8s.io}) carries stdout on
 * channel 1, stderr on 2 and, last, the exit status on 3: a {@code Status} JSON, {@code Success},
 * or {@code Failure} with reason {@code NonZeroExitCode} and the code as the message of the cause
 * whose reason is {@code ExitCode}. fabric8's exec listener parses it; this class adds what it
 * cannot say:
 *
 * <ul>
 *   <li>a connection that ends without a status (a cut stream) is {@link #cut()}, never an exit
 *       code;
 *   <li>a status that is not an exit (the exec could not start) keeps its message ({@link
 *       #failure()});
 *   <li>stdin's end: v4 has no way to close stdin alone (v5's close signal is not served by every
 *       API server, nor by fabric8's mock), so stdin is framed ({@code LENGTH\n} then that many
 *       bytes, {@code 0\n} at the end) and decoded in the pod by the command wrapper, which closes
 *       the command's stdin there ({@link KubernetesWorkspace#WRAPPER}).
 * </ul>
 */
final class PodExecProcess extends Process {
  /** What {@link #exitValue} says for a stream cut before its status. */
  static final int NO_STATUS = 255;

  private final ExecWatch watch;
  private final OutputStream stdin;
  private final CompletableFuture<Process> exit = new CompletableFuture<>();
  private final AtomicReference<Status> status;
  private volatile int exitCode = -1;
  private volatile boolean cut;
  private volatile String failure;

  /**
   * @param prelude the first frame on stdin, what the wrapper reads before the command's own stdin
   */
  PodExecProcess(ExecWatch watch, byte[] prelude, AtomicReference<Status> status) {
    this.watch = watch;
    this.status = status;
    FramedStdin framed = new FramedStdin(watch.getInput());
    try {
      framed.writeFrame(prelude);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException("cannot send the command to the exec", e);
    }
    this.stdin = framed;
    watch
        .exitCode()
        .whenComplete(
            (code, error) -> {
              if (error != null || code == null) {
                cut = true;
                exitCode = NO_STATUS;
              } else if (code < 0) {
                Status s = status.get();
                failure = s == null ? "no exit code in the exec's status" : s.getMessage();
                exitCode = NO_STATUS;
              } else {
                exitCode = code;
              }
              exit.complete(this);
            });
  }

  /** Whether the connection ended without an exit status. */
  boolean cut() {
    return cut;
  }

  /** The status message of an exec that ended with no exit code, else null. */
  String failure() {
    return failure;
  }

  @Override
  public OutputStream getOutputStream() {
    return stdin;
  }

  @Override
  public InputStream getInputStream() {
    return watch.getOutput();
  }

  @Override
  public InputStream getErrorStream() {
    return watch.getError();
  }

  @Override
  public int waitFor() throws InterruptedException {
    try {
      exit.get();
    } catch (java.util.concurrent.ExecutionException e) {
      throw new IllegalStateException(e.getCause());
    }
    return exitCode;
  }

  @Override
  public CompletableFuture<Process> onExit() {
    return exit;
  }

  @Override
  public int exitValue() {
    if (!exit.isDone()) {
      throw new IllegalThreadStateException("the exec is still running");
    }
    return exitCode;
  }

  @Override
  public boolean isAlive() {
    return !exit.isDone();
  }

  @Override
  public long pid() {
    return 0; // in the pod's pid namespace, on another machine
  }

  /** Ends this side only: killing is the backend's job (an exec cannot be killed by the API). */
  @Override
  public void destroy() {
    watch.close();
  }

  void release() {
    watch.close();
  }

  /** Each write is one frame {@code LENGTH\n BYTES}; close sends {@code 0\n}, the end. */
  private static final class FramedStdin extends OutputStream {
    private static final int MAX_FRAME = 16 * 1024;
    private final OutputStream exec;
    private boolean closed;

    FramedStdin(OutputStream exec) {
      this.exec = exec;
    }

    @Override
    public void write(int b) throws IOException {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public synchronized void write(byte[] b, int off, int len) throws IOException {
      if (closed) {
        throw new IOException("stdin is closed");
      }
      // small frames: a WebSocket server limits the size of a frame (64 KiB by default in Vert.x)
      for (int at = off; at < off + len; at += MAX_FRAME) {
        int n = Math.min(MAX_FRAME, off + len - at);
        byte[] frame = new byte[n + 8];
        byte[] header = (n + "\n").getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(header, 0, frame, 0, header.length);
        System.arraycopy(b, at, frame, header.length, n);
        exec.write(frame, 0, header.length + n);
        exec.flush();
      }
    }

    /** One frame, however long, sent in WebSocket messages of at most {@code MAX_FRAME} bytes. */
    synchronized void writeFrame(byte[] body) throws IOException {
      byte[] header = (body.length + "\n").getBytes(StandardCharsets.US_ASCII);
      byte[] all = new byte[header.length + body.length];
      System.arraycopy(header, 0, all, 0, header.length);
      System.arraycopy(body, 0, all, header.length, body.length);
      for (int at = 0; at < all.length; at += MAX_FRAME) {
        exec.write(all, at, Math.min(MAX_FRAME, all.length - at));
      }
      exec.flush();
    }

    @Override
    public synchronized void close() throws IOException {
      if (!closed) {
        closed = true;
        exec.write("0\n".getBytes(StandardCharsets.US_ASCII));
        exec.flush();
      }
    }
  }
}
