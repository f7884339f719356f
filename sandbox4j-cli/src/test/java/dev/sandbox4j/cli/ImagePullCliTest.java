package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.RegistryImages;
import dev.sandbox4j.runtime.TestImages;
import dev.sandbox4j.runtime.TestRegistry;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 20 from the command line: {@code image pull} from a real registry (docker-registry on
 * loopback with basic auth, filled by skopeo), {@code image ls} showing the reference and digest,
 * {@code create --image REF}, {@code image rm REF}.
 */
class ImagePullCliTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path temp;

  private Path home;
  private TestRegistry registry;

  record Run(int exitCode, String out, String err) {}

  @BeforeEach
  void setUp() throws Exception {
    Prerequisites.requireLocalEngine();
    TestRegistry.requireRegistry();
    home = TestImages.privateHome(temp);
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.BASIC);
  }

  @AfterEach
  void tearDown() throws Exception {
    registry.close();
    TestImages.destroyAllAndDelete(LocalSandbox.builder().home(home).build(), home);
  }

  @Test
  void pullListCreateFromAndRemoveAnImageOfAPrivateRegistry() throws Exception {
    RegistryImages.Configured configured =
        RegistryImages.configured(temp.resolve("image"), RegistryImages.NUMERIC_USER);
    registry.push(configured.image().layout(), "team/tool:2");
    String ref = registry.host() + "/team/tool:2";
    String auth = registry.host() + "=" + registry.user();

    Run anonymous = run("", "image", "pull", ref);
    assertThat(anonymous.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(anonymous.err()).contains("needs credentials", "--registry-auth");
    Run noPassword = run("", "image", "pull", "--registry-auth", auth, ref);
    assertThat(noPassword.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(noPassword.err()).contains("needs --password-stdin");
    Run wrong = run("nope\n", "image", "pull", "--registry-auth", auth, "--password-stdin", ref);
    assertThat(wrong.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(wrong.err()).contains("refused the credentials of user " + registry.user());

    Run pulled =
        run(
            registry.password() + "\n",
            "image",
            "pull",
            "--registry-auth",
            auth,
            "--password-stdin",
            ref);
    assertThat(pulled.exitCode()).as(pulled.err()).isZero();
    String name = pulled.out().strip();
    assertThat(name).startsWith("tool-2-");

    Run table = run("", "image", "ls");
    assertThat(table.out())
        .containsPattern("(?m)^NAME +REFERENCE +DIGEST +CREATED +SIZE +DESCRIPTION$")
        .containsPattern(
            "(?m)^"
                + name
                + " +"
                + java.util.regex.Pattern.quote(ref)
                + " +"
                + configured.image().digest().substring(0, 19)
                + " ");
    JsonNode listed = JSON.readTree(run("", "image", "ls", "--json").out()).get(0);
    assertThat(listed.path("reference").asText()).isEqualTo(ref);
    assertThat(listed.path("digest").asText()).isEqualTo(configured.image().digest());

    // Here already: create uses it without asking the registry (no credentials given now).
    Run created = run("", "create", "--image", ref);
    assertThat(created.exitCode()).as(created.err()).isZero();
    String sandbox = created.out().strip();
    Run exec = run("", "exec", sandbox, "--", "cat", "/srv/app/hello.txt");
    assertThat(exec.out()).isEqualTo("hello from /srv/app\n");
    assertThat(run("", "exec", sandbox, "--", "id", "-u").out())
        .as("the image's User")
        .isEqualTo("1234\n");
    assertThat(run("", "rm", sandbox).exitCode()).isZero();
    Run asRoot = run("", "create", "--image", ref, "--user", "0");
    assertThat(asRoot.exitCode()).as(asRoot.err()).isZero();
    String rootSandbox = asRoot.out().strip();
    assertThat(run("", "exec", rootSandbox, "--", "id", "-u").out()).isEqualTo("0\n");
    assertThat(run("", "rm", rootSandbox).exitCode()).isZero();
    Run badUser = run("", "create", "--image", ref, "--user", "a:b:c");
    assertThat(badUser.exitCode()).isEqualTo(ExitCodes.USAGE);

    Run rm = run("", "image", "rm", ref);
    assertThat(rm.exitCode()).as(rm.err()).isZero();
    assertThat(run("", "image", "ls", "--json").out().strip()).isEqualTo("[]");
  }

  @Test
  void imageGcDeletesADownloadNoPullIsWorkingOn() throws Exception {
    RegistryImages.Image image = RegistryImages.zstdLayer(temp.resolve("image"));
    registry.push(image.layout(), "gc/me:1");
    String ref = registry.host() + "/gc/me:1";
    Run pulled =
        run(
            registry.password(),
            "image",
            "pull",
            "--registry-auth",
            registry.host() + "=" + registry.user(),
            "--password-stdin",
            ref);
    assertThat(pulled.exitCode()).as(pulled.err()).isZero();
    // What a pull that died midway leaves.
    Path downloads = home.resolve("images/.downloads");
    Files.write(downloads.resolve("sha256-" + "ab".repeat(32)), new byte[4096]);
    assertThat(run("", "image", "rm", ref).exitCode()).isZero();

    Run gc = run("", "image", "gc");
    assertThat(gc.exitCode()).as(gc.err()).isZero();
    assertThat(gc.out()).contains("removed partial download sha256-" + "ab".repeat(32));
    assertThat(downloads.resolve("sha256-" + "ab".repeat(32))).doesNotExist();
    assertThat(run("", "image", "gc").out().strip()).isEqualTo("nothing to clean");
  }

  private Run run(String stdin, String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code;
    try (PrintStream o = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8)) {
      code =
          Cli.run(
              new CliContext(
                  home, new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)), o, e),
              args);
    }
    return new Run(
        code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }
}
