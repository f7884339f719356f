package dev.sandbox4j.workspace;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * How to run one command: extra environment, deadline, stdin, output callbacks and output limit.
 *
 * <p>Defaults: no extra env, no timeout, stdin at EOF, no callbacks, a combined output limit of
 * {@value #DEFAULT_OUTPUT_LIMIT} bytes (10 MiB), stdin not kept open. Instances are immutable; a
 * stdin {@link InputStream} can be consumed by one run only, stdin bytes by any number.
 *
 * <p>Output callbacks are called from a backend thread, in order per stream, with chunks the
 * callback may keep; they must not block for long, since they hold up reading the command's output.
 */
public final class RunOptions {

  /** The default limit on combined stdout + stderr, 10 MiB. */
  public static final long DEFAULT_OUTPUT_LIMIT = 10L * 1024 * 1024;

  /** How much of each stream a {@link WorkspaceOutputLimitException} keeps, 64 KiB. */
  public static final int OUTPUT_LIMIT_KEPT_BYTES = 64 * 1024;

  private static final RunOptions DEFAULTS = builder().build();

  private final Map<String, String> env;
  private final Duration timeout;
  private final byte[] stdinBytes;
  private final InputStream stdinStream;
  private final Consumer<byte[]> onStdout;
  private final Consumer<byte[]> onStderr;
  private final long outputLimit;
  private final boolean retainOutput;
  private final boolean keepStdinOpen;

  private RunOptions(Builder b) {
    this.env = Map.copyOf(b.env);
    this.timeout = b.timeout;
    this.stdinBytes = b.stdinBytes;
    this.stdinStream = b.stdinStream;
    this.onStdout = b.onStdout;
    this.onStderr = b.onStderr;
    this.outputLimit = b.outputLimit;
    this.retainOutput = b.retainOutput;
    this.keepStdinOpen = b.keepStdinOpen;
  }

  /** Options with every default. */
  public static RunOptions defaults() {
    return DEFAULTS;
  }

  /** A builder starting from the defaults. */
  public static Builder builder() {
    return new Builder();
  }

  /** Shorthand for options with only a timeout. */
  public static RunOptions withTimeout(Duration timeout) {
    return builder().timeout(timeout).build();
  }

  /** A builder starting from these options. */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.env.putAll(env);
    b.timeout = timeout;
    b.stdinBytes = stdinBytes;
    b.stdinStream = stdinStream;
    b.onStdout = onStdout;
    b.onStderr = onStderr;
    b.outputLimit = outputLimit;
    b.retainOutput = retainOutput;
    b.keepStdinOpen = keepStdinOpen;
    return b;
  }

  /** Variables layered over the workspace's environment for this command only. */
  public Map<String, String> env() {
    return env;
  }

  /** The deadline, counted from when the workspace is acquired; empty for none. */
  public Optional<Duration> timeout() {
    return Optional.ofNullable(timeout);
  }

  /**
   * The stream to feed the command's stdin, or empty for stdin at EOF. Bytes given to the builder
   * yield a fresh stream on each call.
   */
  public Optional<InputStream> stdin() {
    if (stdinBytes != null) {
      return Optional.of(new ByteArrayInputStream(stdinBytes));
    }
    return Optional.ofNullable(stdinStream);
  }

  /** Called with each chunk of stdout as it arrives; a no-op by default. */
  public Consumer<byte[]> onStdout() {
    return onStdout;
  }

  /** Called with each chunk of stderr as it arrives; a no-op by default. */
  public Consumer<byte[]> onStderr() {
    return onStderr;
  }

  /** The limit on combined stdout + stderr, in bytes. */
  public long outputLimit() {
    return outputLimit;
  }

  /**
   * Whether the result keeps the output (default true). When false, output only reaches the
   * callbacks and the result's stdout and stderr are empty: for long-running commands whose output
   * is consumed as it arrives.
   */
  public boolean retainOutput() {
    return retainOutput;
  }

  /**
   * Whether a command started with {@link Workspace#start} keeps its stdin open after the stdin of
   * these options (default false): then {@link BackgroundCommand#writeStdin} feeds it while it runs
   * and {@link BackgroundCommand#closeStdin} gives it EOF. {@link Workspace#run} rejects options
   * that say so, since nothing could write to the command before it returns.
   */
  public boolean keepStdinOpen() {
    return keepStdinOpen;
  }

  /** Builds {@link RunOptions}; every setter validates its argument and names it on error. */
  public static final class Builder {
    private final Map<String, String> env = new LinkedHashMap<>();
    private Duration timeout;
    private byte[] stdinBytes;
    private InputStream stdinStream;
    private Consumer<byte[]> onStdout = chunk -> {};
    private Consumer<byte[]> onStderr = chunk -> {};
    private long outputLimit = DEFAULT_OUTPUT_LIMIT;
    private boolean retainOutput = true;
    private boolean keepStdinOpen;

    private Builder() {}

    /** Adds one variable; a later value for the same name wins. */
    public Builder env(String name, String value) {
      checkEnvName(name);
      if (value == null || value.indexOf('\0') >= 0) {
        throw new IllegalArgumentException(
            "env value of " + name + " must be non-null and contain no NUL");
      }
      env.put(name, value);
      return this;
    }

    /** Adds every variable of {@code vars}. */
    public Builder env(Map<String, String> vars) {
      Objects.requireNonNull(vars, "env");
      vars.forEach(this::env);
      return this;
    }

    /**
     * Sets the deadline: positive, at most {@link Long#MAX_VALUE} nanoseconds (292 years).
     *
     * @throws IllegalArgumentException if zero, negative or too large
     */
    public Builder timeout(Duration timeout) {
      Objects.requireNonNull(timeout, "timeout (use noTimeout() for none)");
      if (timeout.isZero() || timeout.isNegative()) {
        throw new IllegalArgumentException("timeout must be positive, was " + timeout);
      }
      try {
        timeout.toNanos();
      } catch (ArithmeticException e) {
        throw new IllegalArgumentException("timeout is too large: " + timeout, e);
      }
      this.timeout = timeout;
      return this;
    }

    /** Removes the deadline. */
    public Builder noTimeout() {
      this.timeout = null;
      return this;
    }

    /** Feeds these bytes to stdin, then EOF. */
    public Builder stdin(byte[] bytes) {
      Objects.requireNonNull(bytes, "stdin");
      this.stdinBytes = bytes.clone();
      this.stdinStream = null;
      return this;
    }

    /** Feeds this stream to stdin, then EOF; the run reads it and closes it. */
    public Builder stdin(InputStream stream) {
      this.stdinStream = Objects.requireNonNull(stream, "stdin");
      this.stdinBytes = null;
      return this;
    }

    /** Calls {@code listener} with each chunk of stdout as it arrives. */
    public Builder onStdout(Consumer<byte[]> listener) {
      this.onStdout = Objects.requireNonNull(listener, "onStdout");
      return this;
    }

    /** Calls {@code listener} with each chunk of stderr as it arrives. */
    public Builder onStderr(Consumer<byte[]> listener) {
      this.onStderr = Objects.requireNonNull(listener, "onStderr");
      return this;
    }

    /**
     * Sets the limit on combined stdout + stderr; past it the command is killed and the run raises
     * {@link WorkspaceOutputLimitException}.
     *
     * @throws IllegalArgumentException if not positive
     */
    public Builder outputLimit(long bytes) {
      if (bytes <= 0) {
        throw new IllegalArgumentException("outputLimit must be positive, was " + bytes);
      }
      this.outputLimit = bytes;
      return this;
    }

    /** Whether the result keeps the output; see {@link RunOptions#retainOutput()}. */
    public Builder retainOutput(boolean retain) {
      this.retainOutput = retain;
      return this;
    }

    /**
     * Whether a background command's stdin stays open for {@link BackgroundCommand#writeStdin}; see
     * {@link RunOptions#keepStdinOpen()}.
     */
    public Builder keepStdinOpen(boolean keep) {
      this.keepStdinOpen = keep;
      return this;
    }

    /** Returns the options. */
    public RunOptions build() {
      return new RunOptions(this);
    }

    private static void checkEnvName(String name) {
      if (name == null || name.isEmpty() || name.indexOf('=') >= 0 || name.indexOf('\0') >= 0) {
        throw new IllegalArgumentException(
            "invalid env name "
                + (name == null ? "null" : "'" + name + "'")
                + ": must be non-empty, without '=' or NUL");
      }
    }
  }
}
