package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.server.SandboxServer;
import dev.sandbox4j.server.ServerEngine;
import dev.sandbox4j.server.ServerImages;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code sandbox4j keys} and {@code sandbox4j serve}, in-process. */
class ServeCliTest {

  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path home;

  record Run(int exitCode, String out, String err) {}

  private Run run(String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      code = Cli.run(new CliContext(home, new ByteArrayInputStream(new byte[0]), o, e), args);
    }
    return new Run(
        code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  @Test
  void keysCreateListRevoke() {
    Run created = run("keys", "create", "--org", "acme");
    assertThat(created.exitCode()).as(created.err()).isZero();
    String key = created.out().strip();
    assertThat(key).startsWith("s4j_");
    Matcher id = Pattern.compile("key ([0-9a-f]+) for organization acme").matcher(created.err());
    assertThat(id.find()).as(created.err()).isTrue();

    Run ls = run("keys", "ls");
    assertThat(ls.exitCode()).isZero();
    assertThat(ls.out()).contains(id.group(1)).contains("acme").doesNotContain(key);

    assertThat(run("keys", "revoke", id.group(1)).exitCode()).isZero();
    assertThat(run("keys", "ls").out()).doesNotContainPattern(id.group(1) + ".* -\\R");
    assertThat(run("keys", "revoke", id.group(1)).exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(run("keys", "create", "--org", "Bad Name").exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(home.resolve("server/server.db")).exists();
  }

  @Test
  void keysCreateAndLsPrintJson() throws Exception {
    Run created = run("keys", "create", "--org", "acme", "--json");
    assertThat(created.exitCode()).as(created.err()).isZero();
    assertThat(created.err()).isEmpty();
    JsonNode key = JSON.readTree(created.out());
    assertThat(key.path("organization").asText()).isEqualTo("acme");
    assertThat(key.path("key").asText()).startsWith(key.path("prefix").asText()).startsWith("s4j_");
    String id = key.path("id").asText();
    assertThat(id).matches("[0-9a-f]+");

    assertThat(run("keys", "revoke", id).exitCode()).isZero();
    run("keys", "create", "--org", "other");
    Run ls = run("keys", "ls", "--json");
    assertThat(ls.exitCode()).as(ls.err()).isZero();
    assertThat(ls.out()).doesNotContain(key.path("key").asText());
    JsonNode keys = JSON.readTree(ls.out());
    assertThat(keys.size()).isEqualTo(2);
    for (JsonNode k : keys) {
      assertThat(Instant.parse(k.path("created").asText())).isBeforeOrEqualTo(Instant.now());
      if (k.path("id").asText().equals(id)) {
        assertThat(k.path("organization").asText()).isEqualTo("acme");
        assertThat(k.path("prefix").asText()).isEqualTo(key.path("prefix").asText());
        assertThat(Instant.parse(k.path("revoked").asText())).isBeforeOrEqualTo(Instant.now());
      } else {
        assertThat(k.path("organization").asText()).isEqualTo("other");
        assertThat(k.path("revoked").isNull()).isTrue();
      }
    }
  }

  @Test
  void imagePublishUnpublishAndPublished() {
    Run already = run("image", "publish", "default");
    assertThat(already.exitCode()).as(already.err()).isZero();
    assertThat(already.out().strip()).isEqualTo("default");
    assertThat(already.err()).contains("already published");
    assertThat(run("image", "published").out()).isEqualTo("default  (not on this machine)\n");
    assertThat(run("image", "published", "--json").out())
        .isEqualTo("[{\"name\":\"default\",\"onThisMachine\":false}]\n");

    Run unknown = run("image", "publish", "no-such-image");
    assertThat(unknown.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(unknown.err()).contains("no image 'no-such-image' here");

    Run unpublished = run("image", "unpublish", "--json", "default");
    assertThat(unpublished.exitCode()).as(unpublished.err()).isZero();
    assertThat(unpublished.out()).isEqualTo("[\"default\"]\n");
    assertThat(run("image", "published").out()).isEmpty();
    assertThat(run("image", "published", "--json").out()).isEqualTo("[]\n");
    assertThat(run("image", "unpublish", "default").exitCode()).isEqualTo(ExitCodes.USAGE);
    try (ServerImages images = ServerImages.open(home.resolve("server"))) {
      assertThat(images.list()).isEmpty(); // what the server reads
    }

    Path other = home.resolve("other-data");
    Run published = run("image", "publish", "--json", "--data", other.toString(), "default");
    assertThat(published.exitCode()).as(published.err()).isZero();
    assertThat(published.out()).isEqualTo("[\"default\"]\n");
    try (ServerImages images = ServerImages.open(other)) {
      assertThat(images.list()).containsExactly("default");
    }
  }

  @Test
  void serveRefusesACeilingBelowWhatASandboxNeeds() {
    Run tooFew = run("serve", "--port", "0", "--max-pids", "3");
    assertThat(tooFew.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(tooFew.err()).contains("maxPidsPerSandbox must be at least 16");
  }

  @Test
  void serveRefusesAnImageSizeLimitWithoutARegistryToPullFrom() {
    Run alone = run("serve", "--port", "0", "--max-image-size", "1G");
    assertThat(alone.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(alone.err())
        .contains("--max-image-size bounds the images pulled for --allow-registry");
    Run docker =
        run(
            "serve",
            "--provider",
            "docker",
            "--port",
            "0",
            "--allow-registry",
            "ghcr.io",
            "--max-image-size",
            "1G");
    assertThat(docker.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(docker.err())
        .contains(
            "--allow-registry, --max-image-size are for the local engine only, not --provider"
                + " docker");
  }

  @Test
  void serveRefusesByNameWhatDockerDoesNotTakeAndAnotherProvidersDataDirectory() {
    Run localOnly =
        run(
            "serve",
            "--provider",
            "docker",
            "--port",
            "0",
            "--disk-overcommit",
            "2",
            "--max-disk-inodes",
            "5000");
    assertThat(localOnly.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(localOnly.err())
        .contains(
            "--disk-overcommit, --max-disk-inodes are for the local engine only, not --provider"
                + " docker");
    Run unknown = run("serve", "--provider", "host", "--port", "0");
    assertThat(unknown.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(unknown.err())
        .contains("a server serves local, docker, boxd, modal or k8s sandboxes, not 'host'");

    Path data = home.resolve("local-data");
    SandboxServer.builder()
        .engine(LocalSandbox.builder().home(home).build())
        .dataDirectory(data)
        .build()
        .close(); // a local server used it
    Run other = run("serve", "--provider", "docker", "--port", "0", "--data", data.toString());
    if (dev.sandbox4j.docker.DockerSandbox.isDaemonConfigured()) {
      assertThat(other.exitCode()).isEqualTo(ExitCodes.USAGE);
      assertThat(other.err())
          .contains(data.toString())
          .contains("serves provider 'local' sandboxes, not 'docker'");
    } else { // no daemon here: refused before the data directory is looked at
      assertThat(other.exitCode()).isEqualTo(ExitCodes.UNAVAILABLE);
      assertThat(other.err()).contains("--provider docker: no Docker daemon here");
    }
  }

  @Test
  void serveRefusesAnIsolationItCannotGiveOrThatContradictsTheForcedOne() {
    Run docker = run("serve", "--provider", "docker", "--port", "0", "--force-isolation", "gvisor");
    assertThat(docker.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(docker.err())
        .contains("--force-isolation gvisor is for the local engine only, not --provider docker");

    Run contradiction =
        run(
            "serve",
            "--port",
            "0",
            "--default-isolation",
            "container",
            "--force-isolation",
            "gvisor");
    assertThat(contradiction.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(contradiction.err())
        .contains("--default-isolation container contradicts --force-isolation gvisor");

    Run unknown = run("serve", "--port", "0", "--default-isolation", "vm");
    assertThat(unknown.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(unknown.err()).contains("unknown isolation 'vm': expected one of container, gvisor");
  }

  @Test
  void serveRefusesAWarmPoolOutOfRangeOrOnDocker() {
    for (String size : List.of("-1", "65")) {
      Run refused = run("serve", "--port", "0", "--warm-pool", size);
      assertThat(refused.exitCode()).isEqualTo(ExitCodes.USAGE);
      assertThat(refused.err()).contains("--warm-pool must be between 0 and 64, not " + size);
    }
    Run docker = run("serve", "--provider", "docker", "--port", "0", "--warm-pool", "2");
    assertThat(docker.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(docker.err())
        .contains("--warm-pool is for the local engine only, not --provider docker");
  }

  @Test
  void theDockerEngineRefusesGvisorByItsFieldSoThatTheServerAnswers501() {
    ServerEngine.Shape gvisor =
        new ServerEngine.Shape(
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            Isolation.GVISOR);
    DockerServerEngine engine = new DockerServerEngine(line -> {}); // no daemon is asked

    assertThatThrownBy(() -> engine.shaped(gvisor))
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageStartingWith("isolation: docker sandboxes are containers");
    assertThat(engine.shaped(ServerEngine.Shape.attach(null, null))).isNotNull();
  }

  @Test
  void serveAnswersWithTheKeysOfItsDataDirectory() throws Exception {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Path engineHome = Path.of(System.getenv().getOrDefault("SANDBOX4J_HOME", "/var/lib/sandbox4j"));
    Path data = home.resolve("served");
    String key = run("keys", "--data", data.toString(), "create", "--org", "cli").out().strip();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream errStream = new PrintStream(err, true, StandardCharsets.UTF_8);
    Thread serving =
        Thread.ofVirtual()
            .start(
                () ->
                    Cli.run(
                        new CliContext(
                            engineHome,
                            new ByteArrayInputStream(new byte[0]),
                            new PrintStream(new ByteArrayOutputStream()),
                            errStream),
                        "serve",
                        "--port",
                        "0",
                        "--data",
                        data.toString()));
    try {
      Matcher uri = Pattern.compile("serving on (http://\\S+)").matcher("");
      for (int i = 0; i < 600 && !uri.reset(err.toString(StandardCharsets.UTF_8)).find(); i++) {
        Thread.sleep(50);
      }
      assertThat(uri.reset(err.toString(StandardCharsets.UTF_8)).find())
          .as(err.toString(StandardCharsets.UTF_8))
          .isTrue();
      HttpClient http = HttpClient.newHttpClient();
      HttpResponse<String> list =
          http.send(
              HttpRequest.newBuilder(URI.create(uri.group(1) + "/v1/sandboxes"))
                  .header("Authorization", "Bearer " + key)
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(list.statusCode()).as(list.body()).isEqualTo(200);
      assertThat(list.body()).contains("\"items\"");
      HttpResponse<String> anonymous =
          http.send(
              HttpRequest.newBuilder(URI.create(uri.group(1) + "/v1/sandboxes")).build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(anonymous.statusCode()).isEqualTo(401);
    } finally {
      serving.interrupt();
      serving.join();
    }
    assertThat(err.toString(StandardCharsets.UTF_8)).doesNotContain(key).contains("\"route\"");
  }
}
