package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The WebSocket exec's stdin: what the client sent reaches the command whole, then EOF. */
class StdinPipeTest {

  /**
   * A client sends its last chunks and stdin_eof faster than the command reads (a loaded machine):
   * the queue is full when EOF arrives. EOF must wait its turn; it once dropped the oldest chunk,
   * so the command read its stdin with a hole in it (RemoteSandboxConformanceTest.stdinIsFed saw
   * the wrong sha256 under load).
   */
  @Test
  void eofAfterAFullQueueLosesNothing() throws Exception {
    StdinPipe pipe = new StdinPipe();
    ByteArrayOutputStream sent = new ByteArrayOutputStream();
    for (int i = 0; i < 16; i++) { // the queue's capacity: feed never blocks here
      byte[] chunk = ("chunk " + i + ";").getBytes(java.nio.charset.StandardCharsets.UTF_8);
      pipe.feed(chunk);
      sent.write(chunk);
    }
    Thread eof = Thread.ofPlatform().start(() -> finish(pipe));
    // nothing reads until EOF has done what it does with a full queue: returned, or waits its turn
    while (eof.isAlive() && eof.getState() != Thread.State.TIMED_WAITING) {
      Thread.onSpinWait();
    }
    ByteArrayOutputStream read = new ByteArrayOutputStream();
    byte[] buffer = new byte[5];
    for (int n; (n = pipe.read(buffer, 0, buffer.length)) >= 0; ) {
      read.write(buffer, 0, n);
    }
    assertThat(eof.join(java.time.Duration.ofSeconds(10))).as("EOF delivered").isTrue();
    assertThat(read.toString(java.nio.charset.StandardCharsets.UTF_8))
        .isEqualTo(sent.toString(java.nio.charset.StandardCharsets.UTF_8));
  }

  /** A reader that is gone (the command ended) never holds up the client's stdin_eof. */
  @Test
  void eofAfterTheReaderClosedReturns() throws Exception {
    StdinPipe pipe = new StdinPipe();
    for (int i = 0; i < 16; i++) {
      pipe.feed(new byte[] {1});
    }
    pipe.close();
    CompletableFuture.runAsync(() -> finish(pipe)).get(10, TimeUnit.SECONDS);
  }

  private static void finish(StdinPipe pipe) {
    try {
      pipe.finish();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
