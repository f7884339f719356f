package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import picocli.CommandLine.TypeConversionException;

class ConvertersTest {

  private final DurationConverter durations = new DurationConverter();
  private final ByteSizeConverter sizes = new ByteSizeConverter();

  @Test
  void durationsWithUnitsBareSecondsAndIso() {
    assertThat(durations.convert("500ms")).isEqualTo(Duration.ofMillis(500));
    assertThat(durations.convert("30s")).isEqualTo(Duration.ofSeconds(30));
    assertThat(durations.convert("1.5s")).isEqualTo(Duration.ofMillis(1500));
    assertThat(durations.convert("2m")).isEqualTo(Duration.ofMinutes(2));
    assertThat(durations.convert("1h")).isEqualTo(Duration.ofHours(1));
    assertThat(durations.convert("1d")).isEqualTo(Duration.ofDays(1));
    assertThat(durations.convert("45")).isEqualTo(Duration.ofSeconds(45));
    assertThat(durations.convert("PT30S")).isEqualTo(Duration.ofSeconds(30));
    assertThat(durations.convert("pt1m30s")).isEqualTo(Duration.ofSeconds(90));
  }

  @ParameterizedTest
  @ValueSource(strings = {"", "0", "0s", "-5s", "PT0S", "PT-1S", "5x", "s", "1.s", "1e3", "P"})
  void badDurationsAreRejectedWithExamples(String text) {
    assertThatThrownBy(() -> durations.convert(text))
        .isInstanceOf(TypeConversionException.class)
        .hasMessageContaining("invalid duration '" + text + "'")
        .hasMessageContaining("30s");
  }

  @Test
  void hugeDurationsAreRejectedNotWrapped() {
    assertThatThrownBy(() -> durations.convert("99999999999999999999d"))
        .isInstanceOf(TypeConversionException.class);
  }

  @Test
  void durationsAreDescribedShortly() {
    assertThat(DurationConverter.describe(Duration.ofMillis(500))).isEqualTo("500ms");
    assertThat(DurationConverter.describe(Duration.ofMillis(1500))).isEqualTo("1.5s");
    assertThat(DurationConverter.describe(Duration.ofSeconds(30))).isEqualTo("30s");
    assertThat(DurationConverter.describe(Duration.ofSeconds(90))).isEqualTo("1m30s");
    assertThat(DurationConverter.describe(Duration.ofHours(2))).isEqualTo("2h");
  }

  @Test
  void sizesInBytesAndBinaryUnits() {
    assertThat(sizes.convert("1048576")).isEqualTo(1_048_576L);
    assertThat(sizes.convert("512K")).isEqualTo(512L * 1024);
    assertThat(sizes.convert("10M")).isEqualTo(10L << 20);
    assertThat(sizes.convert("10MiB")).isEqualTo(10L << 20);
    assertThat(sizes.convert("2g")).isEqualTo(2L << 30);
    assertThat(sizes.convert("100b")).isEqualTo(100L);
  }

  @ParameterizedTest
  @ValueSource(strings = {"", "0", "0M", "-1", "1T", "M", "1.5M", "99999999999999999G"})
  void badSizesAreRejected(String text) {
    assertThatThrownBy(() -> sizes.convert(text))
        .isInstanceOf(TypeConversionException.class)
        .hasMessageContaining("invalid size '" + text + "'");
  }
}
