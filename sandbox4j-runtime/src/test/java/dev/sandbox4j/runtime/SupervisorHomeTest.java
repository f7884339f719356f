package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A supervisor never recreates its home or anything in it, and exits once its home is gone: a
 * deletion (a test's {@code @TempDir}, a user's {@code rm -r}) must neither fail because the
 * supervisor put an entry back nor leave a supervisor behind.
 */
class SupervisorHomeTest {

  @TempDir Path temp;
  private Path home;
  private Process supervisor;

  @BeforeAll
  static void requireEngine() {
    Prerequisites.requireLocalEngine();
  }

  @AfterEach
  void killWhatIsLeft() {
    if (supervisor != null && supervisor.isAlive()) {
      supervisor.destroyForcibly();
    }
  }

  /** What the engine does when a sandbox is created: the home, its lock file, then a supervisor. */
  private Process startSupervisor() throws IOException {
    home = TestImages.privateHome(temp);
    Files.createFile(home.resolve(Supervisor.LOCK));
    supervisor = Supervisor.spawn(home, OciRuntime.defaultCrun().orElseThrow());
    return supervisor;
  }

  private static List<String> entries(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.map(p -> p.getFileName().toString()).sorted().toList();
    }
  }

  private static void awaitExit(Process p, String what) throws InterruptedException {
    assertThat(p.waitFor(TestImages.SUPERVISOR_EXIT.toSeconds(), TimeUnit.SECONDS))
        .as(what + " (it still runs after " + TestImages.SUPERVISOR_EXIT + ")")
        .isTrue();
  }

  @Test
  void aHomeEmptiedWhileItsSupervisorStartsStaysEmpty() throws Exception {
    Process p = startSupervisor();
    try (InputStream log = Files.newInputStream(home.resolve(Supervisor.LOG_FILE))) {
      // A deleter midway, as JUnit's: every entry removed, the directory itself not yet. The JVM
      // is still starting (hundreds of ms), so the supervisor meets the home emptied.
      Trees.delete(home.resolve(Supervisor.LOCK));
      Trees.delete(home.resolve(Supervisor.LOG_FILE));
      assertThat(entries(home)).isEmpty();

      awaitExit(p, "a supervisor whose home is being deleted exits");
      String said = new String(log.readAllBytes(), StandardCharsets.UTF_8);
      assertThat(entries(home))
          .as("nothing reappears in a home being deleted; the supervisor said:%n%s", said)
          .isEmpty();
    }
  }

  @Test
  void aRunningSupervisorExitsOnceItsHomeIsDeletedAndBringsNothingBack() throws Exception {
    // A sandbox record keeps a supervisor running for as long as it is there (no linger, no exit).
    Path sandbox = Files.createDirectories(temp.resolve("home/sandboxes/aaaaaaaaaaaa"));
    Files.writeString(sandbox.resolve("state.json"), "{}");
    Process p = startSupervisor();
    try (InputStream log = Files.newInputStream(home.resolve(Supervisor.LOG_FILE))) {
      long end = System.nanoTime() + TestImages.SUPERVISOR_EXIT.toNanos();
      while (!Supervisor.isRunning(home) && p.isAlive() && System.nanoTime() < end) {
        Thread.sleep(50);
      }
      assertThat(Supervisor.isRunning(home)).as("the supervisor took its home's lock").isTrue();
      // once its port proxy listens it has been through a whole step of its loop
      StringBuilder said = new StringBuilder();
      while (!said.toString().contains("port proxy listens") && System.nanoTime() < end) {
        said.append(new String(log.readNBytes(log.available()), StandardCharsets.UTF_8));
        Thread.sleep(50);
      }
      assertThat(said.toString()).contains("started for " + home).contains("port proxy listens");

      Trees.delete(home);

      awaitExit(p, "a supervisor exits once its home is deleted");
      said.append(new String(log.readAllBytes(), StandardCharsets.UTF_8));
      assertThat(said.toString())
          .as("it exits because its home went, not because it ran out of sandboxes")
          .containsPattern("exits: its (home|lock file) .* (was deleted|going)");
      assertThat(home).as("the home stays deleted").doesNotExist();
    }
  }

  @Test
  void stoppingAHomesSupervisorWaitsForItToExit() throws Exception {
    Path sandbox = Files.createDirectories(temp.resolve("home/sandboxes/aaaaaaaaaaaa"));
    Files.writeString(sandbox.resolve("state.json"), "{}");
    Process p = startSupervisor();
    long end = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (!Supervisor.isRunning(home) && System.nanoTime() < end) {
      Thread.sleep(50);
    }
    assertThat(TestImages.supervisors(home)).extracting(ProcessHandle::pid).contains(p.pid());

    TestImages.stopSupervisors(home);

    assertThat(p.isAlive()).as("stopSupervisors returns once the supervisor has exited").isFalse();
    Trees.delete(home);
    assertThat(temp.resolve("home")).doesNotExist();
  }

  @Test
  void aSupervisorWhoseJarsWereDeletedIsReplacedAtTheNextEngineUse() throws Exception {
    // What an installed version leaves running after `mvn clean` or an upgrade: a supervisor from
    // a jar that no longer exists. Here that jar holds this build's runtime classes.
    Path sandbox = Files.createDirectories(temp.resolve("home/sandboxes/aaaaaaaaaaaa"));
    Files.writeString(sandbox.resolve("state.json"), "{}");
    home = TestImages.privateHome(temp);
    Files.createFile(home.resolve(Supervisor.LOCK));
    Path classes =
        Path.of(Supervisor.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    Path jar = temp.resolve("old/sandbox4j-runtime-old.jar");
    jarOf(classes, jar);
    String oldClassPath =
        Supervisor.classPath(List.of()).replace(classes.toString(), jar.toString());
    Path crun = OciRuntime.defaultCrun().orElseThrow();
    supervisor =
        Supervisor.spawnJava(
            home,
            oldClassPath,
            Supervisor.class.getName(),
            List.of(home.toString(), crun.toString()));
    long end = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (!(Supervisor.isRunning(home) && Files.exists(home.resolve("supervisor.code")))
        && System.nanoTime() < end) {
      Thread.sleep(50);
    }
    assertThat(Files.readString(home.resolve("supervisor.code")))
        .startsWith(supervisor.pid() + "\n")
        .contains(jar.toString());
    LocalSandbox sandboxes = LocalSandbox.builder().home(home).build();

    Supervisor.replaceIfItsCodeIsGone(sandboxes.engine());
    assertThat(supervisor.isAlive()).as("its jars exist: left alone").isTrue();

    Files.delete(jar);
    Supervisor.replaceIfItsCodeIsGone(sandboxes.engine()); // what ensureRunning does, unthrottled

    awaitExit(supervisor, "a supervisor whose jars are gone is stopped");
    end = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    List<Long> now = List.of();
    while (System.nanoTime() < end) {
      now = TestImages.supervisors(home).stream().map(ProcessHandle::pid).toList();
      if (now.size() == 1
          && Files.readString(home.resolve("supervisor.code")).startsWith(now.getFirst() + "\n")) {
        break; // it took the lock and wrote what it runs from
      }
      Thread.sleep(50);
    }
    assertThat(now).as("a supervisor from this process's code took over").hasSize(1);
    assertThat(Files.readString(home.resolve("supervisor.code")))
        .startsWith(now.getFirst() + "\n")
        .doesNotContain(jar.toString());
    TestImages.stopSupervisors(home);
  }

  /** A jar of the class files under {@code classes}. */
  private static void jarOf(Path classes, Path jar) throws IOException {
    Files.createDirectories(jar.getParent());
    try (var out = new java.util.jar.JarOutputStream(Files.newOutputStream(jar));
        Stream<Path> files = Files.walk(classes)) {
      for (Path f : files.filter(Files::isRegularFile).toList()) {
        out.putNextEntry(new java.util.jar.JarEntry(classes.relativize(f).toString()));
        Files.copy(f, out);
        out.closeEntry();
      }
    }
  }
}
