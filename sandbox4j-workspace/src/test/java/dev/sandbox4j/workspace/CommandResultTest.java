package dev.sandbox4j.workspace;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class CommandResultTest {

  @Test
  void textViewsReplaceInvalidUtf8() {
    CommandResult r =
        new CommandResult(0, new byte[] {'a', (byte) 0xc3, 'b'}, new byte[] {(byte) 0xff});
    assertThat(r.stdoutText()).isEqualTo("a\uFFFDb");
    assertThat(r.stderrText()).isEqualTo("\uFFFD");
  }

  @Test
  void isImmutableAndComparesByContent() {
    byte[] out = {'x'};
    CommandResult r = new CommandResult(1, out, null);
    out[0] = 'y';
    r.stdout()[0] = 'z';
    assertThat(r.stdoutText()).isEqualTo("x");
    assertThat(r.stderr()).isEmpty();
    assertThat(r).isEqualTo(new CommandResult(1, new byte[] {'x'}, new byte[0]));
    assertThat(r.hashCode())
        .isEqualTo(new CommandResult(1, new byte[] {'x'}, new byte[0]).hashCode());
    assertThat(r.succeeded()).isFalse();
    assertThat(r.toString()).contains("exitCode=1", "\"x\"");
  }

  @Test
  void exceptionsKeepAtMost64KiBOfEachStream() {
    byte[] big = new byte[100_000];
    var e = new WorkspaceOutputLimitException(10, big, new byte[] {'e'});
    assertThat(e.stdoutHead()).hasSize(64 * 1024);
    assertThat(e.stderrHeadText()).isEqualTo("e");
    assertThat(e.getMessage()).contains("10 bytes");
  }
}
