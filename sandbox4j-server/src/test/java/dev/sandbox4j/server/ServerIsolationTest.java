package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.internal.oci.Gvisor;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A create's {@code isolation} and the operator's policy over it, on real sandboxes: a gVisor one
 * runs on gVisor's own kernel (which {@code uname -r} calls 4.4.0), and its Sandbox object says so.
 */
class ServerIsolationTest {

  /** What gVisor's kernel tells {@code uname -r}, whatever the host runs. */
  private static final String GVISOR_KERNEL = "4.4.0";

  @TempDir Path data;

  @BeforeEach
  void requireGvisor() {
    TestServer.requireLocalEngine();
    Prerequisites.require(
        Gvisor.unavailable().isEmpty(), Gvisor.unavailable().orElse("gVisor's runsc"));
  }

  private static String kernel(TestServer s, String key, String id) throws Exception {
    List<JsonNode> events = s.exec(key, id, "{\"argv\": [\"uname\", \"-r\"]}");
    assertThat(events.getLast().get("exitCode").asInt()).as(events.toString()).isZero();
    return TestServer.stdout(events, "stdout").strip();
  }

  private static String isolationOf(TestServer s, String key, String id) throws Exception {
    return s.call(key, "GET", "/v1/sandboxes/" + id, null).json().get("isolation").asText();
  }

  @Test
  void aCreateMayAskForGvisorAndTheSandboxSaysWhichIsolationItHas() throws Exception {
    try (TestServer s = new TestServer(data)) {
      String key = s.key("acme");
      String gvisor = s.create(key, "{\"isolation\": \"gvisor\"}");
      String container = s.create(key, "{}");

      assertThat(kernel(s, key, gvisor)).isEqualTo(GVISOR_KERNEL);
      assertThat(kernel(s, key, container)).isEqualTo(System.getProperty("os.version"));
      assertThat(isolationOf(s, key, gvisor)).isEqualTo("gvisor");
      assertThat(isolationOf(s, key, container))
          .as("the default, without an operator's")
          .isEqualTo("container");
      JsonNode items = s.call(key, "GET", "/v1/sandboxes", null).json().get("items");
      assertThat(items)
          .anySatisfy(
              i -> {
                assertThat(i.get("id").asText()).isEqualTo(gvisor);
                assertThat(i.get("isolation").asText()).isEqualTo("gvisor");
              });
    }
  }

  @Test
  void anUnknownIsolationIsA400NamingTheFieldAndTheAcceptedValues() throws Exception {
    try (TestServer s = new TestServer(data)) {
      String key = s.key("acme");
      for (String body : List.of("{\"isolation\": \"vm\"}", "{\"isolation\": \"\"}")) {
        TestServer.Answer refused = s.call(key, "POST", "/v1/sandboxes", body);

        assertThat(refused.status()).as(refused.text()).isEqualTo(400);
        assertThat(refused.error().get("code").asText()).isEqualTo("invalid_request");
        assertThat(refused.error().get("field").asText()).isEqualTo("isolation");
        assertThat(refused.error().get("message").asText())
            .contains("expected one of container, gvisor");
      }
      assertThat(s.call(key, "GET", "/v1/sandboxes", null).json().get("items"))
          .as("nothing was created")
          .isEmpty();
    }
  }

  @Test
  void aForcedIsolationIsEveryNewSandboxsAndRefusesAnother() throws Exception {
    try (TestServer s = new TestServer(data)) {
      String key = s.key("acme");
      String before = s.create(key, "{}"); // made before the operator forced gVisor

      s.restart(b -> b.forceIsolation(Isolation.GVISOR));

      String unasked = s.create(key, "{}");
      assertThat(isolationOf(s, key, unasked)).isEqualTo("gvisor");
      assertThat(kernel(s, key, unasked)).isEqualTo(GVISOR_KERNEL);

      TestServer.Answer container =
          s.call(key, "POST", "/v1/sandboxes", "{\"isolation\": \"container\"}");
      assertThat(container.status()).as(container.text()).isEqualTo(400);
      assertThat(container.error().get("field").asText()).isEqualTo("isolation");
      assertThat(container.error().get("message").asText())
          .contains("this server's operator requires gvisor isolation for every sandbox");

      assertThat(isolationOf(s, key, before))
          .as("a sandbox keeps its isolation")
          .isEqualTo("container");
      TestServer.Answer fork = s.call(key, "POST", "/v1/sandboxes/" + before + "/fork", "{}");
      assertThat(fork.status())
          .as("its copy would be a container too: " + fork.text())
          .isEqualTo(400);
      assertThat(fork.error().get("field").asText()).isEqualTo("isolation");
      assertThat(fork.error().get("message").asText())
          .contains("sandbox " + before + " has container isolation");
      assertThat(s.call(key, "GET", "/v1/sandboxes", null).json().get("items"))
          .as("no copy was made")
          .hasSize(2);
    }
  }

  @Test
  void anOperatorsDefaultIsolationIsTheOneOfACreateThatAsksForNone() throws Exception {
    try (TestServer s = new TestServer(data, b -> b.defaultIsolation(Isolation.GVISOR))) {
      String key = s.key("acme");
      String unasked = s.create(key, "{}");
      String container = s.create(key, "{\"isolation\": \"container\"}");

      assertThat(isolationOf(s, key, unasked)).isEqualTo("gvisor");
      assertThat(isolationOf(s, key, container))
          .as("a default is not a requirement")
          .isEqualTo("container");
    }
  }
}
