package dev.sandbox4j.remote;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.WebSocket;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import org.junit.jupiter.api.Test;

/** The liveness check of an exec connection, against a WebSocket that answers or does not. */
class ExecConnectionTest {
  private static final long MS = 1_000_000L;

  /** A WebSocket whose pings complete as {@code ping} says; counts them; aborts are recorded. */
  private static final class FakeSocket implements WebSocket {
    final AtomicInteger pings = new AtomicInteger();
    volatile CompletableFuture<WebSocket> ping = CompletableFuture.completedFuture(this);
    volatile boolean aborted;

    @Override
    public CompletableFuture<WebSocket> sendPing(ByteBuffer message) {
      pings.incrementAndGet();
      return ping;
    }

    @Override
    public void abort() {
      aborted = true;
    }

    @Override
    public CompletableFuture<WebSocket> sendText(CharSequence data, boolean last) {
      throw new UnsupportedOperationException();
    }

    @Override
    public CompletableFuture<WebSocket> sendBinary(ByteBuffer data, boolean last) {
      throw new UnsupportedOperationException();
    }

    @Override
    public CompletableFuture<WebSocket> sendPong(ByteBuffer message) {
      throw new UnsupportedOperationException();
    }

    @Override
    public CompletableFuture<WebSocket> sendClose(int statusCode, String reason) {
      return CompletableFuture.completedFuture(this);
    }

    @Override
    public void request(long n) {}

    @Override
    public String getSubprotocol() {
      return "";
    }

    @Override
    public boolean isOutputClosed() {
      return aborted;
    }

    @Override
    public boolean isInputClosed() {
      return aborted;
    }
  }

  @Test
  void aPingUnansweredPastTheWaitMeansTheConnectionIsLost() throws Exception {
    ExecConnection c = new ExecConnection("s");
    FakeSocket socket = new FakeSocket();
    c.onOpen(socket);
    ReentrantLock sending = new ReentrantLock();
    Thread.sleep(20);
    assertThat(c.checkAlive(10 * MS, 2000 * MS, sending))
        .as("a ping is sent, not yet late")
        .isNull();
    assertThat(socket.pings.get()).isEqualTo(1);
    assertThat(c.checkAlive(10 * MS, 2000 * MS, sending)).as("one ping at a time").isNull();
    assertThat(socket.pings.get()).isEqualTo(1);
    Thread.sleep(2100);
    assertThat(c.checkAlive(10 * MS, 2000 * MS, sending))
        .as("no pong for longer than the wait")
        .isNotNull()
        .hasMessageContaining("did not answer a ping");
    assertThat(socket.aborted).isTrue();
  }

  @Test
  void aPongOrAnyFrameKeepsItAlive() throws Exception {
    ExecConnection c = new ExecConnection("s");
    FakeSocket socket = new FakeSocket();
    c.onOpen(socket);
    ReentrantLock sending = new ReentrantLock();
    Thread.sleep(20);
    assertThat(c.checkAlive(10 * MS, 100 * MS, sending)).isNull();
    c.onPong(socket, ByteBuffer.allocate(0));
    Thread.sleep(150);
    assertThat(c.checkAlive(10 * MS, 100 * MS, sending)).as("answered: a new ping").isNull();
    assertThat(socket.pings.get()).isEqualTo(2);
    c.onText(socket, "{}", true);
    assertThat(c.checkAlive(5000 * MS, 100 * MS, sending)).as("just heard: no ping").isNull();
    assertThat(socket.pings.get()).isEqualTo(2);
    assertThat(socket.aborted).isFalse();
  }

  @Test
  void aPingThatCannotBeSentMeansLostAndOneUnderAnotherSendWaits() throws Exception {
    ExecConnection c = new ExecConnection("s");
    FakeSocket socket = new FakeSocket();
    c.onOpen(socket);
    Thread.sleep(20);
    ReentrantLock sending = new ReentrantLock();
    java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    Thread holder =
        Thread.ofPlatform()
            .start(
                () -> {
                  sending.lock();
                  try {
                    held.countDown();
                    release.await();
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  } finally {
                    sending.unlock();
                  }
                });
    held.await();
    assertThat(c.checkAlive(10 * MS, 100 * MS, sending)).as("a send is under way").isNull();
    assertThat(socket.pings.get()).isZero();
    release.countDown();
    holder.join();
    socket.ping = CompletableFuture.failedFuture(new java.io.IOException("broken pipe"));
    assertThat(c.checkAlive(10 * MS, 100 * MS, sending))
        .isNotNull()
        .hasMessageContaining("a ping failed")
        .hasMessageContaining("broken pipe");
    assertThat(socket.aborted).isTrue();
  }
}
