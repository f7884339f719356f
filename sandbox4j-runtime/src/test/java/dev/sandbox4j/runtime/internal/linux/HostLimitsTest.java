package dev.sandbox4j.runtime.internal.linux;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** What all sandboxes may use together, and a sandbox's default processes, derived from a host. */
class HostLimitsTest {
  private static final long GIB = 1L << 30;

  @Test
  void sandboxesTogetherLeaveTheHostAReserveOfMemoryAndHalfItsProcessTable() {
    HostLimits.Sandboxes here = HostLimits.sandboxes(24 * GIB, 32_768, 192_725);
    assertThat(here.pids()).as("half of min(pid_max, threads-max)").isEqualTo(16_384);
    assertThat(here.memoryBytes())
        .as("a tenth kept for the host")
        .isEqualTo(24 * GIB - 24 * GIB / 10);
    assertThat(here.cpuShares()).as("below a default peer's 1024").isLessThan(1024);
    assertThat(HostLimits.sandboxes(24 * GIB, 4_194_304, 20_000).pids())
        .as("threads-max, when smaller, bounds it: every thread takes a pid")
        .isEqualTo(10_000);
    assertThat(HostLimits.sandboxes(2 * GIB, 32_768, 32_768).memoryBytes())
        .as("a small host keeps at least a quarter of its memory, up to 1 GiB")
        .isEqualTo(2 * GIB - 2 * GIB / 4);
    assertThat(HostLimits.sandboxes(64 * GIB, 32_768, 32_768).memoryBytes())
        .isEqualTo(64 * GIB - 64 * GIB / 10);
  }

  @Test
  void aSandboxGetsAnEighthOfTheSandboxesProcessesByDefault() {
    assertThat(HostLimits.defaultSandboxPids(16_384)).isEqualTo(2048);
    assertThat(HostLimits.defaultSandboxPids(1_000_000)).isEqualTo(HostLimits.MAX_DEFAULT_PIDS);
    assertThat(HostLimits.defaultSandboxPids(100)).isEqualTo(HostLimits.MIN_DEFAULT_PIDS);
  }

  @Test
  void thisHostsLimitsAreReadFromItsSysctls() throws IOException {
    // sysctl files answer a read past offset 0 with end of file: a reader that reads one byte
    // first sees "3" of 32768
    long pidMax =
        Long.parseLong(Files.readAllLines(Path.of("/proc/sys/kernel/pid_max")).getFirst());
    long threadsMax =
        Long.parseLong(Files.readAllLines(Path.of("/proc/sys/kernel/threads-max")).getFirst());
    HostLimits.Sandboxes host = HostLimits.sandboxes();
    assertThat(host.pids())
        .as("half of this host's min(pid_max, threads-max)")
        .isEqualTo(Math.min(pidMax, threadsMax) / 2);
    assertThat(host.memoryBytes()).isLessThan(HostLimits.memTotal()).isGreaterThan(0);
  }
}
