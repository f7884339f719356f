package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.InputStream;
import java.io.SequenceInputStream;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A multipart upload to envd's {@code /files} spills to the server's disk before it reaches the
 * sandbox: never more than a sandbox's disk may hold, and into the owner-only data directory, not
 * the host's shared {@code /tmp}. A tenant cannot fill the host's disk through it.
 */
class E2bUploadLimitTest {
  @TempDir Path data;

  @Test
  void aMultipartUploadLargerThanTheDiskCeilingIsRefusedAndLeavesNothing() throws Exception {
    TestServer.requireLocalEngine();
    long ceiling = 64L << 20;
    try (TestServer s = new TestServer(data, b -> b.maxDiskPerSandbox(ceiling))) {
      String key = s.key("acme");
      HttpResponse<byte[]> created =
          s.http.send(
              HttpRequest.newBuilder(s.uri("/e2b/v2/sandboxes"))
                  .header("X-API-Key", key)
                  .header("Content-Type", "application/json")
                  .POST(HttpRequest.BodyPublishers.ofString("{\"templateID\": \"base\"}"))
                  .build(),
              HttpResponse.BodyHandlers.ofByteArray());
      assertThat(created.statusCode()).as(new String(created.body())).isEqualTo(201);
      JsonNode sandbox = TestServer.JSON.readTree(created.body());
      String id = sandbox.get("sandboxID").asText();
      s.track(id);
      String token = sandbox.get("envdAccessToken").asText();

      String boundary = "s4jboundary";
      byte[] head =
          ("--"
                  + boundary
                  + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
                  + "Content-Type: application/octet-stream\r\n\r\n")
              .getBytes(StandardCharsets.UTF_8);
      byte[] tail = ("\r\n--" + boundary + "--\r\n").getBytes(StandardCharsets.UTF_8);
      long size = ceiling + (1 << 20);
      HttpResponse<byte[]> upload =
          s.http.send(
              HttpRequest.newBuilder(s.uri("/e2b/envd/files?path=/tmp/big.bin"))
                  .header("E2b-Sandbox-Id", id)
                  .header("X-Access-Token", token)
                  .header("Content-Type", "multipart/form-data; boundary=" + boundary)
                  .POST(
                      HttpRequest.BodyPublishers.ofInputStream(
                          () ->
                              new SequenceInputStream(
                                  java.util.Collections.enumeration(
                                      java.util.List.of(
                                          new java.io.ByteArrayInputStream(head),
                                          zeros(size),
                                          new java.io.ByteArrayInputStream(tail))))))
                  .build(),
              HttpResponse.BodyHandlers.ofByteArray());

      assertThat(upload.statusCode()).as(new String(upload.body())).isEqualTo(400);
      assertThat(new String(upload.body(), StandardCharsets.UTF_8)).contains("multipart");
      try (Stream<Path> left = Files.list(data.resolve("e2b-uploads"))) {
        assertThat(left.toList()).as("nothing spilled is left").isEmpty();
      }
    }
  }

  private static InputStream zeros(long size) {
    return new InputStream() {
      private long left = size;

      @Override
      public int read() {
        if (left == 0) {
          return -1;
        }
        left--;
        return 0;
      }

      @Override
      public int read(byte[] b, int off, int len) {
        if (left == 0) {
          return -1;
        }
        int n = (int) Math.min(len, left);
        java.util.Arrays.fill(b, off, off + n, (byte) 0);
        left -= n;
        return n;
      }
    };
  }
}
