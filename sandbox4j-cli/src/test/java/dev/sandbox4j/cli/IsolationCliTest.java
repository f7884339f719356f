package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.oci.Gvisor;
import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code --isolation} over real local sandboxes: a gVisor sandbox runs on gVisor's own kernel
 * (which {@code uname -r} calls 4.4.0), a container one on the host's; {@code ls} says which each
 * is. Needs what {@link LocalCliTest} needs, and gVisor's runsc ({@code sandbox4j setup}).
 */
class IsolationCliTest {

  private static final Path HOME =
      Path.of(Optional.ofNullable(System.getenv("SANDBOX4J_HOME")).orElse("/var/lib/sandbox4j"));
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern CREATED = Pattern.compile("Created local sandbox (local:[a-z0-9]+)");

  /** What gVisor's kernel tells {@code uname -r}, whatever the host runs. */
  private static final String GVISOR_KERNEL = "4.4.0";

  private final List<String> created = new ArrayList<>();

  record Run(int exitCode, String out, String err) {}

  @BeforeAll
  static void requireGvisor() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/bin/crun"))
            || Files.isExecutable(Path.of("/usr/local/bin/crun")),
        "crun (sandbox4j setup)");
    Prerequisites.require(
        Gvisor.unavailable().isEmpty(), Gvisor.unavailable().orElse("gVisor's runsc"));
    Run build = run("--quiet", "image", "build");
    assertThat(build.exitCode()).as(build.err()).isZero();
  }

  @AfterEach
  void destroyWhatTheTestCreated() {
    if (!created.isEmpty()) {
      List<String> args = new ArrayList<>(List.of("rm"));
      args.addAll(created);
      Run rm = run(args.toArray(String[]::new));
      assertThat(rm.exitCode()).as(rm.err()).isZero();
    }
  }

  private static Run run(String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      code = Cli.run(new CliContext(HOME, new ByteArrayInputStream(new byte[0]), o, e), args);
    }
    return new Run(
        code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  private String create(String... options) {
    List<String> args = new ArrayList<>(List.of("--quiet", "create"));
    args.addAll(List.of(options));
    Run r = run(args.toArray(String[]::new));
    assertThat(r.exitCode()).as(r.err()).isZero();
    String ref = r.out().strip();
    assertThat(ref).matches("local:[a-z0-9]+");
    created.add(ref);
    return ref;
  }

  private static String kernelOf(String ref) {
    Run uname = run("exec", ref, "--", "uname", "-r");
    assertThat(uname.exitCode()).as(uname.err()).isZero();
    return uname.out().strip();
  }

  private static JsonNode listed(String ref) throws Exception {
    Run ls = run("ls", "--provider", "local", "--json");
    assertThat(ls.exitCode()).as(ls.err()).isZero();
    for (JsonNode row : JSON.readTree(ls.out())) {
      if (("local:" + row.get("id").asText()).equals(ref)) {
        return row;
      }
    }
    throw new AssertionError(ref + " is not in ls --json: " + ls.out());
  }

  @Test
  void createWithGvisorRunsOnGvisorsKernelAndLsSaysWhichIsolationEachSandboxHas() throws Exception {
    String gvisor = create("--isolation", "gvisor");
    String container = create();

    assertThat(kernelOf(gvisor)).isEqualTo(GVISOR_KERNEL);
    assertThat(kernelOf(container))
        .as("a container runs on the host's kernel")
        .isEqualTo(System.getProperty("os.version"))
        .isNotEqualTo(GVISOR_KERNEL);

    assertThat(listed(gvisor).path("isolation").asText()).isEqualTo("gvisor");
    assertThat(listed(container).path("isolation").asText()).isEqualTo("container");
    Run table = run("ls", "--provider", "local");
    assertThat(table.out().lines().findFirst().orElseThrow())
        .matches("REF +STATE +IMAGE +ISOLATION +CREATED .*");
    assertThat(table.out())
        .containsPattern(Pattern.quote(gvisor) + " +running +default +gvisor ")
        .containsPattern(Pattern.quote(container) + " +running +default +container ");
  }

  @Test
  void execNewTakesTheIsolationAndAnExistingSandboxKeepsItsOwn() {
    Run fresh = run("--quiet", "exec", "new", "--isolation", "GVisor", "--", "uname", "-r");
    Matcher m = CREATED.matcher(fresh.err());
    assertThat(m.find()).as(fresh.err()).isTrue();
    created.add(m.group(1));
    assertThat(fresh.exitCode()).as(fresh.err()).isZero();
    assertThat(fresh.out().strip()).isEqualTo(GVISOR_KERNEL);

    Run again = run("exec", m.group(1), "--isolation", "container", "--", "true");
    assertThat(again.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(again.err())
        .contains(
            "--isolation is for a new sandbox; "
                + m.group(1)
                + " keeps the isolation it was created with");
  }

  @Test
  void shellOnAGvisorSandboxSaysGvisorHasNoTerminalWithOrWithoutOneHere() {
    String gvisor = create("--isolation", "gvisor");

    Run shell = run("shell", gvisor);

    assertThat(shell.exitCode()).as(shell.err()).isEqualTo(ExitCodes.FAILURE);
    assertThat(shell.err())
        .startsWith("sandbox4j: an interactive terminal is not supported with gVisor isolation")
        .contains("sandbox4j exec")
        .doesNotContain("Exception", "\tat ");
  }
}
