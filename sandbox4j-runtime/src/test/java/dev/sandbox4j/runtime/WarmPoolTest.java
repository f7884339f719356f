package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A warm pool ({@link LocalSandbox.Builder#warmPool}) against real sandboxes: what a claim hands
 * out is a new sandbox in every way a user can see, members are no one's until claimed (not listed,
 * not collected, not attachable), they go with {@code close}, with a changed image, and with a JVM
 * that died holding them ({@code gc}).
 */
class WarmPoolTest {
  @TempDir static Path temp;
  private static Path home;
  private static LocalSandbox plain;

  @BeforeAll
  static void home() throws Exception {
    Prerequisites.requireLocalEngine();
    home = TestImages.privateHome(temp);
    TestImages.seedDefault(home);
    plain = LocalSandbox.builder().home(home).progress(line -> {}).build();
  }

  @AfterAll
  static void cleanUp() throws IOException {
    TestImages.destroyAllAndDelete(plain, home);
  }

  @Test
  void aClaimedSandboxIsANewOneAndThePoolRefills() throws Exception {
    Set<String> handedOut = new TreeSet<>();
    try (LocalSandbox pool =
        LocalSandbox.builder()
            .home(home)
            .warmPool(2)
            .label("team", "warm")
            .workingDirectory("/home/sandbox/work")
            .sandboxTimeout(Duration.ofHours(2))
            .progress(line -> {})
            .build()) {
      awaitReady(pool, 2);
      Set<String> members = parked();
      assertThat(members).as("members, each marked parked in its directory").hasSize(2);
      assertThat(pool.list()).as("members are no one's sandboxes: not listed").isEmpty();
      assertThat(TestImages.engineOf(pool).gc())
          .as("gc leaves members alone while their pool holds them")
          .noneMatch(line -> members.stream().anyMatch(line::contains));
      assertThat(parked()).isEqualTo(members);
      String member = members.iterator().next();
      assertThatThrownBy(
              () ->
                  Workspace.of(pool.backend(new WorkspaceRef("local", member)).orElseThrow())
                      .run(Command.shell("true")))
          .as("a member cannot be attached to: its id was never handed out")
          .isInstanceOf(WorkspaceUnavailableException.class);

      Instant beforeClaim = Instant.now();
      Workspace ws = Workspace.of(pool.newBackend());
      CommandResult r =
          ws.run(
              Command.shell(
                  "pwd; id -un; ls -A | wc -l; ps -e -o comm= | grep -v -e '^ps$' -e '^sh$'"
                      // the engine's exec helper and this command's keeper (see FastExec)
                      + " -e '^grep$' -e '^sort$' -e '^sandbox4j-execd$' | sort"));
      WorkspaceRef ref = ws.open();
      handedOut.add(ref.id());
      assertThat(members).as("the first backend took a member").contains(ref.id());
      assertThat(r.stdoutText().lines().toList())
          .as("working directory, user, an empty working directory, nothing running but init")
          .containsExactly("/home/sandbox/work", "sandbox", "0", "catatonit");

      SandboxInfo info = pool.info(ref).orElseThrow();
      assertThat(info.state()).isEqualTo("running");
      assertThat(info.labels()).containsEntry("team", "warm");
      assertThat(info.created())
          .as("created when claimed, not when the pool made it")
          .isAfterOrEqualTo(beforeClaim.minusMillis(1));
      assertThat(info.timers().sandboxTimeout()).isEqualTo(Duration.ofHours(2));
      assertThat(info.timers().ends())
          .as("its lifetime counts from the claim")
          .isAfterOrEqualTo(beforeClaim.plus(Duration.ofHours(2)).minusSeconds(1));
      assertThat(pool.list()).extracting(SandboxInfo::ref).containsExactly(ref);

      awaitReady(pool, 2);
      assertThat(parked())
          .as("refilled with new members, never the claimed one")
          .hasSize(2)
          .doesNotContain(ref.id());

      // a second claim, then one with the pool empty: a plain create
      Workspace second = Workspace.of(pool.newBackend());
      second.run(Command.shell("true"));
      handedOut.add(second.open().id());
      pool.destroy(ref);
      pool.destroy(second.open());
    }
    assertThat(parked()).as("close destroys the members").isEmpty();
    assertThat(sandboxDirectories()).doesNotContainAnyElementsOf(handedOut);
  }

  @Test
  void aMemberOfAnOlderSnapshotIsNotHandedOut() throws Exception {
    Workspace source = Workspace.of(plain.newBackend());
    source.writeText("/home/sandbox/version.txt", "v1");
    plain.snapshot(source.open(), "warm-snap");
    try (LocalSandbox pool =
        LocalSandbox.builder()
            .home(home)
            .snapshot("warm-snap")
            .warmPool(1)
            .progress(line -> {})
            .build()) {
      awaitReady(pool, 1);
      Set<String> old = parked();
      source.writeText("/home/sandbox/version.txt", "v2");
      assertThat(plain.removeSnapshot("warm-snap")).isTrue();
      plain.snapshot(source.open(), "warm-snap");

      Workspace ws = Workspace.of(pool.newBackend());
      assertThat(ws.readText("/home/sandbox/version.txt"))
          .as("made from the snapshot as it is now")
          .isEqualTo("v2");
      assertThat(old)
          .as("the member of the old layers was discarded")
          .doesNotContain(ws.open().id());
      assertThat(sandboxDirectories()).doesNotContainAnyElementsOf(old);
      pool.destroy(ws.open());
    } finally {
      plain.destroy(source.open());
      plain.removeSnapshot("warm-snap");
    }
  }

  @Test
  void membersOfAJvmThatDiedAreRemovedByGc() throws Exception {
    List<String> command = new ArrayList<>();
    command.add(ProcessHandle.current().info().command().orElseThrow());
    command.addAll(
        List.of(
            "--enable-native-access=ALL-UNNAMED",
            "-cp",
            System.getProperty("java.class.path"),
            Child.class.getName(),
            home.toString(),
            "2"));
    Process child = new ProcessBuilder(command).redirectErrorStream(true).start();
    Set<String> members;
    try (BufferedReader out =
        new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
      String line;
      List<String> seen = new ArrayList<>();
      while ((line = out.readLine()) != null && !line.equals("READY")) {
        seen.add(line);
      }
      assertThat(line).as("the child filled its pool; it said: %s", seen).isEqualTo("READY");
      members = parked();
      assertThat(members).hasSize(2);
      child.destroyForcibly(); // SIGKILL: no shutdown hook runs
      child.waitFor();
    }
    List<String> removed = TestImages.engineOf(plain).gc();
    for (String id : members) {
      assertThat(removed).contains("interrupted sandbox local:" + id);
    }
    assertThat(sandboxDirectories()).doesNotContainAnyElementsOf(members);
  }

  @Test
  void gvisorSandboxesComeFromAPoolToo() throws Exception {
    Prerequisites.requireGvisor();
    try (LocalSandbox pool =
        LocalSandbox.builder()
            .home(home)
            .isolation(Isolation.GVISOR)
            .warmPool(1)
            .progress(line -> {})
            .build()) {
      awaitReady(pool, 1);
      Set<String> members = parked();
      Workspace ws = Workspace.of(pool.newBackend());
      assertThat(ws.run(Command.shell("uname -r")).stdoutText().strip())
          .as("a claimed gVisor member runs on gVisor's kernel")
          .isEqualTo(GvisorHostileSandboxTest.GVISOR_RELEASE);
      assertThat(members).contains(ws.open().id());
      assertThat(pool.info(ws.open()).orElseThrow().isolation()).isEqualTo("gvisor");
      pool.destroy(ws.open());
    }
    assertThat(parked()).isEmpty();
  }

  /** The JVM {@link #membersOfAJvmThatDiedAreRemovedByGc} kills: HOME SIZE. */
  static final class Child {
    public static void main(String[] args) throws Exception {
      LocalSandbox pool =
          LocalSandbox.builder()
              .home(Path.of(args[0]))
              .warmPool(Integer.parseInt(args[1]))
              .progress(line -> {})
              .build();
      awaitReady(pool, Integer.parseInt(args[1]));
      System.out.println("READY");
      System.out.flush();
      Thread.sleep(Duration.ofMinutes(10));
    }
  }

  private static void awaitReady(LocalSandbox pool, int size) {
    TestImages.awaitWarm(pool, size);
  }

  /** The ids of the home's parked sandboxes (warm pools' members). */
  private static Set<String> parked() throws IOException {
    return TestImages.parked(home);
  }

  private static Set<String> sandboxDirectories() throws IOException {
    Path sandboxes = home.resolve("sandboxes");
    Set<String> ids = new TreeSet<>();
    if (!Files.isDirectory(sandboxes)) {
      return ids;
    }
    try (Stream<Path> dirs = Files.list(sandboxes)) {
      dirs.map(d -> d.getFileName().toString())
          .filter(name -> !name.startsWith("."))
          .forEach(ids::add);
    }
    return ids;
  }
}
