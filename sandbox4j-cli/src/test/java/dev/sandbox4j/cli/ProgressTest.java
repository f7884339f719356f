package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * The progress printer's rendering, given a buffer, a clock and a "terminal" flag it cannot check
 * for itself here; {@link LocalCliTest} shows its plain lines through the real CLI.
 */
class ProgressTest {

  private static final long SECOND = 1_000_000_000L;
  private static final String ERASE = "\r\033[K";

  private final ByteArrayOutputStream buffer = new ByteArrayOutputStream();
  private final PrintStream err = new PrintStream(buffer, true, StandardCharsets.UTF_8);
  private final AtomicLong now = new AtomicLong(5 * SECOND);

  private Progress progress(Progress.Mode mode, int width) {
    return new Progress(err, mode, width, now::get, false);
  }

  private String printed() {
    return buffer.toString(StandardCharsets.UTF_8);
  }

  @Test
  void onATerminalOneLineIsRedrawnWithSpinnerElapsedTimeAndStepThenErased() {
    Progress p = progress(Progress.Mode.TERMINAL, 80);

    try (Progress.Task task = p.start("forking local:abc", true, false)) {
      assertThat(printed()).isEqualTo(ERASE + "| forking local:abc 0s");
      now.addAndGet(2 * SECOND);
      p.step("copying\tthe files");
      now.addAndGet(63 * SECOND);
      p.redraw(); // what the ticker does between steps
    }

    assertThat(printed())
        .isEqualTo(
            ERASE
                + "| forking local:abc 0s"
                + ERASE
                + "/ forking local:abc 2s: copying the files"
                + ERASE
                + "- forking local:abc 1m05s: copying the files"
                + ERASE);
    assertThat(printed()).doesNotContain("\n");
  }

  @Test
  void aTerminalLineIsCutToTheWidthSoThatItNeverWraps() {
    Progress p = progress(Progress.Mode.TERMINAL, 20);

    try (Progress.Task task = p.start("building image default", true, false)) {
      p.step("a long line of mmdebstrap output");
    }

    for (String drawn : printed().split("\r\033\\[K")) {
      assertThat(drawn.length()).as(drawn).isLessThanOrEqualTo(19);
    }
    assertThat(printed()).contains(ERASE + "/ building image...");
  }

  @Test
  void plainModePrintsEachStepOnceAsALineWithoutCarriageReturnsOrEscapes() {
    Progress p = progress(Progress.Mode.PLAIN, 80);

    try (Progress.Task task = p.start("hibernating local:abc", true, false)) {
      now.addAndGet(3 * SECOND);
      p.redraw(); // a tick draws nothing in plain mode
      p.step("checkpointing");
    }

    assertThat(printed())
        .isEqualTo("sandbox4j: hibernating local:abc\n  checkpointing\n")
        .doesNotContain("\r")
        .doesNotContain("\033");
  }

  @Test
  void plainModeNamesQuickWorkOnlyBeforeItsFirstStep() {
    Progress p = progress(Progress.Mode.PLAIN, 80);

    try (Progress.Task task = p.start("creating a local sandbox", false, false)) {
      // most creates report no step: nothing at all
    }
    assertThat(printed()).isEmpty();

    try (Progress.Task task = p.start("creating a local sandbox", false, false)) {
      p.step("I: running apt-get update...");
      p.step("image default ready");
    }
    assertThat(printed())
        .isEqualTo(
            "sandbox4j: creating a local sandbox:\n  I: running apt-get update...\n"
                + "  image default ready\n");
  }

  @Test
  void stepsOutsideAnyWorkArePlainLinesUnderOneHeadingEvenOnATerminal() {
    Progress p = progress(Progress.Mode.TERMINAL, 80);

    p.step("one");
    p.step("two");

    assertThat(printed())
        .isEqualTo("sandbox4j: " + Progress.DEFAULT_HEADING + ":\n  one\n  two\n")
        .doesNotContain("\r");
  }

  @Test
  void quietAndSilentWorkPrintNothing() {
    Progress quiet = progress(Progress.Mode.QUIET, 80);
    try (Progress.Task task = quiet.start("forking local:abc", true, false)) {
      quiet.step("a step");
      quiet.redraw();
    }
    quiet.step("outside");

    Progress terminal = progress(Progress.Mode.TERMINAL, 80);
    try (Progress.Task json = terminal.start("forking local:abc", true, true)) {
      terminal.step("a step");
      terminal.redraw();
    }

    assertThat(printed()).isEmpty();
  }

  @Test
  void startingNewWorkEndsTheOldAndClosingTwiceIsHarmless() {
    Progress p = progress(Progress.Mode.TERMINAL, 80);

    Progress.Task first = p.start("suspending local:a", false, false);
    Progress.Task second = p.start("suspending local:b", false, false);
    first.close(); // already ended: must not erase the second one's line
    String afterFirstClosed = printed();
    second.close();
    second.close();

    assertThat(afterFirstClosed)
        .isEqualTo(ERASE + "| suspending local:a 0s" + ERASE + ERASE + "| suspending local:b 0s");
    assertThat(printed()).isEqualTo(afterFirstClosed + ERASE);
  }

  @Test
  void theModeFollowsTheOptionsTheTerminalAndTheEnvironment() {
    Map<String, String> none = Map.of();
    assertThat(Progress.mode(false, false, true, none)).isEqualTo(Progress.Mode.TERMINAL);
    assertThat(Progress.mode(false, false, false, none)).isEqualTo(Progress.Mode.PLAIN);
    assertThat(Progress.mode(false, true, true, none)).isEqualTo(Progress.Mode.PLAIN);
    assertThat(Progress.mode(true, false, true, none)).isEqualTo(Progress.Mode.QUIET);
    assertThat(Progress.mode(true, true, false, none)).isEqualTo(Progress.Mode.QUIET);
    assertThat(Progress.mode(false, false, true, Map.of("TERM", "dumb")))
        .isEqualTo(Progress.Mode.PLAIN);
    assertThat(Progress.mode(false, false, true, Map.of("CI", "true")))
        .isEqualTo(Progress.Mode.PLAIN);
    assertThat(Progress.mode(false, false, true, Map.of("CI", "false")))
        .isEqualTo(Progress.Mode.TERMINAL);
    assertThat(Progress.mode(false, false, true, Map.of("TERM", "xterm-256color")))
        .isEqualTo(Progress.Mode.TERMINAL);
  }

  @Test
  void theWidthComesFromColumnsElse80() {
    assertThat(Progress.width(Map.of())).isEqualTo(80);
    assertThat(Progress.width(Map.of("COLUMNS", "132"))).isEqualTo(132);
    assertThat(Progress.width(Map.of("COLUMNS", "wide"))).isEqualTo(80);
    assertThatThrownBy(() -> new Progress(err, Progress.Mode.TERMINAL, 3, now::get, false))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("width must be at least 10");
  }

  @Test
  void elapsedTimeReadsLikeAClock() {
    assertThat(Progress.elapsed(0)).isEqualTo("0s");
    assertThat(Progress.elapsed(59 * SECOND + SECOND / 2)).isEqualTo("59s");
    assertThat(Progress.elapsed(60 * SECOND)).isEqualTo("1m00s");
    assertThat(Progress.elapsed(3725 * SECOND)).isEqualTo("1h02m");
  }
}
