package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.linux.HostLimits;
import dev.sandbox4j.runtime.internal.linux.Mounts;
import dev.sandbox4j.workspace.WorkspaceException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class HostSetupTest {

  /** The state directory the engine's tests share (CI runs `sandbox4j setup` before them). */
  private static final Path HOME =
      Path.of(Optional.ofNullable(System.getenv("SANDBOX4J_HOME")).orElse("/var/lib/sandbox4j"));

  @TempDir Path temp;

  @Test
  void thisPreparedHostPassesEveryCheck() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require(dev.sandbox4j.runtime.internal.util.SandboxHome.isRoot(), "root");

    List<HostCheck> checks = HostSetup.check(HOME);

    assertThat(checks)
        .extracting(HostCheck::name)
        .contains(
            "linux",
            "root",
            "cgroup v2 (cgroup.kill)",
            "overlayfs",
            "user namespaces",
            "crun",
            "gVisor (runsc)",
            "mmdebstrap",
            "hugetlb cgroup",
            "cgroup favordynmods",
            "open files limit",
            "state directory",
            "disk quotas",
            "default image");
    for (HostCheck check : checks) {
      assertThat(check.detail()).as(check.name()).isNotBlank();
      if (check.ok()) {
        assertThat(check.fix()).as(check.name()).isEmpty();
      } else {
        assertThat(check.fix()).as(check.name()).isNotBlank();
      }
      Prerequisites.require(
          check.ok(),
          "host check '"
              + check.name()
              + "': "
              + check.detail()
              + " (fix: "
              + check.fix()
              + "; `sandbox4j setup` does it)");
    }
  }

  @Test
  void theOpenFilesLimitIsReportedAndNeverMissing() {
    HostCheck limit = find(HostSetup.check(temp), "open files limit");

    assertThat(limit.ok()).isTrue();
    assertThat(limit.detail()).contains("hard RLIMIT_NOFILE is " + HostLimits.openFilesHardLimit());
  }

  @Test
  void userNamespacesShowTheWholeSysctlValue() throws Exception {
    Path sysctl = Path.of("/proc/sys/user/max_user_namespaces");
    Prerequisites.require(Files.exists(sysctl), sysctl + " (Linux)");
    String value = Files.readAllLines(sysctl).getFirst().strip();

    HostCheck userns = find(HostSetup.check(temp), "user namespaces");

    assertThat(userns.detail()).endsWith("= " + value);
  }

  @Test
  void aHomeWithACommaIsNotOkAndSaysWhy() throws Exception {
    Path home = Files.createDirectories(temp.resolve("state,dir"));

    HostCheck state = find(HostSetup.check(home), "state directory");

    assertThat(state.ok()).isFalse();
    assertThat(state.detail()).contains(home.toString()).contains("a comma").contains("overlayfs");
    assertThat(state.fix()).contains("SANDBOX4J_HOME");
  }

  @Test
  void colonsBackslashesAndWhitespaceAreRefusedToo() {
    for (String name : List.of("a:b", "a\\b", "a b", "a\tb")) {
      HostCheck state = HostSetup.stateDirectory(temp.resolve(name));
      assertThat(state.ok()).as(name).isFalse();
      assertThat(state.detail()).as(name).contains("overlayfs");
    }
  }

  @Test
  void aFreshHomeIsOkAndTheImageIsNotBuiltYet() {
    Path home = temp.resolve("fresh").resolve("home");
    List<HostCheck> checks = HostSetup.check(home);

    HostCheck state = find(checks, "state directory");
    assertThat(state.ok()).isTrue();
    assertThat(state.detail()).contains("created on first use");
    assertThat(home).doesNotExist();

    HostCheck image = find(checks, "default image");
    assertThat(image.ok()).as("informational").isTrue();
    assertThat(image.detail()).startsWith("not built yet").contains("sandbox4j image build");
  }

  @Test
  void aFileWhereTheHomeShouldBeIsNotOk() throws Exception {
    Path file = Files.writeString(temp.resolve("file"), "x");

    HostCheck state = HostSetup.stateDirectory(file);

    assertThat(state.ok()).isFalse();
    assertThat(state.detail()).contains("not a directory");
  }

  @Test
  void setupRefusesClearlyWhenNotLinuxOrNotRoot() {
    assertThatThrownBy(() -> HostSetup.requireLinuxAndRoot("Mac OS X", true))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("needs Linux")
        .hasMessageContaining("Mac OS X");
    assertThatThrownBy(() -> HostSetup.requireLinuxAndRoot("Linux", false))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("needs root");
    HostSetup.requireLinuxAndRoot("Linux", true);
  }

  @Test
  void favordynmodsIsAddedToTheCgroup2OptionsItAlreadyHas() {
    Path unified = Path.of("/sys/fs/cgroup/unified");
    List<Mounts.Mount> without =
        List.of(
            new Mounts.Mount(Path.of("/sys/fs/cgroup/memory"), "cgroup", List.of("rw", "memory")),
            new Mounts.Mount(unified, "cgroup2", List.of("rw", "nsdelegate")));

    HostCheck missing = Mounts.favorDynmods(without, "6.18.44");

    assertThat(missing.ok()).isFalse();
    assertThat(missing.detail()).contains("RCU grace period");
    // the kernel clears a flag a remount does not repeat: nsdelegate must stay
    assertThat(missing.fix())
        .isEqualTo("mount -o remount,rw,nsdelegate,favordynmods /sys/fs/cgroup/unified");

    List<Mounts.Mount> with =
        List.of(new Mounts.Mount(unified, "cgroup2", List.of("rw", "favordynmods")));
    assertThat(Mounts.favorDynmods(with, "6.18.44").ok()).isTrue();
    HostCheck old = Mounts.favorDynmods(without, "5.15.0");
    assertThat(old.ok()).as("informational before 6.0").isTrue();
    assertThat(old.detail()).contains("6.0");
  }

  @Test
  void kernelVersionsParse() {
    assertThat(Mounts.kernelVersion("6.18.0-rc1")).containsExactly(6, 18);
    assertThat(Mounts.kernelVersion("5.14")).containsExactly(5, 14);
    assertThat(Mounts.kernelVersion("weird")).containsExactly(0, 0);
  }

  @Test
  void aHostCheckThatIsOkHasNoFix() {
    assertThatThrownBy(() -> new HostCheck("x", true, "fine", "do something"))
        .isInstanceOf(IllegalArgumentException.class);
  }

  private static HostCheck find(List<HostCheck> checks, String name) {
    return checks.stream().filter(c -> c.name().equals(name)).findFirst().orElseThrow();
  }
}
