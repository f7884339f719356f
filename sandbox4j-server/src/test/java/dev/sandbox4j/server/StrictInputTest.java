package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Input that two parsers could read differently, or that grows without bound, is refused before
 * anything happens: duplicate JSON keys in every body, too many or too big labels. None of these
 * requests reaches the engine, so the test needs no root.
 */
class StrictInputTest {

  @TempDir Path data;

  /**
   * For every route that reads a JSON body, a body that repeats one of its own fields: the second
   * value must not silently win. {@code {id}} is a sandbox that does not exist ({@code {cid}} a
   * command): the body is refused before the sandbox is looked up.
   */
  private static final Map<String, String> DUPLICATES =
      Map.of(
          "POST /v1/sandboxes", "{\"image\": \"default\", \"image\": \"other\"}",
          "POST /v1/sandboxes/{id}/fork", "{\"filesOnly\": true, \"filesOnly\": false}",
          "POST /v1/sandboxes/{id}/snapshots", "{\"name\": \"a\", \"name\": \"b\"}",
          "POST /v1/sandboxes/{id}/exec", "{\"argv\": [\"true\"], \"argv\": [\"false\"]}",
          "POST /v1/sandboxes/{id}/commands", "{\"argv\": [\"true\"], \"argv\": [\"false\"]}",
          "POST /v1/sandboxes/{id}/commands/{cid}/stdin", "{\"data\": \"\", \"data\": \"eA==\"}",
          "POST /v1/sandboxes/{id}/files/mkdir", "{\"path\": \"a\", \"path\": \"b\"}",
          "POST /v1/sandboxes/{id}/files/remove", "{\"path\": \"a\", \"path\": \"b\"}",
          "POST /v1/sandboxes/{id}/files/rename",
              "{\"from\": \"a\", \"to\": \"b\", \"from\": \"c\"}",
          "PUT /v1/sandboxes/{id}/egress", "{\"mode\": \"all\", \"mode\": \"none\"}");

  /** Routes with a method that could carry a body but read no JSON from it. */
  private static final Set<String> NO_JSON_BODY =
      Set.of(
          "POST /v1/sandboxes/{id}/suspend",
          "POST /v1/sandboxes/{id}/resume",
          "POST /v1/sandboxes/{id}/stop",
          "POST /v1/sandboxes/{id}/start",
          "POST /v1/sandboxes/{id}/hibernate",
          "POST /v1/sandboxes/{id}/commands/{cid}/stop",
          "PUT /v1/sandboxes/{id}/files/content"); // raw bytes

  /**
   * The path of {@code route} ("METHOD /v1/…") with a sandbox and a command that do not exist: a
   * body is refused before either is looked up.
   */
  private static String pathOf(String route) {
    return route
        .substring(route.indexOf(' ') + 1)
        .replace("{id}", "nosuchsandbox")
        .replace("{cid}", "nosuchcommand");
  }

  @Test
  void aDuplicateKeyInAnyJsonBodyIsRefusedNamingIt() throws Exception {
    try (TestServer s = new TestServer(data)) {
      String key = s.key("dup");
      Set<String> withBodies =
          s.server.routes().stream()
              .filter(r -> r.startsWith("POST ") || r.startsWith("PUT "))
              .collect(Collectors.toCollection(TreeSet::new));
      Set<String> covered = new TreeSet<>(DUPLICATES.keySet());
      covered.addAll(NO_JSON_BODY);
      assertThat(covered)
          .as("a route that takes a body must be in DUPLICATES or NO_JSON_BODY")
          .isEqualTo(withBodies);
      for (Map.Entry<String, String> e : DUPLICATES.entrySet()) {
        String route = e.getKey();
        String method = route.substring(0, route.indexOf(' '));
        String path = pathOf(route);
        TestServer.Answer a = s.call(key, method, path, e.getValue());
        assertThat(a.status()).as(route + ": " + a.text()).isEqualTo(400);
        assertThat(a.error().get("code").asText()).isEqualTo("invalid_request");
        assertThat(a.error().get("message").asText()).as(route).contains("duplicate key");
      }
      TestServer.Answer a =
          s.call(key, "POST", "/v1/sandboxes", DUPLICATES.get("POST /v1/sandboxes"));
      assertThat(a.error().get("field").asText()).isEqualTo("image");
    }
  }

  /**
   * A value of the wrong JSON kind, in any body: the answer names the field and the kind wanted, in
   * JSON's words, and never this server's Java classes or types (Jackson's own messages do).
   */
  @Test
  void aValueOfTheWrongKindIsRefusedInJsonWordsNamingTheField() throws Exception {
    try (TestServer s = new TestServer(data)) {
      String key = s.key("kinds");
      for (Map.Entry<String, String> e : DUPLICATES.entrySet()) {
        String route = e.getKey();
        String method = route.substring(0, route.indexOf(' '));
        String path = pathOf(route);
        String field = e.getValue().substring(2, e.getValue().indexOf('"', 2));
        Map<String, String> bodies =
            Map.of(
                "{\"" + field + "\": {\"x\": 1}}",
                "'" + field + "' must be ",
                "[1]",
                "the body must be an object, was an array",
                "\"text\"",
                "the body must be an object, was a string",
                "{} {}",
                "the body must be one JSON value");
        for (Map.Entry<String, String> b : bodies.entrySet()) {
          TestServer.Answer a = s.call(key, method, path, b.getKey());
          String message = a.error().get("message").asText();
          assertThat(a.status()).as(route + " " + b.getKey() + ": " + a.text()).isEqualTo(400);
          assertThat(message).as(route + " " + b.getKey()).contains(b.getValue());
          assertThat(message)
              .as(route + " " + b.getKey())
              .doesNotContain("dev.sandbox4j", "java.", "`", "$", "Cannot deserialize");
        }
        TestServer.Answer wrong = s.call(key, method, path, "{\"" + field + "\": {\"x\": 1}}");
        assertThat(wrong.error().get("field").asText()).as(route).isEqualTo(field);
        assertThat(wrong.error().get("message").asText()).as(route).endsWith(", was an object");
      }
      TestServer.Answer cpus = s.call(key, "POST", "/v1/sandboxes", "{\"cpus\": 1.5}");
      assertThat(cpus.error().get("message").asText())
          .isEqualTo("'cpus' must be an integer, was a fractional number");
    }
  }

  @Test
  void aDuplicateKeyInsideAMapIsRefusedToo() throws Exception {
    try (TestServer s = new TestServer(data)) {
      String key = s.key("dup-map");
      TestServer.Answer labels =
          s.call(key, "POST", "/v1/sandboxes", "{\"labels\": {\"team\": \"a\", \"team\": \"b\"}}");
      assertThat(labels.status()).as(labels.text()).isEqualTo(400);
      assertThat(labels.error().get("message").asText()).contains("duplicate key 'team'");
      TestServer.Answer env =
          s.call(
              key,
              "POST",
              "/v1/sandboxes/nosuchsandbox/exec",
              "{\"argv\": [\"env\"], \"env\": {\"PATH\": \"/bin\", \"PATH\": \"/tmp\"}}");
      assertThat(env.status()).as(env.text()).isEqualTo(400);
      assertThat(env.error().get("message").asText()).contains("duplicate key 'PATH'");
    }
  }

  @Test
  void tooManyLabelsAreRefused() throws Exception {
    try (TestServer s = new TestServer(data)) {
      String key = s.key("labels");
      String many =
          IntStream.range(0, CreateSpecs.MAX_LABELS + 1)
              .mapToObj(i -> "\"k" + i + "\": \"v\"")
              .collect(Collectors.joining(", ", "{\"labels\": {", "}}"));
      TestServer.Answer a = s.call(key, "POST", "/v1/sandboxes", many);
      assertThat(a.status()).as(a.text()).isEqualTo(400);
      assertThat(a.error().get("field").asText()).isEqualTo("labels");
      assertThat(a.error().get("message").asText()).contains("at most 64 labels", "was 65");

      String filters =
          IntStream.range(0, CreateSpecs.MAX_LABELS + 1)
              .mapToObj(i -> "label=k" + i + "=v")
              .collect(Collectors.joining("&", "/v1/sandboxes?", ""));
      TestServer.Answer list = s.call(key, "GET", filters, null);
      assertThat(list.status()).as(list.text()).isEqualTo(400);
      assertThat(list.error().get("field").asText()).isEqualTo("label");
    }
  }

  @Test
  void aLabelTooBigOrWithControlCharactersIsRefusedNamingIt() throws Exception {
    try (TestServer s = new TestServer(data)) {
      String key = s.key("label-size");
      TestServer.Answer longValue =
          s.call(
              key,
              "POST",
              "/v1/sandboxes",
              "{\"labels\": {\"team\": \"" + "x".repeat(CreateSpecs.MAX_LABEL_VALUE + 1) + "\"}}");
      assertThat(longValue.status()).as(longValue.text()).isEqualTo(400);
      assertThat(longValue.error().get("field").asText()).isEqualTo("labels");
      assertThat(longValue.error().get("message").asText()).contains("label 'team'", "257");

      String hugeKey = "k".repeat(10_000);
      TestServer.Answer longKey =
          s.call(key, "POST", "/v1/sandboxes", "{\"labels\": {\"" + hugeKey + "\": \"v\"}}");
      assertThat(longKey.status()).as(longKey.text()).isEqualTo(400);
      assertThat(longKey.error().get("field").asText()).isEqualTo("labels");
      // named, but not echoed back whole
      assertThat(longKey.error().get("message").asText())
          .contains("label key 'kkk")
          .hasSizeLessThan(400);

      TestServer.Answer del =
          s.call(key, "POST", "/v1/sandboxes", "{\"labels\": {\"team\": \"a\\u007fb\"}}");
      assertThat(del.status()).as(del.text()).isEqualTo(400);
      assertThat(del.error().get("message").asText()).contains("label 'team'", "control");
    }
  }
}
