package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.runtime.LocalSandbox;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 13, item 6, through the API: {@code diskBytes}/{@code diskInodes} bound what a tenant's
 * sandbox can write, out-of-range values are a 400 naming the field, and a host below its
 * free-space reserve answers 503 {@code insufficient_disk} without creating anything.
 */
class ServerDiskTest {
  @TempDir Path data;

  @Test
  void diskBytesBoundsWhatTheSandboxWritesAndBadValuesNameTheField() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data)) {
      String key = s.key("acme");
      String id = s.create(key, "{\"diskBytes\": 67108864, \"diskInodes\": 4096}");
      List<JsonNode> events =
          s.exec(key, id, "{\"shell\": \"head -c 200M /dev/zero > /tmp/big; echo status=$?\"}");
      assertThat(TestServer.stdout(events, "stdout")).doesNotContain("status=0");
      assertThat(TestServer.stdout(events, "stderr")).contains("No space left on device");

      TestServer.Answer small = s.call(key, "POST", "/v1/sandboxes", "{\"diskBytes\": 1024}");
      assertThat(small.status()).isEqualTo(400);
      assertThat(small.error().get("field").asText()).isEqualTo("diskBytes");
      TestServer.Answer few = s.call(key, "POST", "/v1/sandboxes", "{\"diskInodes\": 3}");
      assertThat(few.status()).isEqualTo(400);
      assertThat(few.error().get("field").asText()).isEqualTo("diskInodes");
    }
  }

  @Test
  void aHostBelowItsReserveAnswers503AndCreatesNothing() throws Exception {
    TestServer.requireLocalEngine();
    LocalSandbox starved = LocalSandbox.builder().diskReserve(Long.MAX_VALUE).build();
    try (TestServer s = new TestServer(data, starved, b -> b)) {
      String key = s.key("acme");
      TestServer.Answer a = s.call(key, "POST", "/v1/sandboxes", "{}");
      assertThat(a.status()).as(a.text()).isEqualTo(503);
      assertThat(a.error().get("code").asText()).isEqualTo("insufficient_disk");
      assertThat(a.error().get("message").asText()).contains("below the reserve");
      assertThat(s.call(key, "GET", "/v1/sandboxes", null).json().get("items")).isEmpty();
    }
  }
}
