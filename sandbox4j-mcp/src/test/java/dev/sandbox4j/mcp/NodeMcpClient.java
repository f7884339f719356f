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
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A client we did not write: the official TypeScript SDK, installed from npm into {@code
 * target/mcp-node-client} of the module whose tests run, driven by {@code client.mjs} (in {@code
 * src/test/node}, shipped in this module's test-jar). Shared by this module's tests and the CLI's.
 */
public final class NodeMcpClient {

  private static final String SOURCES = "/dev/sandbox4j/mcp/node/";
  private static final Path NODE_DIR = Path.of("target/mcp-node-client");

  private NodeMcpClient() {}

  /**
   * Installs the client (once: an unchanged {@code package.json} and lock file reuse the installed
   * copy). Skips the test without node and npm, except under CI=true.
   */
  public static void install() throws Exception {
    Prerequisites.require(onPath("node") && onPath("npm"), "node and npm (Debian: nodejs, npm)");
    Files.createDirectories(NODE_DIR);
    // the lock file pins every package npm installs
    boolean cached = Files.isDirectory(NODE_DIR.resolve("node_modules/@modelcontextprotocol/sdk"));
    for (String file : List.of("package.json", "package-lock.json", "client.mjs")) {
      byte[] wanted = source(file);
      Path installed = NODE_DIR.resolve(file);
      if (!Files.exists(installed) || !Arrays.equals(Files.readAllBytes(installed), wanted)) {
        cached &= file.equals("client.mjs");
        Files.write(installed, wanted);
      }
    }
    if (!cached) {
      npmCi(NODE_DIR);
    }
  }

  /**
   * Runs {@code npm ci} in {@code dir}, where its {@code package.json} and lock file are: installs
   * exactly what the lock file pins; fails with npm's log.
   */
  public static void npmCi(Path dir) throws Exception {
    Process npm =
        new ProcessBuilder("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("npm-install.log").toFile())
            .start();
    assertThat(npm.waitFor(5, TimeUnit.MINUTES)).as("npm ci finished").isTrue();
    assertThat(npm.exitValue())
        .as("npm ci: %s", Files.readString(dir.resolve("npm-install.log")))
        .isZero();
  }

  /**
   * Runs {@code client.mjs} with {@code args} (a URL, or the command line that starts a stdio
   * server) and {@code env} added to its environment; asserts that it exits 0 and returns the JSON
   * object it prints. Its stderr goes to {@code stderrLog}.
   */
  public static JsonNode run(List<String> args, Map<String, String> env, Path stderrLog)
      throws Exception {
    List<String> command = new ArrayList<>(List.of("node", "client.mjs"));
    command.addAll(args);
    ProcessBuilder builder =
        new ProcessBuilder(command).directory(NODE_DIR.toFile()).redirectError(stderrLog.toFile());
    builder.environment().putAll(env);
    Process client = builder.start();
    client.getOutputStream().close();
    boolean done = client.waitFor(3, TimeUnit.MINUTES);
    if (!done) {
      client.destroyForcibly();
    }
    String out = new String(client.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    String err = Files.readString(stderrLog);
    // for a reader of a failure
    Files.writeString(NODE_DIR.resolve("last-result.json"), out);
    Files.writeString(NODE_DIR.resolve("last-stderr.log"), err);
    assertThat(done).as("client finished; stderr: %s", err).isTrue();
    assertThat(client.exitValue()).as("client exit; stdout: %s; stderr: %s", out, err).isZero();
    return new ObjectMapper().readTree(out);
  }

  /** The command line that starts a JVM with this test's class path running {@code mainClass}. */
  public static List<String> javaCommand(String mainClass, List<String> args) {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("--enable-native-access=ALL-UNNAMED");
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(mainClass);
    command.addAll(args);
    return command;
  }

  /**
   * Asserts what {@code client.mjs} saw: every Coder tool listed with a description and an object
   * schema; {@code write_file} then {@code read_file} of {@code hello.txt} and {@code shell} {@code
   * echo hi} succeeded; reading a missing file and calling without arguments were {@code isError}.
   */
  public static void assertListsAndCalls(JsonNode result) {
    assertThat(result.path("connectError").isMissingNode())
        .as("connected: %s", result.path("connectError"))
        .isTrue();
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

  /** The text of a {@code tools/call} result's content. */
  public static String text(JsonNode callResult) {
    StringBuilder s = new StringBuilder();
    callResult.path("content").forEach(c -> s.append(c.path("text").asText()));
    return s.toString();
  }

  /** Root on Linux with a crun (sandbox4j setup); skips without, except under CI=true. */
  public static void requireLocalEngine() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/local/libexec/sandbox4j/crun")) || onPath("crun"),
        "crun (sandbox4j setup)");
  }

  /**
   * Builds the default image now if it is missing: within a tool call, the client's 60 s request
   * timeout would end first.
   */
  public static void warmUpLocalEngine() {
    LocalSandbox sandboxes = new LocalSandbox();
    WorkspaceBackend warmUp = sandboxes.newBackend();
    try {
      Workspace.of(warmUp).open();
    } finally {
      warmUp.ref().ifPresent(sandboxes::destroy);
    }
  }

  private static byte[] source(String file) throws IOException {
    try (InputStream in = NodeMcpClient.class.getResourceAsStream(SOURCES + file)) {
      if (in == null) {
        throw new IOException("missing test resource " + SOURCES + file);
      }
      return in.readAllBytes();
    }
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
