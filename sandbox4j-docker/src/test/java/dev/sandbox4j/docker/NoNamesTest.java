package dev.sandbox4j.docker;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;

/** The DNS stub: NXDOMAIN for every query, silence for anything else, whatever bytes come. */
class NoNamesTest {
  /** A query for {@code example.com} A, id 0x1234, recursion desired. */
  private static final byte[] QUERY =
      HexFormat.of().parseHex("123401000001000000000000076578616d706c6503636f6d0000010001");

  @Test
  void aQueryGetsNxdomainWithItsIdAndQuestion() {
    byte[] answer = NoNames.answer(QUERY, QUERY.length);
    assertThat(HexFormat.of().formatHex(answer))
        .isEqualTo("123481830001000000000000076578616d706c6503636f6d0000010001");
  }

  @Test
  void whatIsNotAWellFormedQueryGetsNoAnswer() {
    assertThat(NoNames.answer(QUERY, 11)).as("shorter than a header").isNull();
    assertThat(NoNames.answer(QUERY, QUERY.length - 1)).as("a cut question").isNull();
    byte[] response = QUERY.clone();
    response[2] |= (byte) 0x80;
    assertThat(NoNames.answer(response, response.length)).as("a response").isNull();
    byte[] update = QUERY.clone();
    update[2] = (byte) (5 << 3);
    assertThat(NoNames.answer(update, update.length)).as("another opcode").isNull();
    byte[] pointer = QUERY.clone();
    pointer[12] = (byte) 0xc0;
    assertThat(NoNames.answer(pointer, pointer.length)).as("a compressed name").isNull();
    byte[] many = QUERY.clone();
    many[5] = (byte) 0xff;
    assertThat(NoNames.answer(many, many.length)).as("more questions than bytes").isNull();
  }

  @Test
  void itAnswersOverUdp() throws Exception {
    try (NoNames names = NoNames.bind(InetAddress.getLoopbackAddress(), 0);
        DatagramSocket client = new DatagramSocket()) {
      client.setSoTimeout(5000);
      client.send(
          new DatagramPacket(QUERY, QUERY.length, InetAddress.getLoopbackAddress(), names.port()));
      DatagramPacket in = new DatagramPacket(new byte[512], 512);
      client.receive(in);
      assertThat(in.getData()[3] & 0x0f).as("RCODE NXDOMAIN").isEqualTo(3);
    }
  }
}
