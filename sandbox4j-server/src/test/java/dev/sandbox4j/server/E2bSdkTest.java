package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.mcp.NodeMcpClient;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The E2B-compatible API of a real server on loopback over the local engine, driven by E2B's own
 * JavaScript SDK ({@code e2b} from npm, pinned by {@code src/test/node/package-lock.json} and
 * installed with {@code npm ci}): one Node run of {@code e2b.mjs} walks the SDK's surface and
 * prints what each step saw, asserted here.
 */
class E2bSdkTest {

  private static final Path SOURCES = Path.of("src/test/node");
  private static final Path NODE_DIR = Path.of("target/e2b-node-client");

  @TempDir Path data;

  @BeforeAll
  static void prerequisites() throws Exception {
    TestServer.requireLocalEngine();
    install();
    NodeMcpClient.warmUpLocalEngine();
  }

  @Test
  void theE2bSdkRunsItsSurfaceAgainstTheServer() throws Exception {
    // four creates an hour: the script's four sandboxes (a fork counts), then its fifth create is
    // rate limited
    try (TestServer server =
        new TestServer(data, b -> b.createRateLimit(4, java.time.Duration.ofHours(1)))) {
      String key = server.key("acme");
      String other = server.key("other");
      String base = server.server.uri().toString();
      JsonNode r =
          run(
              Map.of(
                  "E2B_API_KEY",
                  key,
                  "E2B_API_URL",
                  base + "/e2b",
                  "E2B_SANDBOX_URL",
                  base + "/e2b/envd",
                  "OTHER_KEY",
                  other));
      String id = r.path("create").path("id").asText();
      if (!id.isEmpty()) {
        server.track(id);
      }
      assertThat(id).as("create: %s", r.path("create")).isNotEmpty();

      JsonNode fg = r.path("runForeground");
      assertThat(fg.path("exitCode").asInt(-1)).as("%s", fg).isZero();
      assertThat(fg.path("stdout").asText()).isEqualTo("hello\nfrom-create\n");
      assertThat(fg.path("stderr").asText()).isEqualTo("oops\n");
      assertThat(r.path("runEnvCwd").path("stdout").asText()).isEqualTo("v1\n/tmp\n");

      JsonNode nonZero = r.path("runNonZero");
      assertThat(nonZero.path("isCommandExitError").asBoolean()).as("%s", nonZero).isTrue();
      assertThat(nonZero.path("exitCode").asInt()).isEqualTo(3);
      assertThat(nonZero.path("stderr").asText()).isEqualTo("bad\n");

      JsonNode timeout = r.path("runTimeout");
      assertThat(timeout.path("isTimeout").asBoolean()).as("%s", timeout).isTrue();
      assertThat(timeout.path("ms").asLong()).isLessThan(15_000);

      JsonNode stdin = r.path("stdin");
      assertThat(stdin.path("stdout").asText()).as("%s", stdin).isEqualTo("piped line\n");

      JsonNode bg = r.path("background");
      assertThat(bg.path("listedHasPid").asBoolean()).as("%s", bg).isTrue();
      assertThat(bg.path("killed").asBoolean()).isTrue();
      assertThat(bg.path("waited").path("threw").asText()).isEqualTo("CommandExitError");
      assertThat(bg.path("stdout").asText()).isEqualTo("started\n");
      assertThat(bg.path("listedAfter").asBoolean()).isFalse();
      assertThat(r.path("backgroundWait").path("stdout").asText()).isEqualTo("done\n");

      JsonNode files = r.path("files");
      assertThat(files.path("read").asText()).as("%s", files).isEqualTo("content one");
      assertThat(files.path("written").path("path").asText()).isEqualTo("/tmp/e2b-test/a.txt");
      assertThat(files.path("bytesLength").asInt()).isEqualTo(11);
      assertThat(files.path("madeDir").asBoolean()).isTrue();
      assertThat(files.path("madeAgain").asBoolean()).isFalse();
      assertThat(files.path("list").toString())
          .contains("\"name\":\"a.txt\",\"type\":\"file\"")
          .contains("\"name\":\"sub\",\"type\":\"dir\"");
      assertThat(files.path("info").path("size").asInt()).isEqualTo(11);
      assertThat(files.path("info").path("type").asText()).isEqualTo("file");
      assertThat(files.path("info").path("hasModified").asBoolean()).isTrue();
      assertThat(files.path("renamed").path("path").asText()).isEqualTo("/tmp/e2b-test/sub/b.txt");
      assertThat(files.path("existsOld").asBoolean()).isFalse();
      assertThat(files.path("existsNew").asBoolean()).isTrue();
      assertThat(files.path("viaShell").asText()).isEqualTo("content one");
      assertThat(files.path("existsAfterRemove").asBoolean()).isFalse();
      assertThat(files.path("missing").asText()).isEqualTo("FileNotFoundError");
      assertThat(files.path("multi").toString())
          .isEqualTo("[\"/tmp/e2b-test/m1.txt\",\"/tmp/e2b-test/m2.txt\"]");
      assertThat(files.path("homeRead").asText()).isEqualTo("at homeat home");

      JsonNode signed = r.path("signedUrls");
      assertThat(signed.path("hasSandboxId").asBoolean()).as("%s", signed).isFalse();
      assertThat(signed.path("downStatus").asInt()).isEqualTo(200);
      assertThat(signed.path("downText").asText()).isEqualTo("one");
      assertThat(signed.path("upStatus").asInt()).isEqualTo(200);
      assertThat(signed.path("readBack").asText()).isEqualTo("sent by url");
      assertThat(signed.path("tampered").asInt()).isEqualTo(401);

      JsonNode watch = r.path("watchDir");
      assertThat(watch.path("events").toString()).as("%s", watch).contains("\"name\":\"new.txt\"");

      JsonNode reattach = r.path("commandsConnect");
      assertThat(reattach.path("stdout").asText()).as("%s", reattach).isEqualTo("later\n");
      assertThat(reattach.path("samePid").asBoolean()).isTrue();
      JsonNode raw = r.path("envdRaw");
      assertThat(raw.path("forged").asInt()).as("%s", raw).isEqualTo(401);
      assertThat(raw.path("forgedBody").path("code").asText()).isEqualTo("unauthenticated");
      assertThat(raw.path("binary").asInt()).isEqualTo(200);
      assertThat(raw.path("binaryType").asText()).isEqualTo("application/proto");
      assertThat(raw.path("binaryHasPath").asBoolean()).isTrue();
      assertThat(raw.path("streamedType").asText()).isEqualTo("application/connect+proto");
      assertThat(raw.path("stdoutSeen").asBoolean()).isTrue();
      assertThat(raw.path("trailer").path("flags").asInt()).isEqualTo(2);
      assertThat(raw.path("trailer").path("text").asText()).isEqualTo("{}");
      assertThat(raw.path("health").asInt()).isEqualTo(204);

      JsonNode host = r.path("getHost");
      assertThat(host.path("name").asText()).as("%s", host).isEqualTo("8123-" + id + ".localhost");
      assertThat(host.path("status").asInt()).isEqualTo(200);
      assertThat(host.path("body").asText()).isEqualTo("served from the sandbox");

      JsonNode user = r.path("user");
      assertThat(user.path("rootUid").asText()).as("%s", user).isEqualTo("0");

      assertThat(r.path("setTimeout").path("extendedBySeconds").asLong())
          .as("%s", r.path("setTimeout"))
          .isGreaterThan(400);
      JsonNode info = r.path("info");
      assertThat(info.path("sandboxId").asText()).isEqualTo(id);
      assertThat(info.path("templateId").asText()).isEqualTo("base");
      assertThat(info.path("state").asText()).isEqualTo("running");
      assertThat(info.path("metadata").path("role").asText()).isEqualTo("main");
      assertThat(info.path("running").asBoolean()).isTrue();

      JsonNode list = r.path("list");
      assertThat(list.path("ids").toString()).as("%s", list).isEqualTo("[\"" + id + "\"]");
      assertThat(list.path("none").asInt()).isZero();
      assertThat(r.path("connect").path("stdout").asText()).isEqualTo("connected\n");

      JsonNode pause = r.path("pauseResume");
      assertThat(pause.path("paused").asBoolean()).as("%s", pause).isTrue();
      assertThat(pause.path("pausedAgain").asBoolean()).isFalse();
      assertThat(pause.path("state").asText()).isEqualTo("paused");
      assertThat(pause.path("running").asBoolean()).isFalse();
      assertThat(pause.path("listedPaused").asInt()).isEqualTo(1);
      assertThat(pause.path("stateAfter").asText()).isEqualTo("running");
      assertThat(pause.path("kept").asText()).isEqualTo("kept\n");

      assertThat(r.path("wrongKey").path("isAuth").asBoolean())
          .as("%s", r.path("wrongKey"))
          .isTrue();
      JsonNode otherOrg = r.path("otherOrg");
      assertThat(otherOrg.path("connectIsNotFound").asBoolean()).as("%s", otherOrg).isTrue();
      assertThat(otherOrg.path("kill").asBoolean()).isFalse();
      assertThat(otherOrg.path("otherSeesIt").asBoolean()).isFalse();
      assertThat(otherOrg.path("info").asText()).isEqualTo("SandboxNotFoundError");
      JsonNode unknown = r.path("unknownTemplate");
      assertThat(unknown.path("isSandboxError").asBoolean()).as("%s", unknown).isTrue();
      assertThat(unknown.path("message").asText())
          .startsWith("404: ")
          .contains("no-such-template-xyz");

      JsonNode shortLived = r.path("createShortLived");
      if (shortLived.has("id")) {
        server.track(shortLived.path("id").asText());
      }
      assertThat(shortLived.path("endsInMs").asLong()).as("%s", shortLived).isBetween(1L, 3_000L);
      JsonNode timedOut = r.path("timedOut");
      assertThat(timedOut.path("running").asBoolean(true)).as("%s", timedOut).isFalse();
      assertThat(timedOut.path("info").asText()).isEqualTo("SandboxNotFoundError");

      JsonNode forkSnap = r.path("forkAndSnapshot");
      for (String made : List.of("child", "fromSnap")) {
        if (forkSnap.hasNonNull(made)) {
          server.track(forkSnap.path(made).asText());
        }
      }
      assertThat(forkSnap.path("inChild").asText()).as("%s", forkSnap).isEqualTo("from the parent");
      assertThat(forkSnap.path("snapshotId").asText()).isEqualTo("e2b-snap");
      assertThat(forkSnap.path("listed").toString()).isEqualTo("[\"e2b-snap\"]");
      assertThat(forkSnap.path("inSnap").asText()).isEqualTo("from the parent");
      assertThat(forkSnap.path("template").asText()).isEqualTo("e2b-snap");
      assertThat(forkSnap.path("deleted").asBoolean()).isTrue();

      JsonNode limited = r.path("rateLimited");
      assertThat(limited.path("isRateLimit").asBoolean()).as("%s", limited).isTrue();

      JsonNode kill = r.path("kill");
      assertThat(kill.path("killed").asBoolean()).as("%s", kill).isTrue();
      assertThat(kill.path("again").asBoolean()).isFalse();
      assertThat(kill.path("info").asText()).isEqualTo("SandboxNotFoundError");
      // envd of a killed sandbox answers as E2B's proxy does for one that no longer runs
      assertThat(kill.path("run").asText()).isEqualTo("SandboxNotFoundError");
    }
  }

  /** Installs the SDK from the lock file once (an unchanged lock file reuses the copy). */
  static void install() throws Exception {
    Prerequisites.require(onPath("node") && onPath("npm"), "node and npm (Debian: nodejs, npm)");
    Files.createDirectories(NODE_DIR);
    boolean cached = Files.isDirectory(NODE_DIR.resolve("node_modules/e2b"));
    for (String file : List.of("package.json", "package-lock.json", "e2b.mjs")) {
      byte[] wanted = Files.readAllBytes(SOURCES.resolve(file));
      Path installed = NODE_DIR.resolve(file);
      if (!Files.exists(installed) || !Arrays.equals(Files.readAllBytes(installed), wanted)) {
        cached &= file.endsWith(".mjs");
        Files.write(installed, wanted);
      }
    }
    if (!cached) {
      NodeMcpClient.npmCi(NODE_DIR);
    }
  }

  static JsonNode run(Map<String, String> env) throws Exception {
    Path stderr = NODE_DIR.resolve("last-stderr.log");
    ProcessBuilder builder =
        new ProcessBuilder("node", "e2b.mjs")
            .directory(NODE_DIR.toFile())
            .redirectError(stderr.toFile());
    builder.environment().keySet().removeIf(k -> k.startsWith("E2B_"));
    builder.environment().putAll(env);
    Process node = builder.start();
    node.getOutputStream().close();
    String out = new String(node.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    boolean done = node.waitFor(3, TimeUnit.MINUTES);
    if (!done) {
      node.destroyForcibly();
    }
    Files.writeString(NODE_DIR.resolve("last-result.json"), out);
    String err = Files.readString(stderr);
    assertThat(done).as("node finished; stderr: %s", err).isTrue();
    assertThat(node.exitValue()).as("node exit; stdout: %s; stderr: %s", out, err).isZero();
    return TestServer.JSON.readTree(out);
  }

  private static boolean onPath(String program) {
    for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
      if (Files.isExecutable(Path.of(dir, program))) {
        return true;
      }
    }
    return false;
  }
}
