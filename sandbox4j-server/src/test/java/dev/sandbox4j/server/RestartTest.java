package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A restart loses nothing; an exec stream cut by the stop ends without a last event; a client that
 * goes away from a silent stream gets its command killed.
 */
class RestartTest {

  @TempDir Path data;

  @Test
  void anExecStreamCutByAStopEndsWithoutAnExitAndTheSandboxSurvivesTheRestart() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data)) {
      String key = s.key("restart");
      String id = s.create(key, "{\"labels\": {\"kept\": \"yes\"}}");
      byte[] body = "{\"shell\": \"echo started; sleep 1000\"}".getBytes(StandardCharsets.UTF_8);
      ByteArrayOutputStream received = new ByteArrayOutputStream();
      String started = "c3RhcnRlZAo="; // base64 of "started\n"
      try (Socket raw = new Socket("127.0.0.1", s.server.uri().getPort())) {
        raw.setSoTimeout(60_000);
        OutputStream out = raw.getOutputStream();
        out.write(
            ("POST /v1/sandboxes/"
                    + id
                    + "/exec HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "
                    + key
                    + "\r\nContent-Type: application/json\r\nContent-Length: "
                    + body.length
                    + "\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII));
        out.write(body);
        out.flush();
        InputStream in = raw.getInputStream();
        byte[] buf = new byte[4096];
        while (!received.toString(StandardCharsets.UTF_8).contains(started)) {
          int n = in.read(buf);
          assertThat(n).as("the stream ended before the command printed").isPositive();
          received.write(buf, 0, n);
        }

        s.server.close();

        for (int n; (n = in.read(buf)) > 0; ) {
          received.write(buf, 0, n);
        }
      }
      String stream = received.toString(StandardCharsets.UTF_8);
      assertThat(stream).startsWith("HTTP/1.1 200").contains(started);
      assertThat(stream).doesNotContain("\"type\":\"exit\"").doesNotContain("\"type\":\"error\"");

      s.restart();
      TestServer.Answer got = s.call(key, "GET", "/v1/sandboxes/" + id, null);
      assertThat(got.status()).as(got.text()).isEqualTo(200);
      assertThat(got.json().get("state").asText()).isEqualTo("running");
      assertThat(got.json().get("labels").get("kept").asText()).isEqualTo("yes");
      assertThat(s.call(key, "GET", "/v1/sandboxes?label=kept=yes", null).json().get("items"))
          .hasSize(1);
      assertThat(TestServer.stdout(s.exec(key, id, "{\"argv\": [\"echo\", \"again\"]}"), "stdout"))
          .isEqualTo("again\n");
      // the stop killed the streamed command: poll, since the kill finishes in the background
      String left = "";
      for (int i = 0; i < 100; i++) {
        left =
            TestServer.stdout(s.exec(key, id, "{\"shell\": \"pgrep -x sleep || true\"}"), "stdout");
        if (left.isEmpty()) {
          break;
        }
        Thread.sleep(100);
      }
      assertThat(left).as("sleep processes left").isEmpty();
      // another organization still does not see it
      assertThat(s.call(s.key("other"), "GET", "/v1/sandboxes/" + id, null).status())
          .isEqualTo(404);
    }
  }

  @Test
  void aClientThatGoesAwayFromASilentStreamGetsItsCommandKilled() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data, b -> b.keepAlive(java.time.Duration.ofMillis(100)))) {
      String key = s.key("gone");
      String id = s.create(key, "{}");
      // silent at first too: a keepalive arrives before the command has written its pid
      byte[] body =
          "{\"shell\": \"sleep 1; echo $$ > /tmp/nd-pid; echo started; exec sleep 1000\"}"
              .getBytes(StandardCharsets.UTF_8);
      try (Socket raw = new Socket("127.0.0.1", s.server.uri().getPort())) {
        raw.setSoTimeout(60_000);
        OutputStream out = raw.getOutputStream();
        out.write(
            ("POST /v1/sandboxes/"
                    + id
                    + "/exec HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "
                    + key
                    + "\r\nContent-Length: "
                    + body.length
                    + "\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII));
        out.write(body);
        out.flush();
        ByteArrayOutputStream received = new ByteArrayOutputStream();
        byte[] buf = new byte[4096];
        // wait for its output (a keepalive says nothing of where the command is): it has
        // written its pid and is silent from here on
        while (!received.toString(StandardCharsets.UTF_8).contains("\"type\":\"stdout\"")) {
          int n = raw.getInputStream().read(buf);
          assertThat(n).isPositive();
          received.write(buf, 0, n);
        }
      }
      String alive = "0\n";
      for (int i = 0; i < 300 && alive.equals("0\n"); i++) {
        Thread.sleep(100);
        alive =
            TestServer.stdout(
                s.exec(key, id, "{\"shell\": \"kill -0 $(cat /tmp/nd-pid) 2>/dev/null; echo $?\"}"),
                "stdout");
      }
      assertThat(alive).as("the abandoned command still runs").isEqualTo("1\n");
    }
  }
}
