package dev.sandbox4j.boxd;

import com.google.protobuf.ByteString;
import dev.sandbox4j.boxd.internal.proto.BoxdApiGrpc;
import dev.sandbox4j.boxd.internal.proto.ExecChunk;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceOutputLimitException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.concurrent.CancellationException;

/**
 * One command over boxd's bidirectional {@code Exec} stream. The first frame names the machine and
 * the shell line; stdin follows in frames of {@link #STDIN_CHUNK} as its source yields bytes, and
 * half-closing the stream is EOF. Output frames are counted against the output limit and handed to
 * the callbacks; the frame with an empty {@code data} (or a non-zero {@code exit_code}) carries the
 * exit code. Cancelling the call is how the command is killed: boxd kills what an exec started when
 * its call is cancelled (each exec has its own process namespace), and this class cancels on
 * timeout, output limit, silence past the no-output limit, a failed stdin source, and interrupt.
 *
 * <p>State shared with gRPC's threads is guarded by {@code this}; the caller's thread waits on it.
 */
final class BoxdExec {

  /** Stdin frames stay well under gRPC's 4 MiB message cap, as boxd's clients keep them. */
  static final int STDIN_CHUNK = 256 * 1024;

  /** How long the stream may take to end after the exit frame before the command returns. */
  private static final Duration END_GRACE = Duration.ofSeconds(2);

  /** What is kept of each stream when the options do not retain output (the limit's head). */
  private static final int KEPT_WITHOUT_RETAIN = RunOptions.OUTPUT_LIMIT_KEPT_BYTES;

  /** What happens when the stream ends without an exit code, or fails: the caller decides. */
  static final class StreamFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final transient Status status;

    /** Whether the stdin source was read from: then the command cannot be sent again. */
    final boolean stdinTouched;

    StreamFailure(Status status, boolean stdinTouched, String message, Throwable cause) {
      super(message, cause);
      this.status = status;
      this.stdinTouched = stdinTouched;
    }
  }

  private final RunOptions options;
  private final Duration noOutputLimit;
  private final ByteArrayOutputStream stdout = new ByteArrayOutputStream();
  private final ByteArrayOutputStream stderr = new ByteArrayOutputStream();
  private long total;
  private long lastOutputNanos;
  private Integer exitCode;
  private boolean ended;
  private boolean overLimit;
  private Throwable failure;
  private WorkspaceException stdinFailure;
  private volatile boolean stdinTouched;
  private ClientCallStreamObserver<ExecChunk> requests;

  private BoxdExec(RunOptions options, Duration noOutputLimit) {
    this.options = options;
    this.noOutputLimit = noOutputLimit;
  }

  /**
   * Runs {@code line} on machine {@code vmId} and waits for its exit. The timeout's clock starts
   * here, which is after the machine was acquired.
   *
   * @throws StreamFailure if the stream failed or ended without an exit code
   */
  static CommandResult run(
      BoxdCalls calls, String vmId, String line, RunOptions options, Duration noOutputLimit) {
    return new BoxdExec(options, noOutputLimit).run(calls, vmId, line);
  }

  private CommandResult run(BoxdCalls calls, String vmId, String line) {
    long start = System.nanoTime();
    lastOutputNanos = start;
    var authorized = calls.authorized(BoxdApiGrpc::newStub);
    String token = authorized.token();
    authorized
        .stub()
        .exec(
            new ClientResponseObserver<ExecChunk, ExecChunk>() {
              @Override
              public void beforeStart(ClientCallStreamObserver<ExecChunk> stream) {
                synchronized (BoxdExec.this) {
                  requests = stream;
                }
                stream.setOnReadyHandler(
                    () -> {
                      synchronized (BoxdExec.this) {
                        BoxdExec.this.notifyAll();
                      }
                    });
              }

              @Override
              public void onNext(ExecChunk chunk) {
                received(chunk);
              }

              @Override
              public void onError(Throwable t) {
                synchronized (BoxdExec.this) {
                  failure = t;
                  ended = true;
                  BoxdExec.this.notifyAll();
                }
              }

              @Override
              public void onCompleted() {
                synchronized (BoxdExec.this) {
                  ended = true;
                  BoxdExec.this.notifyAll();
                }
              }
            });
    send(ExecChunk.newBuilder().setVmId(vmId).setCommand(line).build());
    feedStdin();

    long deadline = options.timeout().map(t -> start + t.toNanos()).orElse(Long.MAX_VALUE);
    synchronized (this) {
      try {
        while (!ended && exitCode == null && !overLimit && stdinFailure == null) {
          long now = System.nanoTime();
          long idleEnd = lastOutputNanos + noOutputLimit.toNanos();
          if (now - deadline >= 0 && deadline != Long.MAX_VALUE) {
            cancel("timeout");
            throw new WorkspaceTimeoutException(
                options.timeout().orElseThrow(), stdout.toByteArray(), stderr.toByteArray());
          }
          if (now - idleEnd >= 0) {
            cancel("no output for " + noOutputLimit);
            throw new WorkspaceTimeoutException(
                noOutputLimit, stdout.toByteArray(), stderr.toByteArray());
          }
          long wait =
              Math.min(idleEnd - now, deadline == Long.MAX_VALUE ? Long.MAX_VALUE : deadline - now);
          wait(Math.max(1, Math.min(wait / 1_000_000, 1000)));
        }
      } catch (InterruptedException e) {
        cancel("interrupted");
        Thread.currentThread().interrupt();
        throw new CancellationException(
            "command cancelled by interruption; its boxd exec was cancelled, which kills it");
      }
      if (overLimit) {
        cancel("output limit");
        throw new WorkspaceOutputLimitException(
            options.outputLimit(), stdout.toByteArray(), stderr.toByteArray());
      }
      if (stdinFailure != null) {
        cancel("stdin failed");
        throw stdinFailure;
      }
      if (exitCode != null) {
        // The exit frame is the last word; the stream's end follows. It is not cancelled if it
        // lingers: cancelling kills what the command left running in the background (a server
        // started with nohup ... &), which has to outlive the command.
        try {
          awaitEnd(END_GRACE);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt(); // the command is done: its result stands
        }
        return options.retainOutput()
            ? new CommandResult(exitCode, stdout.toByteArray(), stderr.toByteArray())
            : new CommandResult(exitCode, new byte[0], new byte[0]);
      }
      if (failure != null) {
        Status status = Status.fromThrowable(failure);
        if (status.getCode() == Status.Code.UNAUTHENTICATED) {
          calls.refused(token);
        }
        throw new StreamFailure(
            status, stdinTouched, "the boxd exec stream failed: " + status, failure);
      }
      // a tenth of slack: boxd's clock for the limit started when it last sent, not when we read
      long silence = System.nanoTime() - lastOutputNanos;
      boolean silent = silence >= noOutputLimit.toNanos() - noOutputLimit.toNanos() / 10;
      if (silent) {
        // boxd drops an exec that printed nothing for 30 minutes, without an exit frame
        throw new WorkspaceTimeoutException(
            noOutputLimit, stdout.toByteArray(), stderr.toByteArray());
      }
      throw new StreamFailure(
          Status.UNKNOWN.withDescription("ended without an exit code"),
          stdinTouched,
          "the boxd exec stream ended without an exit code: the command's fate is unknown",
          null);
    }
  }

  private void awaitEnd(Duration grace) throws InterruptedException {
    long end = System.nanoTime() + grace.toNanos();
    while (!ended && end - System.nanoTime() > 0) {
      wait(Math.max(1, (end - System.nanoTime()) / 1_000_000));
    }
  }

  /**
   * An output frame, or the exit frame: boxd's last frame has an empty {@code data} (exit code 0 is
   * the proto default), and a frame with data and a non-zero exit code carries both.
   */
  private void received(ExecChunk chunk) {
    byte[] data = chunk.getData().toByteArray();
    boolean isStderr = chunk.getIsStderr();
    byte[] deliver = null;
    synchronized (this) {
      if (exitCode != null || overLimit) {
        return;
      }
      if (data.length > 0) {
        lastOutputNanos = System.nanoTime();
        long room = options.outputLimit() - total;
        int kept = (int) Math.min(data.length, Math.max(room, 0));
        ByteArrayOutputStream stream = isStderr ? stderr : stdout;
        // without retainOutput, only the head is kept: for a timeout's or the limit's exception
        int keep =
            options.retainOutput()
                ? kept
                : (int) Math.max(0, Math.min(kept, KEPT_WITHOUT_RETAIN - stream.size()));
        stream.write(data, 0, keep);
        total += kept;
        if (data.length > room) {
          overLimit = true;
        }
        if (kept > 0) {
          deliver = kept == data.length ? data : java.util.Arrays.copyOf(data, kept);
        }
      }
      notifyAll();
    }
    if (deliver != null) {
      try {
        (isStderr ? options.onStderr() : options.onStdout()).accept(deliver);
      } catch (RuntimeException | Error e) {
        synchronized (this) {
          stdinFailure =
              new WorkspaceException(
                  "an output callback failed, so the command was killed: " + e, e);
          notifyAll();
        }
        return;
      }
    }
    if (data.length == 0 || chunk.getExitCode() != 0) {
      synchronized (this) {
        if (!overLimit) {
          exitCode = chunk.getExitCode();
        }
        notifyAll();
      }
    }
  }

  /**
   * Streams the stdin source on a platform thread (it may block on a pipe, see {@code
   * OutputCollector}), then half-closes. A failing source cancels the command instead: EOF would
   * tell it that its input was complete, and a {@code cat > file} would commit a truncated file.
   */
  private void feedStdin() {
    var source = options.stdin();
    if (source.isEmpty()) {
      halfClose();
      return;
    }
    Thread.ofPlatform()
        .daemon()
        .name("sandbox4j-boxd-stdin")
        .start(
            () -> {
              byte[] buffer = new byte[STDIN_CHUNK];
              try (InputStream in = source.get()) {
                while (true) {
                  int n;
                  try {
                    stdinTouched = true;
                    n = in.read(buffer);
                  } catch (IOException | RuntimeException e) {
                    synchronized (this) {
                      stdinFailure =
                          new WorkspaceException(
                              "reading the command's stdin failed, so the command was killed: " + e,
                              e);
                      notifyAll();
                    }
                    return;
                  }
                  if (n < 0) {
                    break;
                  }
                  if (n > 0
                      && !send(
                          ExecChunk.newBuilder()
                              .setStdin(true)
                              .setData(ByteString.copyFrom(buffer, 0, n))
                              .build())) {
                    return; // the command ended or was cancelled
                  }
                }
                halfClose();
              } catch (IOException e) {
                halfClose();
              }
            });
  }

  /** Sends a frame once the stream can take it; false if the call has ended. */
  private boolean send(ExecChunk chunk) {
    synchronized (this) {
      try {
        while (!requests.isReady() && !ended && exitCode == null) {
          wait(100);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
      if (ended || exitCode != null || overLimit) {
        return false;
      }
      try {
        requests.onNext(chunk);
        return true;
      } catch (RuntimeException e) {
        return false; // cancelled under us
      }
    }
  }

  private synchronized void halfClose() {
    if (!ended && exitCode == null) {
      try {
        requests.onCompleted();
      } catch (RuntimeException e) {
        // cancelled already
      }
    }
  }

  private synchronized void cancel(String why) {
    try {
      requests.cancel(why, null);
    } catch (RuntimeException e) {
      // ended already
    }
  }
}
