package dev.sandbox4j.cli;

import java.io.PrintStream;
import java.util.Map;
import java.util.Objects;
import java.util.function.LongSupplier;

/**
 * The progress of the CLI's long work on stderr: image builds, fork, snapshot, hibernate, and the
 * creation of a sandbox (which builds the default image the first time).
 *
 * <p>The engine reports steps ("building the default image: …", a line of mmdebstrap), never how
 * far along it is, so this shows no percentage: a spinner, the time elapsed and the latest step.
 *
 * <ul>
 *   <li>{@link Mode#TERMINAL}: one line, redrawn in place ({@code \r} and erase-to-end-of-line) at
 *       each step and a few times a second, cut to the terminal's width; erased when the work ends,
 *       so that the result and any message start on a clean line.
 *   <li>{@link Mode#PLAIN} (stderr is not a terminal, {@code --no-progress}, {@code TERM=dumb},
 *       {@code CI}): each step once, as a line of its own, without {@code \r} or escape sequences.
 *       Work known to be long says what it is at its start; other work only before its first step,
 *       so that a quick create leaves no line in a script's log.
 *   <li>{@link Mode#QUIET} ({@code --quiet}): nothing.
 * </ul>
 *
 * <p>A step that arrives while no work is {@linkplain #start started} (the default image built by
 * the first tool call of {@code run}, say) is a plain line in every mode but quiet: the work's end
 * is not known here, and a line redrawn under a command's output would garble it.
 *
 * <p>Thread-safe: steps come from the engine's threads and the ticker; every method holds this
 * object's lock, which guards {@link #current}, {@link #headingShown} and what is printed.
 */
final class Progress {

  /** How the progress is shown. */
  enum Mode {
    TERMINAL,
    PLAIN,
    QUIET
  }

  /** How often the terminal line is redrawn between steps, for the spinner and the clock. */
  private static final long TICK_MILLIS = 200;

  private static final String ERASE_LINE = "\r\033[K";
  private static final String SPINNER = "|/-\\";

  /** The heading of steps outside any work: only building the default image reports any. */
  static final String DEFAULT_HEADING = "building the default image (once; about a minute)";

  private final PrintStream err;
  private final Mode mode;
  private final int width;
  private final LongSupplier nanoTime;
  private final boolean tick;

  private Task current;
  private boolean headingShown;

  /**
   * @param err where progress goes
   * @param mode how it is shown
   * @param width the terminal's width in columns; a terminal line is cut to one less
   * @param nanoTime the clock of the elapsed time
   * @param tick whether a thread redraws the terminal line between steps (tests redraw by hand)
   */
  Progress(PrintStream err, Mode mode, int width, LongSupplier nanoTime, boolean tick) {
    this.err = Objects.requireNonNull(err, "err");
    this.mode = Objects.requireNonNull(mode, "mode");
    if (width < 10) {
      throw new IllegalArgumentException("width must be at least 10 columns, was " + width);
    }
    this.width = width;
    this.nanoTime = Objects.requireNonNull(nanoTime, "nanoTime");
    this.tick = tick;
  }

  /**
   * The mode a run of the CLI gets: quiet with {@code --quiet}; plain with {@code --no-progress},
   * when stderr is not a terminal, or when {@code TERM} is {@code dumb} or {@code CI} is set (CI
   * logs keep every {@code \r}); a redrawn line otherwise.
   */
  static Mode mode(
      boolean quiet, boolean noProgress, boolean stderrIsTerminal, Map<String, String> env) {
    if (quiet) {
      return Mode.QUIET;
    }
    String ci = env.getOrDefault("CI", "");
    boolean inCi = !ci.isBlank() && !ci.equalsIgnoreCase("false") && !ci.equals("0");
    if (noProgress || !stderrIsTerminal || "dumb".equals(env.get("TERM")) || inCi) {
      return Mode.PLAIN;
    }
    return Mode.TERMINAL;
  }

  /** The terminal's width from {@code $COLUMNS}, else 80. */
  static int width(Map<String, String> env) {
    String columns = env.getOrDefault("COLUMNS", "");
    if (columns.matches("[0-9]{2,4}")) {
      return Math.max(10, Integer.parseInt(columns));
    }
    return 80;
  }

  /**
   * Starts a piece of work; close the task when it ends, whether it failed or not. Work already
   * started is ended first: the CLI does one thing at a time.
   *
   * @param title what is being done, e.g. {@code forking local:k3x9ab01cd2e}
   * @param known whether the work is known to take a while: plain mode names it at once
   * @param silent whether to show nothing of it, nor of its steps ({@code --json} promises a clean
   *     stderr)
   */
  synchronized Task start(String title, boolean known, boolean silent) {
    if (current != null) {
      current.close();
    }
    Task task = new Task(title, silent || mode == Mode.QUIET);
    current = task;
    if (!task.silent) {
      if (mode == Mode.PLAIN && known) {
        task.announced = true;
        line("sandbox4j: " + title);
      } else if (mode == Mode.TERMINAL) {
        task.draw();
        if (tick) {
          task.ticker = Thread.ofVirtual().name("sandbox4j-progress").start(task::tickUntilClosed);
        }
      }
    }
    return task;
  }

  /** A step of the current work, as the engine reports it. */
  synchronized void step(String step) {
    Objects.requireNonNull(step, "step");
    if (mode == Mode.QUIET) {
      return;
    }
    Task task = current;
    if (task == null) {
      if (!headingShown) {
        headingShown = true;
        line("sandbox4j: " + DEFAULT_HEADING + ":");
      }
      line("  " + step);
      return;
    }
    if (task.silent) {
      return;
    }
    task.step = oneLine(step);
    if (mode == Mode.TERMINAL) {
      task.draw();
    } else {
      if (!task.announced) {
        task.announced = true;
        line("sandbox4j: " + task.title + ":");
      }
      line("  " + step);
    }
  }

  /** Redraws the terminal line of the current work, as the ticker does. */
  synchronized void redraw() {
    if (current != null && !current.silent && mode == Mode.TERMINAL) {
      current.draw();
    }
  }

  private void line(String text) {
    err.println(text);
    err.flush();
  }

  /** {@code text} on one line: control characters (tabs, a stray {@code \r}) become spaces. */
  private static String oneLine(String text) {
    StringBuilder b = new StringBuilder(text.length());
    text.codePoints().forEach(c -> b.appendCodePoint(Character.isISOControl(c) ? ' ' : c));
    return b.toString().strip();
  }

  /** {@code 7s}, {@code 1m05s}, {@code 1h02m}. */
  static String elapsed(long nanos) {
    long s = Math.max(0, nanos) / 1_000_000_000L;
    if (s < 60) {
      return s + "s";
    }
    if (s < 3600) {
      return String.format("%dm%02ds", s / 60, s % 60);
    }
    return String.format("%dh%02dm", s / 3600, s % 3600 / 60);
  }

  /** One piece of work; {@link #close} ends it (erasing its terminal line). Idempotent. */
  final class Task implements AutoCloseable {
    private final String title;
    private final boolean silent;
    private final long started = nanoTime.getAsLong();
    private String step;
    private boolean announced;
    private int frame;
    private boolean drawn;
    private Thread ticker;

    private Task(String title, boolean silent) {
      this.title = oneLine(Objects.requireNonNull(title, "title"));
      this.silent = silent;
    }

    /** Under the lock: the line, over whatever was drawn before. */
    private void draw() {
      String text =
          SPINNER.charAt(frame++ % SPINNER.length())
              + " "
              + title
              + " "
              + elapsed(nanoTime.getAsLong() - started)
              + (step == null ? "" : ": " + step);
      int max = width - 1; // the last column would wrap on some terminals
      if (text.codePointCount(0, text.length()) > max) {
        text = text.substring(0, text.offsetByCodePoints(0, max - 3)) + "...";
      }
      err.print(ERASE_LINE + text);
      err.flush();
      drawn = true;
    }

    private void tickUntilClosed() {
      try {
        while (!Thread.currentThread().isInterrupted()) {
          Thread.sleep(TICK_MILLIS);
          synchronized (Progress.this) {
            if (current != this) {
              return;
            }
            draw();
          }
        }
      } catch (InterruptedException closed) {
        // the work ended
      }
    }

    @Override
    public void close() {
      synchronized (Progress.this) {
        if (current != this) {
          return;
        }
        current = null;
        if (ticker != null) {
          ticker.interrupt();
        }
        if (drawn) {
          err.print(ERASE_LINE);
          err.flush();
        }
      }
    }
  }
}
