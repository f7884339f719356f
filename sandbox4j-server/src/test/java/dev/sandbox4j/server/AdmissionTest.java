package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Admission control: one API key cannot ask the host for more than the operator allows one sandbox
 * to have (by default: what the host has, less headroom), whatever path the size comes by.
 */
class AdmissionTest {

  private static final long GIB = 1L << 30;

  @TempDir Path data;

  /** What the report of issue 13 did: 1 TiB, 4,194,304 pids and 8 CPUs on a small host. */
  @Test
  void theDefaultCeilingsRefuseMoreThanTheHostHas() throws Exception {
    try (TestServer s = new TestServer(data)) {
      SandboxCeilings host = SandboxCeilings.ofHost(s.engine.home());
      String key = s.key("greedy");
      TestServer.Answer memory =
          s.call(key, "POST", "/v1/sandboxes", "{\"memoryBytes\": " + (1L << 40) + "}");
      assertRefused(memory, "memoryBytes", host.memoryBytes());
      TestServer.Answer pids = s.call(key, "POST", "/v1/sandboxes", "{\"pids\": 4194304}");
      assertRefused(pids, "pids", host.pids());
      if (host.diskBytes() < (16L << 40)) { // a tenant's 16 TiB disk would fill the host
        TestServer.Answer disk =
            s.call(key, "POST", "/v1/sandboxes", "{\"diskBytes\": " + (16L << 40) + "}");
        assertRefused(disk, "diskBytes", host.diskBytes());
      }
      TestServer.Answer inodes =
          s.call(key, "POST", "/v1/sandboxes", "{\"diskInodes\": " + (1L << 31) + "}");
      assertRefused(inodes, "diskInodes", host.diskInodes());
      if (host.cpus() < 8) {
        TestServer.Answer cpus = s.call(key, "POST", "/v1/sandboxes", "{\"cpus\": 8}");
        assertRefused(cpus, "cpus", host.cpus());
      }
      assertThat(s.call(key, "GET", "/v1/sandboxes", null).json().get("items")).isEmpty();
    }
  }

  @Test
  void theHostDefaultsLeaveTheHostHeadroom() throws Exception {
    SandboxCeilings host = SandboxCeilings.ofHost(data);
    long fs = Files.getFileStore(data).getTotalSpace();
    assertThat(host.diskBytes()).isLessThanOrEqualTo(Math.max(GIB, fs / 4));
    assertThat(host.diskInodes()).isEqualTo(1_000_000);
    assertThat(host.cpus()).isBetween(1, Runtime.getRuntime().availableProcessors());
    Path meminfo = Path.of("/proc/meminfo");
    if (Files.exists(meminfo)) {
      long total =
          Long.parseLong(
                  Files.readAllLines(meminfo).stream()
                      .filter(l -> l.startsWith("MemTotal:"))
                      .findFirst()
                      .orElseThrow()
                      .replaceAll("[^0-9]", ""))
              * 1024;
      assertThat(host.memoryBytes()).isLessThan(total);
      long pidMax =
          Long.parseLong(Files.readAllLines(Path.of("/proc/sys/kernel/pid_max")).getFirst().trim());
      assertThat((long) host.pids()).isLessThanOrEqualTo(Math.max(16, pidMax / 4));
      // and big enough for the engine's default: a request that omits pids is not capped
      assertThat(host.pids()).isGreaterThanOrEqualTo(Math.min(4096, (int) (pidMax / 4)));
    }
  }

  @Test
  void operatorCeilingsAreEnforcedAndNamed() throws Exception {
    try (TestServer s =
        new TestServer(
            data,
            b ->
                b.maxCpusPerSandbox(1)
                    .maxMemoryPerSandbox(GIB)
                    .maxPidsPerSandbox(512)
                    .maxDiskPerSandbox(GIB)
                    .maxDiskInodesPerSandbox(100_000))) {
      String key = s.key("bounded");
      assertRefused(s.call(key, "POST", "/v1/sandboxes", "{\"cpus\": 2}"), "cpus", 1);
      assertRefused(
          s.call(key, "POST", "/v1/sandboxes", "{\"memoryBytes\": " + (GIB + 1) + "}"),
          "memoryBytes",
          GIB);
      assertRefused(s.call(key, "POST", "/v1/sandboxes", "{\"pids\": 513}"), "pids", 512);
      assertRefused(
          s.call(key, "POST", "/v1/sandboxes", "{\"diskBytes\": " + (GIB + 1) + "}"),
          "diskBytes",
          GIB);
      assertRefused(
          s.call(key, "POST", "/v1/sandboxes", "{\"diskInodes\": 100001}"), "diskInodes", 100_000);
      assertThat(s.call(key, "GET", "/v1/sandboxes", null).json().get("items")).isEmpty();
    }
  }

  @Test
  void theBuilderRefusesSillyCeilings() {
    assertThatThrownBy(() -> SandboxServer.builder().maxCpusPerSandbox(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxCpusPerSandbox");
    assertThatThrownBy(() -> SandboxServer.builder().maxMemoryPerSandbox(1 << 20))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxMemoryPerSandbox");
    assertThatThrownBy(() -> SandboxServer.builder().maxPidsPerSandbox(15))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxPidsPerSandbox");
    assertThatThrownBy(() -> SandboxServer.builder().maxDiskPerSandbox(1 << 20))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxDiskPerSandbox");
    assertThatThrownBy(() -> SandboxServer.builder().maxDiskInodesPerSandbox(1023))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxDiskInodesPerSandbox");
  }

  /**
   * A disk at the ceiling is accepted; one that omits its size gets the engine's default (10 GiB,
   * 1,000,000 inodes) capped at the ceiling, for real: writing past it fails inside the sandbox.
   */
  @Test
  void anOmittedDiskIsCappedAtTheCeiling() throws Exception {
    long ceiling = 256L << 20;
    try (TestServer s =
        new TestServer(data, b -> b.maxDiskPerSandbox(ceiling).maxDiskInodesPerSandbox(4096))) {
      String key = s.key("disks");
      assertRefused(
          s.call(key, "POST", "/v1/sandboxes", "{\"diskBytes\": " + (ceiling + 1) + "}"),
          "diskBytes",
          ceiling);
      assertThat(s.call(key, "GET", "/v1/sandboxes", null).json().get("items")).isEmpty();
      TestServer.requireLocalEngine();
      s.create(key, "{\"diskBytes\": " + ceiling + ", \"diskInodes\": 4096}"); // at: accepted
      String id = s.create(key, "{}");
      // 320 MiB: fits the default 10 GiB, not the 256 MiB ceiling
      String bytes =
          TestServer.stdout(
              s.exec(
                  key,
                  id,
                  "{\"shell\": \"head -c 335544320 /dev/zero > /fill 2>/dev/null"
                      + " && echo wrote || echo full\"}"),
              "stdout");
      assertThat(bytes).isEqualTo("full\n");
      s.exec(key, id, "{\"shell\": \"rm -f /fill\"}");
      // 5000 files: fit the default 1,000,000 inodes, not the 4096 ceiling
      String files =
          TestServer.stdout(
              s.exec(
                  key,
                  id,
                  "{\"shell\": \"mkdir /many && cd /many && seq 5000 | xargs touch 2>/dev/null"
                      + " && echo wrote || echo full\"}"),
              "stdout");
      assertThat(files).isEqualTo("full\n");
    }
  }

  /**
   * A request that omits a size gets the engine's default capped at the ceiling, and a size that
   * comes from a snapshot or a fork's parent, saved when the ceilings were higher, is held to the
   * ceilings of now.
   */
  @Test
  void omittedSizesAreCappedAndCopiedSizesAreCheckedToo() throws Exception {
    TestServer.requireLocalEngine();
    try (TestServer s = new TestServer(data, b -> b.maxMemoryPerSandbox(2 * GIB))) {
      String key = s.key("copies");
      String id = s.create(key, "{\"memoryBytes\": " + 2 * GIB + ", \"pids\": 1024}");
      assertThat(
              s.call(key, "POST", "/v1/sandboxes/" + id + "/snapshots", "{\"name\": \"big\"}")
                  .status())
          .isEqualTo(201);
      s.track(id);
      // the operator lowers the ceilings: the same data directory and engine
      s.restart(b -> b.maxMemoryPerSandbox(GIB).maxPidsPerSandbox(256));
      TestServer.Answer fromSnapshot =
          s.call(key, "POST", "/v1/sandboxes", "{\"snapshot\": \"big\"}");
      assertThat(fromSnapshot.status()).as(fromSnapshot.text()).isEqualTo(400);
      assertThat(fromSnapshot.error().get("field").asText()).isEqualTo("snapshot");
      assertThat(fromSnapshot.error().get("message").asText())
          .contains("memoryBytes", Long.toString(GIB));
      TestServer.Answer fork =
          s.call(key, "POST", "/v1/sandboxes/" + id + "/fork", "{\"filesOnly\": true}");
      assertThat(fork.status()).as(fork.text()).isEqualTo(400);
      assertThat(fork.error().get("message").asText()).contains("memoryBytes", "ceiling");

      String small = s.create(key, "{}");
      JsonNode view = s.call(key, "GET", "/v1/sandboxes/" + small, null).json();
      assertThat(view.get("memoryBytes").asLong()).isEqualTo(GIB); // 4 GiB by default, capped
      assertThat(view.get("pids").asInt()).isLessThanOrEqualTo(256);
      assertThat(s.call(key, "GET", "/v1/sandboxes", null).json().get("items")).hasSize(2);
      s.call(key, "DELETE", "/v1/snapshots/big", null);
    }
  }

  /**
   * A disk quota that comes from a snapshot or a fork's parent, saved when the disk ceiling was
   * higher, is held to the ceiling of now (the engine shows it in SandboxInfo/SnapshotInfo); a
   * request that sets its own disk under the ceiling is not refused for the snapshot's.
   */
  @Test
  void copiedDiskSizesAreHeldToTheDiskCeilingOfNow() throws Exception {
    TestServer.requireLocalEngine();
    long big = 512L << 20;
    long ceiling = 256L << 20;
    try (TestServer s = new TestServer(data, b -> b.maxDiskPerSandbox(big))) {
      String key = s.key("disks");
      String id = s.create(key, "{\"diskBytes\": " + big + ", \"diskInodes\": 4096}");
      assertThat(
              s.call(key, "POST", "/v1/sandboxes/" + id + "/snapshots", "{\"name\": \"wide\"}")
                  .status())
          .isEqualTo(201);
      s.track(id);
      s.restart(b -> b.maxDiskPerSandbox(ceiling));
      TestServer.Answer fromSnapshot =
          s.call(key, "POST", "/v1/sandboxes", "{\"snapshot\": \"wide\"}");
      assertThat(fromSnapshot.status()).as(fromSnapshot.text()).isEqualTo(400);
      assertThat(fromSnapshot.error().get("field").asText()).isEqualTo("snapshot");
      assertThat(fromSnapshot.error().get("message").asText())
          .contains("diskBytes", Long.toString(big), Long.toString(ceiling));
      TestServer.Answer fork =
          s.call(key, "POST", "/v1/sandboxes/" + id + "/fork", "{\"filesOnly\": true}");
      assertThat(fork.status()).as(fork.text()).isEqualTo(400);
      assertThat(fork.error().get("message").asText())
          .contains("diskBytes", Long.toString(big), "ceiling");
      TestServer.Answer live = s.call(key, "POST", "/v1/sandboxes/" + id + "/fork", "{}");
      assertThat(live.status()).as(live.text()).isEqualTo(400);

      s.create(key, "{\"snapshot\": \"wide\", \"diskBytes\": " + ceiling + "}"); // its own
      assertThat(s.call(key, "GET", "/v1/sandboxes", null).json().get("items")).hasSize(2);
      s.call(key, "DELETE", "/v1/snapshots/wide", null);
    }
  }

  private static void assertRefused(TestServer.Answer a, String field, long ceiling)
      throws Exception {
    assertThat(a.status()).as(a.text()).isEqualTo(400);
    assertThat(a.error().get("code").asText()).isEqualTo("invalid_request");
    assertThat(a.error().get("field").asText()).isEqualTo(field);
    assertThat(a.error().get("message").asText())
        .contains(field, "ceiling", Long.toString(ceiling));
  }
}
