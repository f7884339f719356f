package dev.sandbox4j.workspace;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * The buffer between {@link BackgroundCommand#writeStdin} and the backend reading a command's
 * stdin: order, EOF, back-pressure and what a waiting writer learns. The backends themselves are
 * covered by the conformance suite.
 */
class StdinFeedTest {

  @Test
  void theFirstStreamComesFirstThenWritesThenEofOnceClosed() throws Exception {
    StdinFeed feed = new StdinFeed(new ByteArrayInputStream(bytes("seed|")), 64);
    assertThat(feed.write(bytes("one|"))).isNull();
    assertThat(feed.write(bytes("two"))).isNull();
    feed.closeForWriting();
    assertThat(new String(feed.readAllBytes(), StandardCharsets.UTF_8)).isEqualTo("seed|one|two");
    assertThat(feed.write(bytes("late"))).isEqualTo(StdinFeed.Refusal.CLOSED);
  }

  @Test
  void aReadReturnsWhatIsThereWithoutWaitingForMore() throws Exception {
    StdinFeed feed = new StdinFeed(null, 64);
    feed.write(bytes("line\n"));
    byte[] buffer = new byte[1024];
    assertThat(feed.read(buffer, 0, buffer.length))
        .as("a REPL gets a line as soon as it is written")
        .isEqualTo(5);
  }

  @Test
  void aWriterWaitsForRoomAndResumesAsTheReaderReads() throws Exception {
    StdinFeed feed = new StdinFeed(null, 8);
    byte[] twenty = bytes("abcdefghijklmnopqrst");
    CompletableFuture<StdinFeed.Refusal> write = new CompletableFuture<>();
    Thread writer = Thread.ofVirtual().start(() -> write.complete(writeQuietly(feed, twenty)));
    awaitWaiting(writer, write);
    assertThat(write).as("20 bytes do not fit in 8").isNotDone();
    ByteArrayOutputStream read = new ByteArrayOutputStream();
    byte[] buffer = new byte[3];
    while (read.size() < twenty.length) {
      int n = feed.read(buffer, 0, buffer.length);
      assertThat(n).isPositive();
      read.write(buffer, 0, n);
    }
    assertThat(write.get()).isNull();
    assertThat(read.toByteArray()).isEqualTo(twenty);
  }

  @Test
  void aWriterWaitingForRoomFailsOnceTheCommandEnds() throws Exception {
    StdinFeed feed = new StdinFeed(null, 4);
    CompletableFuture<StdinFeed.Refusal> write = new CompletableFuture<>();
    Thread writer =
        Thread.ofVirtual().start(() -> write.complete(writeQuietly(feed, bytes("too long"))));
    awaitWaiting(writer, write);
    feed.end();
    assertThat(write.get()).isEqualTo(StdinFeed.Refusal.ENDED);
    assertThat(feed.read()).as("an ended command's stdin is at EOF").isEqualTo(-1);
    assertThat(feed.write(bytes("x"))).isEqualTo(StdinFeed.Refusal.ENDED);
  }

  @Test
  void onceTheReaderIsGoneWritesAreRefusedAndNobodyWaits() throws Exception {
    StdinFeed feed = new StdinFeed(null, 4);
    CompletableFuture<StdinFeed.Refusal> write = new CompletableFuture<>();
    Thread writer =
        Thread.ofVirtual().start(() -> write.complete(writeQuietly(feed, bytes("too long"))));
    awaitWaiting(writer, write);
    feed.close(); // the command closed its stdin
    assertThat(write.get()).isEqualTo(StdinFeed.Refusal.UNREAD);
    assertThat(feed.write(bytes("x"))).isEqualTo(StdinFeed.Refusal.UNREAD);
  }

  @Test
  void closingTheReaderClosesAFirstStreamNotYetRead() throws Exception {
    boolean[] closed = {false};
    InputStream first =
        new ByteArrayInputStream(bytes("seed")) {
          @Override
          public void close() {
            closed[0] = true;
          }
        };
    new StdinFeed(first, 4).close();
    assertThat(closed[0]).isTrue();
  }

  private static StdinFeed.Refusal writeQuietly(StdinFeed feed, byte[] bytes) {
    try {
      return feed.write(bytes);
    } catch (InterruptedException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Waits until {@code writer} waits (for room), or its write is done. */
  private static void awaitWaiting(Thread writer, CompletableFuture<?> write)
      throws InterruptedException {
    while (writer.getState() != Thread.State.WAITING && !write.isDone()) {
      Thread.sleep(5); // a hang is ended by the build's default test timeout
    }
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
