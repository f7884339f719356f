package dev.sandbox4j.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.GenericKubernetesResourceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicy;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Sandbox mode against the fake cluster with the agent-sandbox CRDs served and the fake controller
 * ({@link FakeAgentSandboxController}) reconciling: discovery picks the mode, a Sandbox becomes
 * Ready, suspend deletes its pod and resume makes a new one, and a SandboxClaim adopts a warm
 * pool's Sandbox.
 */
class KubernetesAgentSandboxTest {
  private static FakeCluster cluster;
  @TempDir static Path node;

  @BeforeAll
  static void start() {
    cluster = new FakeCluster(node, true);
  }

  @AfterAll
  static void stop() {
    cluster.close();
  }

  private static KubernetesSandbox.Builder builder(String ns) {
    return KubernetesSandbox.builder()
        .client(cluster.client)
        .namespace(ns)
        .readyTimeout(Duration.ofSeconds(20));
  }

  @Test
  void autoModeMakesASandboxWithTheIsolationOptions() {
    KubernetesSandbox provider =
        builder("auto")
            .image("registry.example/tools:1")
            .cpus(1.5)
            .memoryMiB(512)
            .runtimeClassName("gvisor")
            .label("team", "infra")
            .egressNone()
            .build();
    Workspace ws = Workspace.of(provider.newBackend());
    assertThat(ws.run(Command.shell("echo hi")).stdoutText()).isEqualTo("hi\n");
    WorkspaceRef ref = ws.ref().orElseThrow();
    String name = ref.id().substring("auto/".length());

    GenericKubernetesResource sandbox =
        cluster
            .control()
            .genericKubernetesResources(ClusterResources.SANDBOXES)
            .inNamespace("auto")
            .withName(name)
            .get();
    assertThat(sandbox).as("a Sandbox, not a bare Pod").isNotNull();
    Pod pod = cluster.control().pods().inNamespace("auto").withName(name).get();
    assertThat(pod.getMetadata().getLabels())
        .containsEntry("team", "infra")
        .containsEntry("sandbox4j.dev/workspace", name)
        .containsKey("agents.x-k8s.io/sandbox-name-hash");
    assertThat(pod.getMetadata().getOwnerReferences()).anyMatch(o -> o.getKind().equals("Sandbox"));
    assertThat(pod.getSpec().getAutomountServiceAccountToken()).isFalse();
    assertThat(pod.getSpec().getRuntimeClassName()).isEqualTo("gvisor");
    var container = pod.getSpec().getContainers().getFirst();
    assertThat(container.getImage()).isEqualTo("registry.example/tools:1");
    assertThat(container.getSecurityContext().getRunAsNonRoot()).isTrue();
    assertThat(container.getSecurityContext().getAllowPrivilegeEscalation()).isFalse();
    assertThat(container.getResources().getLimits().get("cpu").toString()).isEqualTo("1500m");
    assertThat(container.getResources().getRequests().get("memory").toString()).isEqualTo("512Mi");

    NetworkPolicy policy =
        cluster.control().network().v1().networkPolicies().inNamespace("auto").withName(name).get();
    assertThat(policy.getSpec().getPolicyTypes()).containsExactly("Egress");
    assertThat(policy.getSpec().getEgress()).isEmpty();
    assertThat(policy.getSpec().getPodSelector().getMatchLabels())
        .containsEntry("sandbox4j.dev/workspace", name);

    provider.destroy(ref);
    provider.destroy(ref); // idempotent
    assertThat(
            cluster
                .control()
                .genericKubernetesResources(ClusterResources.SANDBOXES)
                .inNamespace("auto")
                .withName(name)
                .get())
        .isNull();
    assertThat(
            cluster
                .control()
                .network()
                .v1()
                .networkPolicies()
                .inNamespace("auto")
                .withName(name)
                .get())
        .isNull();
  }

  @Test
  void suspendDeletesThePodAndResumeMakesANewOne() throws Exception {
    KubernetesSandbox provider = builder("suspend").build();
    Workspace ws = Workspace.of(provider.newBackend());
    ws.run(Command.shell("echo kept-in-memory-only > note"));
    WorkspaceRef ref = ws.ref().orElseThrow();
    String name = ref.id().substring("suspend/".length());
    String uid =
        cluster.control().pods().inNamespace("suspend").withName(name).get().getMetadata().getUid();

    provider.suspend(ref);
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (cluster.control().pods().inNamespace("suspend").withName(name).get() != null
        && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertThat(cluster.control().pods().inNamespace("suspend").withName(name).get())
        .as("the controller deleted the pod")
        .isNull();
    assertThat(
            cluster
                .control()
                .genericKubernetesResources(ClusterResources.SANDBOXES)
                .inNamespace("suspend")
                .withName(name)
                .get())
        .as("the Sandbox stays")
        .isNotNull();

    provider.resume(ref);
    Pod again = cluster.control().pods().inNamespace("suspend").withName(name).get();
    assertThat(again.getMetadata().getUid()).isNotEqualTo(uid);
    Workspace attached = Workspace.of(provider.backend(ref).orElseThrow());
    // a new pod: its emptyDir (here, the fake's new directory) starts empty: memory is not kept
    assertThat(attached.run(Command.shell("cat note 2>/dev/null || echo gone")).stdoutText())
        .isEqualTo("gone\n");
    provider.destroy(ref);
  }

  @Test
  void aClaimAdoptsAWarmPoolSandbox() throws Exception {
    String ns = "warm";
    makeWarmPool(cluster, ns, "pool");

    KubernetesSandbox provider = builder(ns).warmPool("pool").owner("claims").build();
    Workspace ws = Workspace.of(provider.newBackend());
    assertThat(ws.run(Command.shell("echo warm")).stdoutText()).isEqualTo("warm\n");
    WorkspaceRef ref = ws.ref().orElseThrow();
    String name = ref.id().substring((ns + "/").length());
    GenericKubernetesResource adopted =
        cluster
            .control()
            .genericKubernetesResources(ClusterResources.SANDBOXES)
            .inNamespace(ns)
            .withName(name)
            .get();
    assertThat(name).startsWith("pool-");
    assertThat(adopted.getMetadata().getLabels())
        .containsEntry("agents.x-k8s.io/launch-type", "warm")
        .doesNotContainKey("agents.x-k8s.io/warm-pool-sandbox");
    assertThat(adopted.getMetadata().getOwnerReferences())
        .singleElement()
        .satisfies(o -> assertThat(o.getKind()).isEqualTo("SandboxClaim"));
    assertThat(
            cluster.control().pods().inNamespace(ns).withName(name).get().getMetadata().getLabels())
        .containsEntry("sandbox4j.dev/owner", "claims");

    provider.destroy(ref);
    assertThat(
            cluster
                .control()
                .genericKubernetesResources(ClusterResources.CLAIMS)
                .inNamespace(ns)
                .list()
                .getItems())
        .isEmpty();
  }

  @Test
  void podModeCannotSuspendAndGcReapsByOwnerLabel() {
    KubernetesSandbox provider =
        builder("plain")
            .mode(KubernetesSandbox.Mode.POD)
            .owner("crashed-run")
            .egressAllowCidrs(List.of("10.1.0.0/16"))
            .build();
    Workspace ws = Workspace.of(provider.newBackend());
    ws.run(Command.shell("true"));
    WorkspaceRef ref = ws.ref().orElseThrow();
    assertThatThrownBy(() -> provider.suspend(ref))
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("pod mode");
    String name = ref.id().substring("plain/".length());
    NetworkPolicy policy =
        cluster
            .control()
            .network()
            .v1()
            .networkPolicies()
            .inNamespace("plain")
            .withName(name)
            .get();
    assertThat(policy.getSpec().getEgress().getFirst().getTo().getFirst().getIpBlock().getCidr())
        .isEqualTo("10.1.0.0/16");

    assertThat(provider.gc("someone-else")).isEmpty();
    assertThat(provider.gc("crashed-run")).containsExactly(ref);
    assertThat(cluster.control().pods().inNamespace("plain").withName(name).get()).isNull();
  }

  @Test
  void badOptionsAreRefusedByName() {
    assertThatThrownBy(() -> KubernetesSandbox.builder().namespace("Bad_NS"))
        .hasMessageContaining("namespace");
    assertThatThrownBy(() -> KubernetesSandbox.builder().egressAllowCidrs(List.of("example.com")))
        .hasMessageContaining("domain allowlists are not supported");
    assertThatThrownBy(() -> KubernetesSandbox.builder().runAsUser(0))
        .hasMessageContaining("non-root");
    assertThatThrownBy(() -> KubernetesSandbox.builder().label("sandbox4j.dev/x", "y"))
        .hasMessageContaining("reserved");
    KubernetesSandbox provider = builder("x").build();
    assertThatThrownBy(() -> provider.backend(new WorkspaceRef("k8s", "ns/Not_A_Name")))
        .hasMessageContaining("NAMESPACE/NAME or NAME");
    assertThat(provider.backend(new WorkspaceRef("k8s", "a-name")))
        .as("a name alone is in the provider's namespace")
        .isPresent();
  }

  /** A SandboxTemplate {@code agent} and a warm pool {@code pool} of one of its Sandboxes. */
  static void makeWarmPool(FakeCluster fake, String ns, String pool) {
    Map<String, Object> podTemplate =
        Map.of(
            "metadata", Map.of("labels", Map.of("app", "agent")),
            "spec",
                Map.of(
                    "containers",
                    List.of(
                        Map.of(
                            "name", "sandbox",
                            "image", "registry.example/agent:1",
                            "workingDir", "/workspace"))));
    fake.control()
        .genericKubernetesResources(FakeAgentSandboxController.TEMPLATES)
        .inNamespace(ns)
        .resource(
            new GenericKubernetesResourceBuilder()
                .withApiVersion("extensions.agents.x-k8s.io/v1beta1")
                .withKind("SandboxTemplate")
                .withNewMetadata()
                .withName("agent")
                .endMetadata()
                .addToAdditionalProperties("spec", Map.of("podTemplate", podTemplate))
                .build())
        .create();
    fake.control()
        .genericKubernetesResources(FakeAgentSandboxController.POOLS)
        .inNamespace(ns)
        .resource(
            new GenericKubernetesResourceBuilder()
                .withApiVersion("extensions.agents.x-k8s.io/v1beta1")
                .withKind("SandboxWarmPool")
                .withNewMetadata()
                .withName(pool)
                .endMetadata()
                .addToAdditionalProperties(
                    "spec", Map.of("replicas", 1, "sandboxTemplateRef", Map.of("name", "agent")))
                .build())
        .create();
  }
}
