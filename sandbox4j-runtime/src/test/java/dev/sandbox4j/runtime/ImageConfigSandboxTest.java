package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Sandboxes of an image from elsewhere (here OCI archives of a busybox root filesystem) run as its
 * config says: its {@code User}, {@code WorkingDir} and {@code Env}, unless the builder says
 * otherwise, and keep that identity through attach, fork, snapshot and stop/start; an image without
 * a shell still runs programs and serves files.
 */
class ImageConfigSandboxTest {
  /** Prints who and where a command runs, and what it got from the image. */
  private static final String WHO =
      "id -u; id -g; pwd; echo \"greeting=$GREETING\"; echo \"home=$HOME\"";

  @TempDir Path temp;

  private Path home;
  private LocalSandbox sandboxes;
  private ImageStore store;

  @BeforeEach
  void setUp() throws IOException {
    Prerequisites.requireLocalEngine();
    TestImages.requireBusybox();
    home = TestImages.privateHome(temp);
    sandboxes = LocalSandbox.builder().home(home).progress(line -> {}).build();
    store = sandboxes.engine().images();
  }

  @AfterEach
  void tearDown() throws IOException {
    TestImages.destroyAllAndDelete(sandboxes, home);
  }

  @Test
  void aNamedUserWorkingDirAndEnvApplyAndSurviveAttachForkSnapshotAndStop() throws Exception {
    importApp(
        "app",
        Map.of(
            "User", "app",
            "WorkingDir", "/srv/work",
            "Env", List.of("GREETING=hello from the image", "PATH=/usr/bin:/bin")));
    LocalSandbox onApp = LocalSandbox.builder().home(home).image("app").build();
    Workspace ws = Workspace.of(onApp.newBackend());

    assertThat(run(ws, WHO))
        .isEqualTo("1234\n2345\n/srv/work\ngreeting=hello from the image\nhome=/home/app\n");
    assertThat(run(ws, "echo $PATH; stat -c %u:%g /srv/work"))
        .as("the image's PATH; its missing WorkingDir made, the user's")
        .isEqualTo("/usr/bin:/bin\n1234:2345\n");
    assertThat(ws.workingDirectory()).isEqualTo("/srv/work");

    ws.writeText("by-the-api", "x");
    assertThat(run(ws, "stat -c %u:%g /srv/work/by-the-api")).isEqualTo("1234:2345\n");

    WorkspaceRef ref = ws.open();
    String expected = "1234\n2345\n/srv/work\ngreeting=hello from the image\nhome=/home/app\n";
    LocalSandbox fresh = LocalSandbox.builder().home(home).build(); // another process's view
    Workspace attached = Workspace.of(fresh.backend(ref).orElseThrow());
    assertThat(run(attached, WHO)).as("attached").isEqualTo(expected);
    assertThat(attached.readText("by-the-api")).isEqualTo("x");

    WorkspaceRef fork = sandboxes.forkFiles(ref).ref();
    assertThat(run(Workspace.of(fresh.backend(fork).orElseThrow()), WHO))
        .as("fork")
        .isEqualTo(expected);

    sandboxes.snapshot(ref, "app-snap");
    LocalSandbox fromSnapshot = LocalSandbox.builder().home(home).snapshot("app-snap").build();
    Workspace snapped = Workspace.of(fromSnapshot.newBackend());
    assertThat(run(snapped, WHO)).as("from the snapshot").isEqualTo(expected);
    assertThat(run(snapped, "cat by-the-api")).isEqualTo("x");

    sandboxes.stop(ref);
    sandboxes.start(ref);
    assertThat(run(Workspace.of(fresh.backend(ref).orElseThrow()), WHO))
        .as("stopped and started")
        .isEqualTo(expected);
  }

  @Test
  void theIdentityOutlivesSuspendHibernateAndALiveFork() throws Exception {
    Prerequisites.requireCheckpointRestore(sandboxes.engine().runtime(), "hibernate");
    importApp("app", Map.of("User", "app", "WorkingDir", "/srv", "Env", List.of("GREETING=g")));
    Workspace ws =
        Workspace.of(LocalSandbox.builder().home(home).image("app").build().newBackend());
    String expected = "1234\n2345\n/srv\ngreeting=g\nhome=/home/app\n";
    assertThat(run(ws, WHO)).isEqualTo(expected);
    WorkspaceRef ref = ws.open();
    LocalSandbox fresh = LocalSandbox.builder().home(home).build();

    sandboxes.suspend(ref);
    assertThat(run(Workspace.of(fresh.backend(ref).orElseThrow()), WHO))
        .as("suspended and woken")
        .isEqualTo(expected);
    sandboxes.hibernate(ref);
    assertThat(run(Workspace.of(fresh.backend(ref).orElseThrow()), WHO))
        .as("hibernated and restored")
        .isEqualTo(expected);

    var fork = sandboxes.fork(ref);
    assertThat(fork.processesCopied()).as(fork.reason()).isTrue();
    assertThat(run(Workspace.of(fresh.backend(fork.ref()).orElseThrow()), WHO))
        .as("live fork")
        .isEqualTo(expected);
  }

  @Test
  void aRecipeOnAnArchiveKeepsItsConfigAndItsStepsRunAsRoot() throws Exception {
    Path rootfs = appRootfs(temp.resolve("recipe-rootfs"));
    Path archive =
        TestImages.ociArchive(
            rootfs,
            Map.of("User", "app", "WorkingDir", "/srv", "Env", List.of("GREETING=recipe")),
            temp.resolve("recipe.tar"));
    ImageRecipe.fromArchive(archive).run("id -u > /step-user").build(sandboxes, "app-recipe");

    Workspace ws =
        Workspace.of(LocalSandbox.builder().home(home).image("app-recipe").build().newBackend());
    assertThat(run(ws, WHO)).isEqualTo("1234\n2345\n/srv\ngreeting=recipe\nhome=/home/app\n");
    assertThat(ws.readText("/step-user")).as("a step runs as root").isEqualTo("0\n");
  }

  @Test
  void theDefaultImageRunsAsTheSeedsAndAnotherUserCanBeAsked() throws Exception {
    TestImages.seedDefault(home);
    Workspace seed = Workspace.of(LocalSandbox.builder().home(home).build().newBackend());
    assertThat(run(seed, "id -un; id -u; id -g; pwd; echo $HOME $USER"))
        .isEqualTo("sandbox\n1000\n1000\n/home/sandbox\n/home/sandbox sandbox\n");

    Workspace asRoot =
        Workspace.of(LocalSandbox.builder().home(home).user("root").build().newBackend());
    assertThat(run(asRoot, "id -u; pwd; echo $HOME $USER"))
        .isEqualTo("0\n/home/sandbox\n/root root\n");
    asRoot.writeText("/etc/by-root", "x");
    assertThat(run(asRoot, "stat -c %U /etc/by-root")).isEqualTo("root\n");
  }

  @Test
  void aWarmPoolsSandboxRunsAsItsImageSays() throws Exception {
    importApp("app", Map.of("User", "app", "WorkingDir", "/srv", "Env", List.of("GREETING=warm")));
    try (LocalSandbox pool =
        LocalSandbox.builder().home(home).image("app").warmPool(1).progress(line -> {}).build()) {
      TestImages.awaitWarm(pool, 1);
      Workspace claimed = Workspace.of(pool.newBackend());
      assertThat(run(claimed, WHO)).isEqualTo("1234\n2345\n/srv\ngreeting=warm\nhome=/home/app\n");
    }
  }

  @Test
  void aNumericUserWithoutWorkingDirRunsInRootWithHomeSlash() throws Exception {
    importApp("numeric", Map.of("User", "4321:4322"));
    Workspace ws =
        Workspace.of(LocalSandbox.builder().home(home).image("numeric").build().newBackend());

    assertThat(run(ws, WHO)).isEqualTo("4321\n4322\n/\ngreeting=\nhome=/\n");
    ws.writeText("/tmp/by-the-api", "x");
    assertThat(run(ws, "stat -c %u:%g /tmp/by-the-api")).isEqualTo("4321:4322\n");
  }

  @Test
  void noUserMeansRootAndTheFilesApiWritesAsRoot() throws Exception {
    importApp("rooted", Map.of("Env", List.of("GREETING=hi")));
    Workspace ws =
        Workspace.of(LocalSandbox.builder().home(home).image("rooted").build().newBackend());

    assertThat(run(ws, WHO)).isEqualTo("0\n0\n/\ngreeting=hi\nhome=/root\n");
    ws.writeText("/etc/by-the-api", "x");
    assertThat(run(ws, "stat -c %u:%g /etc/by-the-api")).isEqualTo("0:0\n");
  }

  @Test
  void theBuildersUserWorkingDirectoryAndEnvWin() throws Exception {
    importApp(
        "app",
        Map.of(
            "User", "app", "WorkingDir", "/srv/work", "Env", List.of("GREETING=from the image")));

    Workspace ws =
        Workspace.of(
            LocalSandbox.builder()
                .home(home)
                .image("app")
                .user("root:staff")
                .workingDirectory("/home/app/project")
                .env("GREETING", "from the builder")
                .build()
                .newBackend());

    assertThat(run(ws, WHO))
        .isEqualTo("0\n50\n/home/app/project\ngreeting=from the builder\nhome=/root\n");
    assertThat(run(ws, "stat -c %u:%g /home/app/project"))
        .as("made under a parent of another user, given to this one")
        .isEqualTo("0:50\n");

    Workspace numeric =
        Workspace.of(
            LocalSandbox.builder().home(home).image("app").user("777").build().newBackend());
    assertThat(run(numeric, WHO))
        .as("the image's working directory and env stay; home / for a user without an entry")
        .isEqualTo("777\n0\n/srv/work\ngreeting=from the image\nhome=/\n");
  }

  @Test
  void anUnknownUserFailsTheCreateNamingItAndTheImage() throws Exception {
    importApp("ghostly", Map.of("User", "ghost"));
    LocalSandbox ghostly = LocalSandbox.builder().home(home).image("ghostly").build();
    assertThatThrownBy(() -> Workspace.of(ghostly.newBackend()).run(Command.argv("true")))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("'ghost'")
        .hasMessageContaining("image 'ghostly'")
        .hasMessageContaining("/etc/passwd");

    importApp("app", Map.of());
    LocalSandbox badGroup =
        LocalSandbox.builder().home(home).image("app").user("app:nogroup").build();
    assertThatThrownBy(() -> Workspace.of(badGroup.newBackend()).run(Command.argv("true")))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("group 'nogroup'")
        .hasMessageContaining("image 'app'");
    assertThat(sandboxes.list()).as("nothing left behind").isEmpty();

    assertThatThrownBy(() -> LocalSandbox.builder().user("a:b:c"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("UID, NAME, UID:GID or NAME:GROUP");
    assertThatThrownBy(() -> LocalSandbox.builder().user("70000"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("from 0 to 65535");
  }

  @Test
  void anImageWithoutAShellRunsProgramsAndServesFiles() throws Exception {
    Path rootfs = appRootfs(temp.resolve("noshell"));
    Files.delete(rootfs.resolve("bin/sh"));
    store.importArchive(
        "noshell",
        TestImages.ociArchive(rootfs, Map.of("WorkingDir", "/data"), temp.resolve("noshell.tar")),
        line -> {});
    Workspace ws =
        Workspace.of(LocalSandbox.builder().home(home).image("noshell").build().newBackend());

    CommandResult id = ws.run(Command.argv("id", "-u"));
    assertThat(id.exitCode()).as(id.stderrText()).isZero();
    assertThat(id.stdoutText()).isEqualTo("0\n");
    assertThat(ws.run(Command.argv("pwd")).stdoutText()).isEqualTo("/data\n");

    CommandResult missing = ws.run(Command.argv("no-such-program"));
    assertThat(missing.exitCode()).isEqualTo(127);
    assertThat(missing.stderrText()).contains("no-such-program: not found");

    assertThatThrownBy(() -> ws.run(Command.shell("echo hi")))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("has no /bin/sh")
        .hasMessageContaining("image 'noshell'");

    ws.writeText("written", "through the files API\n");
    assertThat(ws.readText("/data/written")).isEqualTo("through the files API\n");
    assertThat(ws.run(Command.argv("cat", "written")).stdoutText())
        .isEqualTo("through the files API\n");

    // A fresh provider attaches (its working directory checked without a shell).
    WorkspaceRef ref = ws.open();
    Workspace attached =
        Workspace.of(LocalSandbox.builder().home(home).build().backend(ref).orElseThrow());
    assertThat(attached.run(Command.argv("pwd")).stdoutText()).isEqualTo("/data\n");
  }

  @Test
  void anImageWhoseAccountsAndWorkingDirLinkOutOfItsRootReachesNothingOfTheHost() throws Exception {
    // What an attacker's image holds: links to host paths, absolute and climbing out with "..".
    Path host = Files.createDirectories(temp.resolve("host-side"));
    Files.writeString(host.resolve("passwd"), "hostonly:x:4242:4242::/:/bin/sh\n");
    String made = "s4j-made-" + Long.toHexString(System.nanoTime());
    Path rootfs = TestImages.busyboxRootfs(temp.resolve("links"));
    Files.delete(rootfs.resolve("etc/passwd"));
    Files.createSymbolicLink(rootfs.resolve("etc/passwd"), host.resolve("passwd"));
    Files.createSymbolicLink(rootfs.resolve("abs"), host);
    Files.createSymbolicLink(rootfs.resolve("up"), Path.of("../../../../../../../.." + host));
    Files.createDirectories(rootfs.resolve("tmp"));
    Files.createSymbolicLink(rootfs.resolve("tmplink"), Path.of("/tmp"));
    for (var image :
        Map.of(
                "links-user", Map.<String, Object>of("User", "hostonly"),
                "links-abs", Map.<String, Object>of("User", "0", "WorkingDir", "/abs/made"),
                "links-up", Map.<String, Object>of("User", "0", "WorkingDir", "/up/made"),
                "links-tmp", Map.<String, Object>of("User", "0", "WorkingDir", "/tmplink/" + made))
            .entrySet()) {
      store.importArchive(
          image.getKey(),
          TestImages.ociArchive(rootfs, image.getValue(), temp.resolve(image.getKey() + ".tar")),
          line -> {});
    }

    // the user is looked up in the image's own files: the host's passwd is not one of them
    assertThatThrownBy(() -> workspace("links-user").run(Command.argv("id", "-u")))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("hostonly");

    // a link the root does not hold leads nowhere: the WorkingDir cannot be made, and says why
    for (String image : List.of("links-abs", "links-up")) {
      String dir = "/" + image.substring("links-".length()) + "/made";
      assertThatThrownBy(() -> workspace(image).run(Command.argv("pwd")))
          .as(image)
          .isInstanceOf(WorkspaceException.class)
          .hasMessageContaining("working directory " + dir)
          .hasMessageContaining("already exists");
    }
    // a link to a directory the root holds is followed inside the root, as in the sandbox
    Workspace tmp = workspace("links-tmp");
    CommandResult where = tmp.run(Command.shell("pwd -P"));
    assertThat(where.exitCode()).as(where.stderrText()).isZero();
    assertThat(where.stdoutText()).isEqualTo("/tmp/" + made + "\n");

    assertThat(Path.of("/tmp", made))
        .as("made in the sandbox's /tmp, not the host's")
        .doesNotExist();
    try (var entries = Files.list(host)) {
      assertThat(entries.map(p -> p.getFileName().toString()))
          .as("the host directory the links name")
          .containsExactly("passwd");
    }
  }

  private Workspace workspace(String image) {
    return Workspace.of(LocalSandbox.builder().home(home).image(image).build().newBackend());
  }

  // ---- helpers

  /** Imports an OCI archive of {@link #appRootfs} whose image config's {@code config} is given. */
  private void importApp(String name, Map<String, Object> config) throws Exception {
    Path rootfs = appRootfs(temp.resolve("rootfs-" + name));
    store.importArchive(
        name, TestImages.ociArchive(rootfs, config, temp.resolve(name + ".tar")), line -> {});
  }

  /** A busybox root filesystem with user {@code app} (1234, group 2345) and group staff (50). */
  private static Path appRootfs(Path dir) throws Exception {
    Path rootfs = TestImages.busyboxRootfs(dir);
    Files.writeString(
        rootfs.resolve("etc/passwd"),
        "app:x:1234:2345:App:/home/app:/bin/sh\n",
        java.nio.file.StandardOpenOption.APPEND);
    Files.writeString(
        rootfs.resolve("etc/group"),
        "app:x:2345:\nstaff:x:50:app\n",
        java.nio.file.StandardOpenOption.APPEND);
    Path appHome = Files.createDirectories(rootfs.resolve("home/app"));
    Files.setAttribute(appHome, "unix:uid", 1234);
    Files.setAttribute(appHome, "unix:gid", 2345);
    return rootfs;
  }

  private static String run(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script));
    assertThat(r.exitCode()).as(r.stderrText()).isZero();
    return r.stdoutText();
  }
}
