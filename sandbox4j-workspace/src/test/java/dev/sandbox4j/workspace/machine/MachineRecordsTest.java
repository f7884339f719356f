package dev.sandbox4j.workspace.machine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class MachineRecordsTest {

  private static final WorkspaceRef REF = new WorkspaceRef("local", "abc");

  @Test
  void sandboxInfoFromABuilderLeavesWhatIsNotSetUnknown() {
    SandboxInfo info = SandboxInfo.builder(REF, "running").build();

    assertThat(info.ref()).isEqualTo(REF);
    assertThat(info.state()).isEqualTo("running");
    assertThat(info.image()).isNull();
    assertThat(info.created()).isNull();
    assertThat(info.labels()).isEmpty();
    assertThat(info.networks()).isEmpty();
    assertThat(info.diskBytes()).isZero();
    assertThat(info.timers()).isNull();
    assertThat(info.workingDirectory()).isNull();
    assertThat(info.egress()).isNull();
    assertThat(info.portUrl()).isNull();
    assertThat(info.isolation()).isNull();
  }

  @Test
  void sandboxInfoRoundTripsThroughToBuilderAndCopiesItsCollections() {
    Map<String, String> labels = new HashMap<>(Map.of("team", "a"));
    List<String> networks = new ArrayList<>(List.of("net1"));
    SandboxInfo info =
        SandboxInfo.builder(REF, "suspended")
            .image("default")
            .created(Instant.parse("2026-01-01T00:00:00Z"))
            .labels(labels)
            .limits(2, 1L << 30, 512)
            .disk(10L << 30, 1 << 20)
            .timers(new SandboxTimers(null, Duration.ofHours(1), null, null, null))
            .workingDirectory("/home/sandbox")
            .networks(networks)
            .egress("all")
            .portUrl("http://{port}-abc.localhost:7780/")
            .isolation("gvisor")
            .build();
    labels.put("team", "b");
    networks.add("net2");

    assertThat(info.labels()).containsExactly(Map.entry("team", "a"));
    assertThat(info.networks()).containsExactly("net1");
    assertThat(info.toBuilder().build()).isEqualTo(info);
    assertThat(info.toBuilder().build().isolation()).isEqualTo("gvisor");
    assertThat(info.toBuilder().state("running").build().state()).isEqualTo("running");
  }

  @Test
  void sandboxInfoNeedsARefAndAState() {
    assertThatThrownBy(() -> SandboxInfo.builder(null, "running"))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("ref");
    assertThatThrownBy(() -> SandboxInfo.builder(REF, null))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("state");
  }

  @Test
  void timersTurnAbsentDurationsIntoZeroAndRefuseNegativeOnes() {
    SandboxTimers t = new SandboxTimers(null, null, null, null, null);
    assertThat(t.autoSuspendTimeout()).isZero();
    assertThat(t.sandboxTimeout()).isZero();
    assertThat(t.idleTimeout()).isZero();
    assertThat(t.ends()).isNull();

    assertThatThrownBy(
            () ->
                new SandboxTimers(Duration.ofSeconds(-1), Duration.ZERO, Duration.ZERO, null, null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("negative");
  }

  @Test
  void forkResultNeverHasANullReasonOrList() {
    ForkResult copied = new ForkResult(REF, true, null, null);
    assertThat(copied.reason()).isEmpty();
    assertThat(copied.notCarried()).isEmpty();
    assertThat(new ForkResult(REF, false, "files only").notCarried()).isEmpty();
    assertThatThrownBy(() -> new ForkResult(null, false, "x"))
        .isInstanceOf(NullPointerException.class);
  }

  @Test
  void snapshotInfoNeedsAName() {
    assertThatThrownBy(() -> new SnapshotInfo(null, null, null, null, 1, 1, 1, 1, 0, 0))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("name");
  }

  @Test
  void egressRulesTakeAllowRulesOnlyInAllowlistModeAndCopyTheirLists() {
    List<String> allow = new ArrayList<>(List.of("api.example.com"));
    EgressRules rules = EgressRules.allow(allow);
    allow.add("changed.example.com");

    assertThat(rules.allow()).as("copied").containsExactly("api.example.com");
    assertThat(new EgressRules(EgressRules.Mode.ALL, null, null, false))
        .isEqualTo(EgressRules.all());
    assertThat(EgressRules.none().allow()).isEmpty();
    assertThatThrownBy(
            () -> new EgressRules(EgressRules.Mode.ALL, List.of("api.example.com"), null, false))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("takes no allow rules");
    assertThatThrownBy(() -> new EgressRules(null, null, null, false))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("mode");
  }

  @Test
  void egressHeaderHidesItsValue() {
    EgressRules.Header h =
        new EgressRules.Header("api.example.com", "Authorization", "s3cret", null);

    assertThat(h.ports()).isEmpty();
    assertThat(h.toString()).contains("api.example.com", "Authorization").doesNotContain("s3cret");
    assertThat(EgressRules.allow(List.of("api.example.com")).toString()).doesNotContain("s3cret");
    assertThatThrownBy(() -> new EgressRules.Header("api.example.com", "X", null, List.of()))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("value");
  }
}
