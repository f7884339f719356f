package dev.sandbox4j.mcp;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The server as a client we did not write sees it: the official TypeScript SDK, installed from npm
 * into {@code target/}, starts the server as a child process and calls its tools.
 */
class McpToolServerClientTest {

  private static final Path NODE_SOURCES = Path.of("src/test/node");
  private static final Path NODE_DIR = Path.of("target/mcp-node-client");

  @BeforeAll
  static void installClient() throws Exception {
    Prerequisites.require(onPath("node") && onPath("npm"), "node and npm (Debian: nodejs, npm)");
    Files.createDirectories(NODE_DIR);
    // the lock file pins every package npm installs; an unchanged pair reuses the installed copy
    boolean cached = Files.isDirectory(NODE_DIR.resolve("node_modules/@modelcontextprotocol/sdk"));
    for (String file : List.of("package.json", "package-lock.json")) {
      byte[] wanted = Files.readAllBytes(NODE_SOURCES.resolve(file));
      Path installed = NODE_DIR.resolve(file);
      if (!Files.exists(installed) || !Arrays.equals(Files.readAllBytes(installed), wanted)) {
        cached = false;
        Files.write(installed, wanted);
      }
    }
    Files.copy(
        NODE_SOURCES.resolve("client.mjs"),
        NODE_DIR.resolve("client.mjs"),
        StandardCopyOption.REPLACE_EXISTING);
    if (!cached) {
      Process npm =
          new ProcessBuilder("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
              .directory(NODE_DIR.toFile())
              .redirectErrorStream(true)
              .redirectOutput(NODE_DIR.resolve("npm-install.log").toFile())
              .start();
      assertThat(npm.waitFor(5, TimeUnit.MINUTES)).as("npm ci finished").isTrue();
      assertThat(npm.exitValue())
          .as("npm ci: %s", Files.readString(NODE_DIR.resolve("npm-install.log")))
          .isZero();
    }
  }

  @Test
  void theTypeScriptSdkListsAndCallsTheCoderToolsInAHostWorkspace(@TempDir Path root)
      throws Exception {
    JsonNode result = runClient(root, List.of("host", root.toString()));
    assertListsAndCalls(result);
    assertThat(Files.readString(root.resolve(onlyWorkspace(root), "hello.txt")))
        .isEqualTo("hello from mcp\n");
  }

  @Test
  void theTypeScriptSdkListsAndCallsTheCoderToolsInALocalSandbox(@TempDir Path logs)
      throws Exception {
    requireLocalEngine();
    // builds the default image now if it is missing: within a call, the client would time out
    LocalSandbox sandboxes = new LocalSandbox();
    WorkspaceBackend warmUp = sandboxes.newBackend();
    try {
      Workspace.of(warmUp).open();
    } finally {
      warmUp.ref().ifPresent(sandboxes::destroy);
    }
    assertListsAndCalls(runClient(logs, List.of("local")));
  }

  /** Runs the client against {@link ServerMain} with {@code serverArgs}; its JSON output. */
  private static JsonNode runClient(Path logs, List<String> serverArgs) throws Exception {
    List<String> command = new ArrayList<>(List.of("node", "client.mjs"));
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("--enable-native-access=ALL-UNNAMED");
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(ServerMain.class.getName());
    command.addAll(serverArgs);
    Path stderr = logs.resolveSibling(logs.getFileName() + "-stderr.log");
    Process client =
        new ProcessBuilder(command)
            .directory(NODE_DIR.toFile())
            .redirectError(stderr.toFile())
            .start();
    client.getOutputStream().close();
    boolean done = client.waitFor(3, TimeUnit.MINUTES);
    String out = new String(client.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!done) {
      client.destroyForcibly();
    }
    String err = Files.readString(stderr);
    Files.writeString(NODE_DIR.resolve("last-result.json"), out); // for a reader of a failure
    assertThat(done).as("client finished; stderr: %s", err).isTrue();
    assertThat(client.exitValue()).as("client exit; stdout: %s; stderr: %s", out, err).isZero();
    return new ObjectMapper().readTree(out);
  }

  private static void assertListsAndCalls(JsonNode result) {
    assertThat(result.path("server").path("name").asText()).isEqualTo("sandbox4j");
    List<String> names = new ArrayList<>();
    result.path("tools").forEach(t -> names.add(t.path("name").asText()));
    assertThat(names)
        .contains(
            "read_file",
            "write_file",
            "edit_file",
            "list_directory",
            "find_files",
            "grep",
            "shell",
            "check_command",
            "stop_command");
    result
        .path("tools")
        .forEach(
            t -> {
              assertThat(t.path("hasDescription").asBoolean()).isTrue();
              assertThat(t.path("schemaType").asText()).isEqualTo("object");
            });

    assertThat(result.path("write").path("isError").asBoolean(false)).isFalse();
    assertThat(text(result.path("read"))).contains("hello from mcp");
    assertThat(result.path("read").path("isError").asBoolean(false)).isFalse();
    assertThat(text(result.path("shell"))).contains("hi");
    assertThat(result.path("shell").path("isError").asBoolean(false)).isFalse();
    assertThat(result.path("missing").path("isError").asBoolean()).isTrue();
    assertThat(text(result.path("missing"))).contains("no-such-file");
    assertThat(result.path("invalid").path("isError").asBoolean()).isTrue();
    assertThat(text(result.path("invalid"))).isNotBlank();
  }

  /** Root on Linux with a crun (sandbox4j setup); skips without, except under CI=true. */
  private static void requireLocalEngine() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/local/libexec/sandbox4j/crun")) || onPath("crun"),
        "crun (sandbox4j setup)");
  }

  private static String onlyWorkspace(Path root) throws IOException {
    try (var dirs = Files.list(root)) {
      List<Path> all = dirs.filter(Files::isDirectory).toList();
      assertThat(all).hasSize(1);
      return all.getFirst().getFileName().toString();
    }
  }

  private static String text(JsonNode callResult) {
    StringBuilder s = new StringBuilder();
    callResult.path("content").forEach(c -> s.append(c.path("text").asText()));
    return s.toString();
  }

  private static boolean onPath(String program) {
    String path = System.getenv("PATH");
    if (path == null) {
      return false;
    }
    for (String dir : path.split(File.pathSeparator)) {
      if (Files.isExecutable(Path.of(dir, program))) {
        return true;
      }
    }
    return false;
  }
}
