package dev.sandbox4j.workspace.spi;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The kill script on this machine's own processes: which processes a marker finds, and that the
 * tree goes with them.
 */
class MarkedTreesTest {
  private static final String PREFIX = "SANDBOX4J_TEST_COMMAND=";

  private final List<Process> started = new ArrayList<>();
  private String id;

  @BeforeEach
  void requireProc() {
    Prerequisites.require(Files.isDirectory(Path.of("/proc/self")), "Linux's /proc");
    id = UUID.randomUUID().toString().replace("-", "");
  }

  @AfterEach
  void killWhatIsLeft() {
    started.forEach(p -> p.descendants().forEach(ProcessHandle::destroyForcibly));
    started.forEach(Process::destroyForcibly);
  }

  /**
   * A root whose marker is an argument only (as Kubernetes' command wrapper before it exports it),
   * with a child and a daemon that left it (setsid, its parent gone) which carry the marker in
   * their environment.
   */
  private Process markedByItsArgument() throws Exception {
    ProcessBuilder pb =
        new ProcessBuilder(
            "/bin/sh",
            "-c",
            "export \"$1\"; sleep 301 & (setsid sleep 302 &); echo up; while :; do wait; sleep 0.1; done",
            "sandbox4j-exec",
            PREFIX + id);
    pb.redirectErrorStream(true);
    Process root = pb.start();
    started.add(root);
    assertThat(new String(root.getInputStream().readNBytes(3))).isEqualTo("up\n");
    return root;
  }

  private int kill(MarkedTrees.MarkerIn where) throws Exception {
    Process kill =
        new ProcessBuilder("/bin/sh", "-c", MarkedTrees.killScript(where, PREFIX), "kill-tree", id)
            .redirectErrorStream(true)
            .start();
    assertThat(kill.waitFor(60, TimeUnit.SECONDS)).isTrue();
    return kill.exitValue();
  }

  private List<String> sleepers() {
    return ProcessHandle.allProcesses()
        .filter(ProcessHandle::isAlive)
        .filter(
            p ->
                p.info().commandLine().orElse("").matches(".*sleep 30[12]$")
                    && environOf(p).contains(PREFIX + id))
        .map(p -> p.info().commandLine().orElse(""))
        .toList();
  }

  private static String environOf(ProcessHandle p) {
    try {
      return new String(Files.readAllBytes(Path.of("/proc", p.pid() + "", "environ")));
    } catch (Exception gone) {
      return "";
    }
  }

  @Test
  void cmdlineOrEnvironFindsARootMarkedByItsArgumentItsChildrenAndItsDaemons() throws Exception {
    Process root = markedByItsArgument();
    assertThat(sleepers()).hasSize(2);
    assertThat(kill(MarkedTrees.MarkerIn.CMDLINE_OR_ENVIRON)).isZero();
    assertThat(root.waitFor(10, TimeUnit.SECONDS)).as("the root is killed").isTrue();
    assertThat(sleepers()).as("its child and its daemon are killed").isEmpty();
  }

  @Test
  void environAloneMissesTheRootThatOnlyExportsItsMarker() throws Exception {
    Process root = markedByItsArgument();
    assertThat(kill(MarkedTrees.MarkerIn.ENVIRON)).isZero();
    // the children carry the marker and go; the root's own environment never had it, so it lives
    // on: what a kill before its children exist would find is nothing at all
    assertThat(root.isAlive()).isTrue();
    assertThat(sleepers()).isEmpty();
  }
}
