package dev.sandbox4j.docker;

import java.io.IOException;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;

/**
 * The docker sandboxes' DNS server, on the gateway: it answers every query at once that the name
 * does not exist ({@code NXDOMAIN}), and asks nobody. Docker's resolver in a container forwards the
 * names it does not know here, so no name a sandbox looks up leaves the host (a lookup is a way to
 * send data out) and a lookup fails fast instead of timing out. Sandboxes reach names through the
 * egress proxy, which resolves them itself under their policy.
 *
 * <p>A query is answered with its own header and question, flags QR and RA set and RCODE 3; what is
 * not a query (too short, a response, another opcode) gets no answer.
 */
final class NoNames implements AutoCloseable {
  private final DatagramSocket socket;
  private final Thread thread;

  private NoNames(DatagramSocket socket) {
    this.socket = socket;
    this.thread = Thread.ofPlatform().daemon().name("sandbox4j-docker-dns").start(this::serve);
  }

  static NoNames bind(InetAddress address, int port) throws IOException {
    return new NoNames(new DatagramSocket(new InetSocketAddress(address, port)));
  }

  private void serve() {
    byte[] buffer = new byte[512];
    while (!socket.isClosed()) {
      DatagramPacket in = new DatagramPacket(buffer, buffer.length);
      try {
        socket.receive(in);
        byte[] answer = answer(in.getData(), in.getLength());
        if (answer != null) {
          socket.send(new DatagramPacket(answer, answer.length, in.getSocketAddress()));
        }
      } catch (IOException e) {
        if (socket.isClosed()) {
          return;
        }
      }
    }
  }

  int port() {
    return socket.getLocalPort();
  }

  /** The NXDOMAIN answer to {@code query}, or null for what is not a standard query. */
  static byte[] answer(byte[] query, int length) {
    if (length < 12) {
      return null;
    }
    boolean isResponse = (query[2] & 0x80) != 0;
    int opcode = (query[2] >> 3) & 0x0f;
    if (isResponse || opcode != 0) {
      return null;
    }
    int questions = ((query[4] & 0xff) << 8) | (query[5] & 0xff);
    int end = 12;
    for (int q = 0; q < questions; q++) { // the question section, copied as it came
      while (true) {
        if (end >= length) {
          return null;
        }
        int label = query[end] & 0xff;
        if (label == 0) {
          end++;
          break;
        }
        if ((label & 0xc0) != 0) {
          return null; // a query's question has no compression
        }
        end += label + 1;
      }
      end += 4; // type and class
      if (end > length) {
        return null;
      }
    }
    byte[] answer = java.util.Arrays.copyOf(query, end);
    answer[2] = (byte) (0x80 | (query[2] & 0x79)); // QR, opcode 0, RD kept; AA, TC clear
    answer[3] = (byte) 0x83; // RA, RCODE 3 (NXDOMAIN)
    for (int i = 6; i < 12; i++) {
      answer[i] = 0; // no answer, authority or additional records
    }
    return answer;
  }

  @Override
  public void close() {
    socket.close();
    thread.interrupt();
  }
}
