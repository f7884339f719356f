package dev.sandbox4j.modal;

import com.google.protobuf.ByteString;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStartRequest;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStderrConfig;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStdinWriteRequest;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStdioFileDescriptor;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStdioReadRequest;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStdioReadResponse;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStdoutConfig;
import dev.sandbox4j.modal.internal.proto.router.TaskExecWaitRequest;
import dev.sandbox4j.modal.internal.proto.router.TaskExecWaitResponse;
import io.grpc.Context;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.time.Duration;
import java.util.Iterator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A command started through the command router, seen as a {@link Process} so that {@code
 * ProcessCommands} drives it by the same rules as a local one. The exec id is ours (a UUID), which
 * makes {@code TaskExecStart} safe to retry. stdout and stderr are each read by a thread from
 * {@code TaskExecStdioRead}, which resumes at the byte offset already received after a retryable
 * failure (10 retries, from 10 ms doubling, counted again after data). The exit comes from {@code
 * TaskExecWait} (60 s per call, called again after transient failures), not from the streams: a
 * background child may hold them open. stdin goes through {@code TaskExecStdinWrite} at its byte
 * offset; closing it sends EOF. The router cannot kill an exec: that is the backend's job.
 */
final class ModalExec extends Process {
  static final int STREAM_RETRIES = 10;
  private static final Duration STREAM_RETRY_DELAY = Duration.ofMillis(10);
  private static final Duration WAIT_CALL_DEADLINE = Duration.ofSeconds(60);
  private static final Duration OUTPUT_IDLE = Duration.ofMillis(500);
  private static final Duration OUTPUT_IN_FLIGHT_MAX = Duration.ofSeconds(30);

  /** The exit code when the exit could not be learnt; {@link #failure()} says why. */
  static final int UNKNOWN_EXIT = -1;

  private final CommandRouter router;
  private final String execId;
  private final ChunkStream stdout;
  private final ChunkStream stderr;
  private final Stdin stdin = new Stdin();
  private final CompletableFuture<Process> exit = new CompletableFuture<>();
  private final Context.CancellableContext calls = Context.current().withCancellation();
  private volatile int exitCode = UNKNOWN_EXIT;
  private volatile long lastDataNanos = System.nanoTime();
  private final java.util.concurrent.CountDownLatch streamsEnded =
      new java.util.concurrent.CountDownLatch(2);
  private volatile StatusRuntimeException failure;

  private ModalExec(CommandRouter router, String execId) {
    this.router = router;
    this.execId = execId;
    this.stdout = new ChunkStream(() -> {});
    this.stderr = new ChunkStream(() -> {});
  }

  /** Starts {@code argv} in {@code workdir} with the env of {@code secretIds}. */
  static ModalExec start(
      CommandRouter router, List<String> argv, String workdir, List<String> secretIds) {
    ModalExec exec = new ModalExec(router, UUID.randomUUID().toString());
    TaskExecStartRequest.Builder request =
        TaskExecStartRequest.newBuilder()
            .setTaskId(router.taskId())
            .setExecId(exec.execId)
            .addAllCommandArgs(argv)
            .setStdoutConfig(TaskExecStdoutConfig.TASK_EXEC_STDOUT_CONFIG_PIPE)
            .setStderrConfig(TaskExecStderrConfig.TASK_EXEC_STDERR_CONFIG_PIPE)
            .addAllSecretIds(secretIds);
    if (workdir != null) {
      request.setWorkdir(workdir);
    }
    if (router.isShutdown()) {
      // the provider dropped this router when it destroyed the sandbox
      throw Status.UNAVAILABLE.withDescription("the sandbox was destroyed").asRuntimeException();
    }
    retryTransient(() -> router.call(s -> s.taskExecStart(request.build())));
    String name = exec.execId.substring(0, 8);
    Thread.ofVirtual()
        .name("sandbox4j-modal-stdout-" + name)
        .start(
            () ->
                exec.pump(
                    TaskExecStdioFileDescriptor.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT,
                    exec.stdout));
    Thread.ofVirtual()
        .name("sandbox4j-modal-stderr-" + name)
        .start(
            () ->
                exec.pump(
                    TaskExecStdioFileDescriptor.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR,
                    exec.stderr));
    Thread.ofVirtual().name("sandbox4j-modal-wait-" + name).start(exec::awaitExit);
    return exec;
  }

  /** Why the exit is unknown, if it is. */
  StatusRuntimeException failure() {
    return failure;
  }

  /** Copies one output stream of the exec into {@code sink}, resuming after transient failures. */
  private void pump(TaskExecStdioFileDescriptor fd, ChunkStream sink) {
    try {
      pumpUntilEnd(fd, sink);
    } finally {
      streamsEnded.countDown();
    }
  }

  private void pumpUntilEnd(TaskExecStdioFileDescriptor fd, ChunkStream sink) {
    long offset = 0;
    int retries = 0;
    while (true) {
      long start = offset;
      try {
        Iterator<TaskExecStdioReadResponse> responses =
            calls.call(
                () ->
                    router.call(
                        s ->
                            s.taskExecStdioRead(
                                TaskExecStdioReadRequest.newBuilder()
                                    .setTaskId(router.taskId())
                                    .setExecId(execId)
                                    .setOffset(start)
                                    .setFileDescriptor(fd)
                                    .build())));
        while (calls.call(responses::hasNext)) {
          byte[] data = responses.next().getData().toByteArray();
          if (data.length == 0) {
            continue;
          }
          offset += data.length;
          retries = 0;
          lastDataNanos = System.nanoTime();
          if (!sink.offer(data)) {
            return;
          }
        }
        sink.end(null);
        return;
      } catch (InterruptedException e) {
        sink.end(new java.io.InterruptedIOException("interrupted"));
        return;
      } catch (StatusRuntimeException e) {
        if (sink.isClosed()) {
          return;
        }
        boolean unauthenticated = e.getStatus().getCode() == Status.Code.UNAUTHENTICATED;
        if ((!unauthenticated && !Retries.retryable(e.getStatus().getCode()))
            || retries >= STREAM_RETRIES) {
          sink.end(new IOException("reading the command's output failed: " + e.getStatus(), e));
          return;
        }
        if (unauthenticated) {
          try {
            router.renew(); // the JWT expired since the stream was first opened
          } catch (RuntimeException renewal) {
            sink.end(new IOException("renewing the command router's access failed", renewal));
            return;
          }
        }
        sleep(STREAM_RETRY_DELAY.multipliedBy(1L << retries));
        retries++;
      } catch (Exception e) {
        sink.end(new IOException("reading the command's output failed", e));
        return;
      }
    }
  }

  /** Asks for the exit until it is known, or a failure says it never will be. */
  private void awaitExit() {
    while (!exit.isDone()) {
      try {
        TaskExecWaitResponse response =
            calls.call(
                () ->
                    router.call(
                        s ->
                            s.withDeadlineAfter(
                                    WAIT_CALL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS)
                                .taskExecWait(
                                    TaskExecWaitRequest.newBuilder()
                                        .setTaskId(router.taskId())
                                        .setExecId(execId)
                                        .build())));
        exitCode =
            switch (response.getExitStatusCase()) {
              case CODE -> response.getCode();
              case SIGNAL -> 128 + response.getSignal();
              case EXITSTATUS_NOT_SET -> UNKNOWN_EXIT;
            };
        awaitOutputInFlight();
        exit.complete(this);
      } catch (StatusRuntimeException e) {
        if (calls.isCancelled() || router.isShutdown()) {
          failure = e;
          exit.complete(this);
        } else if (Retries.retryable(e.getStatus().getCode())) {
          sleep(Duration.ofSeconds(1));
        } else {
          failure = e;
          exit.complete(this);
        }
      } catch (Exception e) {
        failure = Status.UNKNOWN.withCause(e).asRuntimeException();
        exit.complete(this);
      }
    }
  }

  /**
   * The exit can be known before the output written until then has crossed the network, and whoever
   * drives this process collects output only for a short grace after the exit. So the exit is held
   * back while output still flows: until both streams have ended, or none has brought data for
   * {@link #OUTPUT_IDLE} (a background child keeps them open), at most {@link
   * #OUTPUT_IN_FLIGHT_MAX}.
   */
  private void awaitOutputInFlight() throws InterruptedException {
    long end = System.nanoTime() + OUTPUT_IN_FLIGHT_MAX.toNanos();
    while (!streamsEnded.await(10, TimeUnit.MILLISECONDS)) {
      long now = System.nanoTime();
      if (now - lastDataNanos > OUTPUT_IDLE.toNanos() || now > end) {
        return;
      }
    }
  }

  /** Calls {@code call}, again after transient failures (10 retries from 10 ms, doubling). */
  static <T> T retryTransient(java.util.function.Supplier<T> call) {
    for (int retry = 0; ; retry++) {
      try {
        return call.get();
      } catch (StatusRuntimeException e) {
        if (!Retries.retryable(e.getStatus().getCode()) || retry >= STREAM_RETRIES) {
          throw e;
        }
        sleep(STREAM_RETRY_DELAY.multipliedBy(1L << retry));
      }
    }
  }

  private static void sleep(Duration d) {
    try {
      Thread.sleep(d);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Stops every call of this exec; its streams end. */
  void release() {
    calls.cancel(null);
    stdout.close();
    stderr.close();
  }

  @Override
  public OutputStream getOutputStream() {
    return stdin;
  }

  @Override
  public InputStream getInputStream() {
    return stdout;
  }

  @Override
  public InputStream getErrorStream() {
    return stderr;
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
    return 0; // in the sandbox, on another machine
  }

  /** Ends this side only: an exec cannot be killed through the router. */
  @Override
  public void destroy() {
    release();
  }

  /** stdin at its byte offset; a write returns once Modal has it. */
  private final class Stdin extends OutputStream {
    private long offset;
    private boolean closed;

    @Override
    public void write(int b) throws IOException {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public synchronized void write(byte[] b, int off, int len) throws IOException {
      if (closed) {
        throw new IOException("stdin is closed");
      }
      if (len == 0) {
        return;
      }
      send(ByteString.copyFrom(b, off, len), false);
      offset += len;
    }

    @Override
    public synchronized void close() throws IOException {
      if (!closed) {
        closed = true;
        send(ByteString.EMPTY, true);
      }
    }

    private void send(ByteString data, boolean eof) throws IOException {
      long at = offset;
      try {
        retryTransient(
            () ->
                router.call(
                    s ->
                        s.taskExecStdinWrite(
                            TaskExecStdinWriteRequest.newBuilder()
                                .setTaskId(router.taskId())
                                .setExecId(execId)
                                .setOffset(at)
                                .setData(data)
                                .setEof(eof)
                                .build())));
      } catch (StatusRuntimeException e) {
        throw new IOException("writing the command's stdin failed: " + e.getStatus(), e);
      }
    }
  }
}
