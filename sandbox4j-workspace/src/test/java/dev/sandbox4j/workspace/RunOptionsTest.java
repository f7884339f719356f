package dev.sandbox4j.workspace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayInputStream;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RunOptionsTest {

  @Test
  void defaults() {
    RunOptions d = RunOptions.defaults();
    assertThat(d.env()).isEmpty();
    assertThat(d.timeout()).isEmpty();
    assertThat(d.stdin()).isEmpty();
    assertThat(d.outputLimit()).isEqualTo(10L * 1024 * 1024);
    assertThat(d.keepStdinOpen()).isFalse();
    assertThat(RunOptions.builder().keepStdinOpen(true).build().toBuilder().build().keepStdinOpen())
        .as("toBuilder keeps keepStdinOpen")
        .isTrue();
  }

  @Test
  void timeoutMustBePositiveAndRepresentable() {
    assertThatThrownBy(() -> RunOptions.builder().timeout(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("positive");
    assertThatThrownBy(() -> RunOptions.builder().timeout(Duration.ofSeconds(-1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> RunOptions.builder().timeout(ChronoUnit.FOREVER.getDuration()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("too large");
    assertThat(RunOptions.builder().timeout(Duration.ofMinutes(5)).noTimeout().build().timeout())
        .isEmpty();
  }

  @Test
  void envIsValidatedAndCopied() {
    assertThatThrownBy(() -> RunOptions.builder().env("A=B", "x"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'A=B'");
    assertThatThrownBy(() -> RunOptions.builder().env("", "x"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> RunOptions.builder().env("A", "x\0y"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("A");
    RunOptions.Builder b = RunOptions.builder().env(Map.of("A", "1"));
    RunOptions built = b.build();
    b.env("B", "2");
    assertThat(built.env()).containsExactly(Map.entry("A", "1"));
  }

  @Test
  void stdinBytesGiveAFreshStreamEachTime() throws Exception {
    byte[] data = {1, 2, 3};
    RunOptions o = RunOptions.builder().stdin(data).build();
    data[0] = 9;
    assertThat(o.stdin().orElseThrow().readAllBytes()).containsExactly(1, 2, 3);
    assertThat(o.stdin().orElseThrow().readAllBytes()).containsExactly(1, 2, 3);
    var stream = new ByteArrayInputStream(data);
    assertThat(RunOptions.builder().stdin(stream).build().stdin()).containsSame(stream);
  }

  @Test
  void outputLimitMustBePositive() {
    assertThatThrownBy(() -> RunOptions.builder().outputLimit(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("outputLimit");
    assertThat(RunOptions.builder().outputLimit(5).build().toBuilder().build().outputLimit())
        .isEqualTo(5);
  }
}
