package dev.sandbox4j.runtime.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/**
 * Every frame the framed exec helper of a gVisor sandbox sends is checked before it is believed
 * (root in the sandbox can write on its pipe): one out of order, for a command the engine never
 * issued, of the wrong length, or with output past the credit granted is a protocol violation,
 * which gives the helper up.
 */
class GvisorHelperProtocolTest {
  private static byte[] ints(int... values) {
    ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
    for (int v : values) {
      b.putInt(v);
    }
    return b.array();
  }

  private static byte[] output(int stream, int bytes) {
    ByteBuffer b = ByteBuffer.allocate(4 + bytes).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(stream);
    return b.array();
  }

  private static GvisorHelper ready() {
    GvisorHelper h = GvisorHelper.forProtocolTest();
    assertThat(h.handle(GvisorHelper.A_READY, 0, ints(GvisorHelper.MAGIC, GvisorHelper.VERSION)))
        .isNull();
    return h;
  }

  @Test
  void aWellBehavedCommandIsBelieved() throws Exception {
    GvisorHelper h = ready();
    GvisorHelper.Command c = h.commandForTest(3);
    assertThat(h.handle(GvisorHelper.A_STARTED, 3, ints(42))).isNull();
    assertThat(c.started.join()).isEqualTo(42);
    byte[] out = output(1, 5);
    System.arraycopy("hello".getBytes(), 0, out, 4, 5);
    assertThat(h.handle(GvisorHelper.A_OUTPUT, 3, out)).isNull();
    assertThat(h.handle(GvisorHelper.A_EOF, 3, ints(1))).isNull();
    assertThat(h.handle(GvisorHelper.A_EOF, 3, ints(2))).isNull();
    assertThat(h.handle(GvisorHelper.A_EXITED, 3, ints(7, 0))).isNull();
    assertThat(c.stdout().readAllBytes()).isEqualTo("hello".getBytes());
    assertThat(c.stderr().readAllBytes()).isEmpty();
    assertThat(c.exitValue()).isEqualTo(7);
    assertThat(c.keeperKilled).isFalse();
    c.stdout().close();
    c.stderr().close();
    // the engine is done with it: what still comes of it is dropped, not a violation
    assertThat(h.handle(GvisorHelper.A_OUTPUT, 3, output(2, 10))).isNull();
  }

  /**
   * The helper kills a keeper last, then reaps it: EXITED tells the engine the kill is done. A
   * command released once its exit and its streams' ends arrived drops the KILLED that follows, so
   * a kill waiting for KILLED alone waited {@link GvisorHelper#KILL_WAIT} and gave the helper up
   * after every timeout (seen in CI: each gVisor timeout took 11 s).
   */
  @Test
  void theKeepersExitEndsAKillThoughItsKilledIsDroppedForAReleasedCommand() {
    GvisorHelper h = ready();
    GvisorHelper.Command c = h.commandForTest(4);
    assertThat(h.handle(GvisorHelper.A_STARTED, 4, ints(17))).isNull();
    assertThat(c.killed).isNotDone();
    assertThat(h.handle(GvisorHelper.A_EOF, 4, ints(1))).isNull();
    assertThat(h.handle(GvisorHelper.A_EOF, 4, ints(2))).isNull();
    assertThat(h.handle(GvisorHelper.A_EXITED, 4, ints(137, 1))).isNull();
    assertThat(c.killed).as("the keeper's exit ends the kill").isDone();
    assertThat(h.handle(GvisorHelper.A_KILLED, 4, new byte[0])).isNull(); // dropped or not: fine
  }

  @Test
  void aFailedStartCarriesItsStage() {
    GvisorHelper h = ready();
    GvisorHelper.Command c = h.commandForTest(1);
    assertThat(h.handle(GvisorHelper.A_FAILED, 1, ints(13, 5))).isNull();
    assertThat(c.started.join()).isEqualTo(-1);
    assertThat(c.failure).isEqualTo(new GvisorHelper.Failure(13, "chdir to the working directory"));
  }

  @Test
  void outputPastTheCreditIsAViolation() {
    GvisorHelper h = ready();
    h.commandForTest(1);
    assertThat(h.handle(GvisorHelper.A_STARTED, 1, ints(9))).isNull();
    for (int sent = 0; sent < GvisorHelper.CREDIT; sent += GvisorHelper.FRAME_DATA) {
      assertThat(h.handle(GvisorHelper.A_OUTPUT, 1, output(2, GvisorHelper.FRAME_DATA))).isNull();
    }
    assertThat(h.handle(GvisorHelper.A_OUTPUT, 1, output(2, 1)))
        .contains("protocol violation: output past the credit granted");
  }

  @Test
  void malformedFramesAreViolations() {
    assertThat(GvisorHelper.forProtocolTest().handle(GvisorHelper.A_STARTED, 1, ints(5)))
        .as("a frame before READY")
        .contains("protocol violation");
    assertThat(
            GvisorHelper.forProtocolTest()
                .handle(GvisorHelper.A_READY, 0, ints(0x53425831, GvisorHelper.VERSION)))
        .as("the crun helper's magic")
        .contains("not the framed exec helper");
    assertThat(
            ready().handle(GvisorHelper.A_READY, 0, ints(GvisorHelper.MAGIC, GvisorHelper.VERSION)))
        .as("READY twice")
        .contains("protocol violation");
    assertThat(ready().handle(GvisorHelper.A_STARTED, 99, ints(5)))
        .as("a command the engine never issued")
        .contains("protocol violation");
    assertThat(ready().handle(GvisorHelper.A_STARTED, 0, ints(5)))
        .as("command 0")
        .contains("protocol violation");
    GvisorHelper h = ready();
    h.commandForTest(1);
    assertThat(h.handle(0x7fff, 1, new byte[0])).contains("unknown frame type");
    assertThat(h.handle(GvisorHelper.A_STARTED, 1, ints(5, 6))).contains("with 8 bytes");
    assertThat(h.handle(GvisorHelper.A_STARTED, 1, ints(1))).contains("STARTED with pid 1");
    assertThat(h.handle(GvisorHelper.A_EXITED, 1, ints(0, 0)))
        .as("EXITED before STARTED")
        .contains("protocol violation");
    assertThat(h.handle(GvisorHelper.A_OUTPUT, 1, output(3, 1))).contains("output of stream 3");
    assertThat(h.handle(GvisorHelper.A_STDIN_ACK, 1, ints(1)))
        .contains("more stdin acknowledged than was sent");
    assertThat(h.handle(GvisorHelper.A_FAILED, 1, ints(1, 99))).contains("at stage 99");
    GvisorHelper g = ready();
    g.commandForTest(2);
    assertThat(g.handle(GvisorHelper.A_STARTED, 2, ints(8))).isNull();
    assertThat(g.handle(GvisorHelper.A_EXITED, 2, ints(256, 0))).contains("code 256");
    assertThat(g.handle(GvisorHelper.A_EXITED, 2, ints(0, 2))).contains("flag 2");
  }

  @Test
  void aLostHelperEndsItsCommandsAndTheirStreams() throws Exception {
    GvisorHelper h = ready();
    GvisorHelper.Command c = h.commandForTest(1);
    assertThat(h.handle(GvisorHelper.A_STARTED, 1, ints(9))).isNull();
    h.lose("a test gave it up");
    assertThat(c.exit.join()).isEqualTo(-1);
    assertThat(c.lostWhy).isEqualTo("a test gave it up");
    assertThat(c.stdout().read()).isEqualTo(-1);
    assertThat(h.lost()).isEqualTo("a test gave it up");
  }
}
