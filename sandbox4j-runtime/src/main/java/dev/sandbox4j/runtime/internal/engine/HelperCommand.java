package dev.sandbox4j.runtime.internal.engine;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A command that a sandbox's {@link ExecHelper} runs, as the {@link Process} that the workspace's
 * {@code ProcessCommands} drives: its stdin is a pipe this JVM made, its exit the helper's EXITED
 * message (or the helper's loss). Its output goes to pipes {@code ProcessCommands} made, so its own
 * streams are empty. {@link #destroy} does nothing: the engine kills a command through its cgroup.
 */
final class HelperCommand extends Process {
  private final long hostPid;
  private final OutputStream stdin;
  private final ExecHelper.Pending pending;
  private final CompletableFuture<Process> exit;

  HelperCommand(long hostPid, int stdinWriteEnd, ExecHelper.Pending pending) throws IOException {
    this.hostPid = hostPid;
    // a stream of our own descriptor of the pipe, opened through /proc (the raw one is closed by
    // the caller): FileOutputStream's close then ends the command's stdin
    this.stdin = new FileOutputStream("/proc/self/fd/" + stdinWriteEnd);
    this.pending = pending;
    this.exit = pending.ended.thenApply(o -> this);
  }

  /** How the command ended; only once it has. */
  ExecHelper.Outcome outcome() {
    return pending.ended.getNow(null);
  }

  @Override
  public OutputStream getOutputStream() {
    return stdin;
  }

  @Override
  public InputStream getInputStream() {
    return InputStream.nullInputStream();
  }

  @Override
  public InputStream getErrorStream() {
    return InputStream.nullInputStream();
  }

  @Override
  public int waitFor() throws InterruptedException {
    try {
      pending.ended.get();
    } catch (ExecutionException e) {
      throw new IllegalStateException(e.getCause());
    }
    return exitValue();
  }

  @Override
  public boolean waitFor(long timeout, TimeUnit unit) throws InterruptedException {
    try {
      pending.ended.get(timeout, unit);
      return true;
    } catch (TimeoutException e) {
      return false;
    } catch (ExecutionException e) {
      throw new IllegalStateException(e.getCause());
    }
  }

  @Override
  public CompletableFuture<Process> onExit() {
    return exit;
  }

  /** The command's exit code; 255 if it could not start or the helper was lost (see outcome). */
  @Override
  public int exitValue() {
    ExecHelper.Outcome o = pending.ended.getNow(null);
    if (o == null) {
      throw new IllegalThreadStateException("the command is running");
    }
    return o.exit() < 0 ? 255 : o.exit();
  }

  @Override
  public boolean isAlive() {
    return !pending.ended.isDone();
  }

  @Override
  public void destroy() {
    // killed through its cgroup (Exec), never by pid
  }

  @Override
  public long pid() {
    return hostPid;
  }
}
