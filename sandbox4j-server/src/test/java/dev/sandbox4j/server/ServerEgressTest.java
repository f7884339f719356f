package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code GET}/{@code PUT /v1/sandboxes/{id}/egress}: the owner reads and replaces the rules. */
class ServerEgressTest {

  @TempDir Path data;

  @Test
  void theOwnerReadsAndReplacesTheRulesAndABadRuleIsA400ThatChangesNothing() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data)) {
      String key = s.key("egress");
      String id = s.create(key, "{}");
      String path = "/v1/sandboxes/" + id + "/egress";
      WorkspaceRef ref = new WorkspaceRef(LocalSandbox.NAME, id);

      JsonNode initial = s.call(key, "GET", path, null).json();
      assertThat(initial.get("mode").asText()).as("a new sandbox's rules").isEqualTo("all");
      assertThat(initial.get("allow")).isEmpty();

      String allow =
          "{\"mode\": \"allowlist\", \"allow\": [\"api.example.com\", \"198.51.100.0/24\"],"
              + " \"headers\": [{\"domain\": \"api.example.com\", \"name\": \"X-Key\","
              + " \"value\": \"v1\", \"ports\": [80]}]}";
      TestServer.Answer put = s.call(key, "PUT", path, allow);
      assertThat(put.status()).as(put.text()).isEqualTo(200);
      assertThat(put.json().get("mode").asText()).isEqualTo("allowlist");
      assertThat(s.call(key, "GET", path, null).json()).isEqualTo(put.json());
      assertThat(s.engine.egress(ref))
          .as("the engine enforces what the server said")
          .isEqualTo(
              EgressPolicy.allow("api.example.com", "198.51.100.0/24")
                  .withHeader("api.example.com", "X-Key", "v1", List.of(80)));

      for (String[] bad :
          new String[][] {
            {"{\"mode\": \"allowlist\", \"allow\": [\"127.0.0.1\"]}", "egress"},
            {"{\"mode\": \"allowlist\", \"allow\": [\"not a domain!\"]}", "egress"},
            {"{\"mode\": \"all\", \"allow\": [\"api.example.com\"]}", "egress"},
            {"{\"mode\": \"some\"}", "mode"},
            {"{\"allow\": []}", "mode"},
            {"{\"mode\": \"none\", \"extra\": 1}", "extra"},
          }) {
        TestServer.Answer refused = s.call(key, "PUT", path, bad[0]);
        assertThat(refused.status()).as(bad[0] + ": " + refused.text()).isEqualTo(400);
        assertThat(refused.error().get("code").asText()).isEqualTo("invalid_request");
        assertThat(refused.error().get("field").asText()).as(bad[0]).isEqualTo(bad[1]);
      }
      assertThat(s.call(key, "GET", path, null).json())
          .as("a refused PUT leaves the rules as they were")
          .isEqualTo(put.json());

      TestServer.Answer none = s.call(key, "PUT", path, "{\"mode\": \"none\"}");
      assertThat(none.status()).as(none.text()).isEqualTo(200);
      assertThat(s.engine.egress(ref)).isEqualTo(EgressPolicy.none());
    }
  }
}
