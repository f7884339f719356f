package dev.sandbox4j.kubernetes;

import io.fabric8.kubernetes.api.model.Status;
import io.fabric8.kubernetes.client.dsl.ExecListener;
import io.fabric8.kubernetes.client.dsl.ExecWatch;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;

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
  private volatile int exitCode = -1;
  private volatile boolean cut;
  private volatile String failure;

  /**
   * @param prelude the first frame on stdin, what the wrapper reads before the command's own stdin
   */
  PodExecProcess(ExecWatch watch, byte[] prelude, boolean stdinFollows, Outcome outcome) {
    this.watch = watch;
    FramedStdin framed = new FramedStdin(watch.getInput(), exit::isDone, queuedBytesOf(watch));
    try {
      framed.writeFrame(prelude);
      if (!stdinFollows) {
        framed.closed = true; // the wrapper reads no more: nothing to send, nothing to race
      }
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(
          "cannot send the command to the exec: "
              + e.getMessage()
              + (e.getCause() == null ? "" : " (" + e.getCause() + ")"),
          e);
    }
    this.stdin = framed;
    // fabric8 fails its future, and only it, when a stdin message could not be sent: the command
    // lost part of its stdin and would wait forever. A moment's grace lets a status that is already
    // on its way (the command ended, then a late write failed) win.
    watch
        .exitCode()
        .whenComplete(
            (code, error) -> {
              if (error != null) {
                CompletableFuture.delayedExecutor(200, java.util.concurrent.TimeUnit.MILLISECONDS)
                    .execute(() -> outcome.future.complete(new Outcome.Ended(-1, null)));
              }
            });
    outcome.future.whenComplete(
        (o, error) -> {
          if (error != null || o.status == null) {
            cut = true;
            exitCode = NO_STATUS;
          } else if (o.code < 0) {
            failure = o.status.getMessage();
            exitCode = NO_STATUS;
          } else {
            exitCode = o.code;
          }
          exit.complete(this);
          framed.wakeWriter();
        });
  }

  /**
   * How an exec ended, from fabric8's listener, whose calls come in the order of the frames: the
   * status (channel 3) before the close. fabric8's own exit-code future is not used: a stdin write
   * that fails because the server has just closed completes it exceptionally, which can overtake
   * the status still being handled.
   */
  static final class Outcome implements ExecListener {
    record Ended(int code, Status status) {}

    final CompletableFuture<Ended> future = new CompletableFuture<>();

    @Override
    public void onExit(int code, Status status) {
      future.complete(new Ended(code, status));
    }

    @Override
    public void onFailure(Throwable t, ExecListener.Response failureResponse) {
      future.complete(new Ended(-1, null));
    }

    @Override
    public void onClose(int code, String reason) {
      future.complete(new Ended(-1, null));
    }
  }

  private static final System.Logger LOG = System.getLogger(PodExecProcess.class.getName());

  /**
   * How many bytes the exec's WebSocket has queued and not yet handed to TCP. fabric8's exec lets
   * 16 MiB pile up there before a write waits, more than the stdin contract lets pile up on the way
   * to a command that does not read; its {@code WebSocket.queueSize()} is public, but the exec
   * keeps its socket in a private field of {@code ExecWebSocketListener} (fabric8 8.0.0, pinned),
   * read here. If that ever fails the bound falls back to fabric8's 16 MiB, said once in the log.
   */
  private static java.util.function.LongSupplier queuedBytesOf(ExecWatch watch) {
    try {
      java.lang.reflect.Field field = watch.getClass().getDeclaredField("webSocketRef");
      field.setAccessible(true);
      java.util.concurrent.atomic.AtomicReference<?> ref =
          (java.util.concurrent.atomic.AtomicReference<?>) field.get(watch);
      return () ->
          ref.get() instanceof io.fabric8.kubernetes.client.http.WebSocket socket
              ? socket.queueSize()
              : 0;
    } catch (ReflectiveOperationException | RuntimeException e) {
      if (QUEUE_WARNED.compareAndSet(false, true)) {
        LOG.log(
            System.Logger.Level.WARNING,
            "cannot read the exec WebSocket's queue ({0}): stdin writes wait only once fabric8"
                + " queues 16 MiB",
            e.toString());
      }
      return () -> 0;
    }
  }

  private static final java.util.concurrent.atomic.AtomicBoolean QUEUE_WARNED =
      new java.util.concurrent.atomic.AtomicBoolean();

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

  /**
   * Each write is one frame {@code LENGTH\n BYTES}; close sends {@code 0\n}, the end. A write waits
   * while the WebSocket's send queue is full (fabric8 waits there while 16 MiB are queued, which
   * happens when the command does not read and the kubelet stops reading the stream): once the exec
   * has ended the waiting writer is woken by an interrupt (fabric8's wait ends on one, not on the
   * exec's end) and fails.
   */
  private static final class FramedStdin extends OutputStream {
    private static final int MAX_FRAME = 16 * 1024;

    /**
     * At most this many stdin bytes wait in the WebSocket's queue: the rest waits in the caller.
     */
    private static final long MAX_QUEUED = 256 * 1024;

    private final OutputStream exec;
    private final java.util.function.BooleanSupplier ended;
    private final java.util.function.LongSupplier queued;
    private final Object wakeLock = new Object();
    private Thread writer; // under wakeLock: the thread inside write, which a wake-up may interrupt
    boolean closed;

    FramedStdin(
        OutputStream exec,
        java.util.function.BooleanSupplier ended,
        java.util.function.LongSupplier queued) {
      this.exec = exec;
      this.ended = ended;
      this.queued = queued;
    }

    /** Waits while the socket's queue is full, as a pipe write waits for its reader. */
    private void awaitRoom() throws IOException {
      while (queued.getAsLong() > MAX_QUEUED) {
        if (ended.getAsBoolean()) {
          throw new IOException("the command has ended: its stdin is gone");
        }
        try {
          Thread.sleep(5);
        } catch (InterruptedException e) {
          if (ended.getAsBoolean()) {
            throw new IOException("the command has ended: its stdin is gone");
          }
          Thread.currentThread().interrupt();
          throw new java.io.InterruptedIOException("interrupted waiting to write stdin");
        }
      }
    }

    void wakeWriter() {
      synchronized (wakeLock) {
        if (writer != null) {
          writer.interrupt();
        }
      }
    }

    @Override
    public void write(int b) throws IOException {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public synchronized void write(byte[] b, int off, int len) throws IOException {
      synchronized (wakeLock) {
        writer = Thread.currentThread();
      }
      try {
        writeFrames(b, off, len);
      } catch (RuntimeException e) {
        throw new IOException("the exec's stdin is gone (the command ended): " + e.getMessage(), e);
      } finally {
        synchronized (wakeLock) {
          writer = null;
          if (ended.getAsBoolean()) {
            Thread.interrupted(); // a wake-up is for this write only
          }
        }
      }
    }

    private void writeFrames(byte[] b, int off, int len) throws IOException {
      if (closed) {
        throw new IOException("stdin is closed");
      }
      // small frames: a WebSocket server limits the size of a frame (64 KiB by default in Vert.x)
      for (int at = off; at < off + len; at += MAX_FRAME) {
        awaitRoom();
        if (ended.getAsBoolean()) {
          throw new IOException("the command has ended: its stdin is gone");
        }
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
      try {
        sendFrame(body);
      } catch (RuntimeException e) {
        throw new IOException("the exec's stdin is gone: " + e.getMessage(), e);
      }
    }

    private void sendFrame(byte[] body) throws IOException {
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
        try {
          exec.write("0\n".getBytes(StandardCharsets.US_ASCII));
          exec.flush();
        } catch (RuntimeException e) {
          throw new IOException(
              "the exec's stdin is gone (the command ended): " + e.getMessage(), e);
        }
      }
    }
  }
}
