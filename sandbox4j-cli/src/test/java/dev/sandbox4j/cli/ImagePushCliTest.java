package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.RegistryImages;
import dev.sandbox4j.runtime.TestImages;
import dev.sandbox4j.runtime.TestRegistry;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 20 from the command line: {@code image push} and {@code snapshot push} to a real registry
 * (docker-registry on loopback with basic auth), and a snapshot pulled back to create from.
 */
class ImagePushCliTest {
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
  void anImageAndASnapshotArePushedToAPrivateRegistryAndTheSnapshotComesBack() throws Exception {
    RegistryImages.Configured configured =
        RegistryImages.configured(temp.resolve("image"), RegistryImages.NUMERIC_USER);
    registry.push(configured.image().layout(), "team/tool:2");
    String auth = registry.host() + "=" + registry.user();
    String password = registry.password() + "\n";
    String name =
        run(
                password,
                "image",
                "pull",
                "--registry-auth",
                auth,
                "--password-stdin",
                registry.host() + "/team/tool:2")
            .out()
            .strip();

    String copy = registry.host() + "/copies/tool:1";
    Run anonymous = run("", "image", "push", name, copy);
    assertThat(anonymous.exitCode()).isEqualTo(ExitCodes.FAILURE);
    assertThat(anonymous.err())
        .contains("needs credentials", "sandbox4j image push --registry-auth " + registry.host());
    Run noPassword = run("", "image", "push", "--registry-auth", auth, name, copy);
    assertThat(noPassword.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(noPassword.err()).contains("needs --password-stdin");
    Run pushed =
        run(password, "image", "push", "--registry-auth", auth, "--password-stdin", name, copy);
    assertThat(pushed.exitCode()).as(pushed.err()).isZero();
    assertThat(pushed.out().strip())
        .isEqualTo(copy + "@" + registry.manifestDigest("copies/tool:1"));
    assertThat(pushed.err()).contains("uploaded");

    Run created = run("", "create", "--image", name);
    assertThat(created.exitCode()).as(created.err()).isZero();
    String sandbox = created.out().strip();
    assertThat(run("", "exec", sandbox, "--", "sh", "-c", "echo kept > /tmp/mark").exitCode())
        .isZero();
    assertThat(run("", "snapshot", sandbox, "snap").exitCode()).isZero();
    String snapRef = registry.host() + "/snaps/tool:1";
    Run notASnapshot =
        run(
            password,
            "snapshot",
            "push",
            "--registry-auth",
            auth,
            "--password-stdin",
            name,
            snapRef);
    assertThat(notASnapshot.exitCode()).isEqualTo(ExitCodes.USAGE);
    assertThat(notASnapshot.err()).contains("no snapshot '" + name + "'");
    Run snapPushed =
        run(
            password,
            "snapshot",
            "push",
            "--registry-auth",
            auth,
            "--password-stdin",
            "snap",
            snapRef);
    assertThat(snapPushed.exitCode()).as(snapPushed.err()).isZero();
    assertThat(snapPushed.out().strip())
        .isEqualTo(snapRef + "@" + registry.manifestDigest("snaps/tool:1"));

    assertThat(run("", "rm", sandbox).exitCode()).isZero();
    assertThat(run("", "snapshot", "rm", "snap").exitCode()).isZero();
    assertThat(run("", "image", "rm", name).exitCode()).isZero();
    Run back = run(password, "image", "pull", "--registry-auth", auth, "--password-stdin", snapRef);
    assertThat(back.exitCode()).as(back.err()).isZero();
    Run fromSnapshot = run("", "create", "--image", snapRef);
    assertThat(fromSnapshot.exitCode()).as(fromSnapshot.err()).isZero();
    String restored = fromSnapshot.out().strip();
    assertThat(run("", "exec", restored, "--", "cat", "/tmp/mark", "/srv/app/hello.txt").out())
        .isEqualTo("kept\nhello from /srv/app\n");
    assertThat(run("", "rm", restored).exitCode()).isZero();
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
