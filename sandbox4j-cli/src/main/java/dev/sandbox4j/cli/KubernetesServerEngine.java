package dev.sandbox4j.cli;

import dev.sandbox4j.kubernetes.KubernetesSandbox;
import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.server.ServerEngine;
import java.util.Map;
import java.util.Objects;

/**
 * {@code serve --provider k8s}: the server's sandboxes as workspaces on one Kubernetes cluster (the
 * server's kubeconfig, or its pod's in-cluster service account), in one namespace, each create
 * shaped by a {@link KubernetesSandbox.Builder}: agent-sandbox {@code Sandbox}es where the cluster
 * has the CRDs, else plain pods.
 *
 * <p>A pod takes an image, CPU and memory (requests and limits), env, a working directory, labels,
 * a lifetime (agent-sandbox's shutdown time) and gVisor (the RuntimeClass {@code gvisor}). A create
 * that asks for what a pod has no field for (a process limit, a disk or inode quota, a snapshot,
 * idle or auto-suspend timers, a delete-after time) is refused by its field (the server answers
 * 501). The server's own record keeps which organization may use which sandbox.
 */
final class KubernetesServerEngine implements ServerEngine {

  private final io.fabric8.kubernetes.client.KubernetesClient client;
  private final String namespace;
  private final KubernetesSandbox provider;

  /**
   * @param environment where the cluster is found ({@code KUBECONFIG}, else kubectl's defaults)
   * @param namespace the namespace of every sandbox, or null for the kubeconfig's (in a pod: its
   *     own)
   */
  KubernetesServerEngine(Map<String, String> environment, String namespace) {
    // one client for every create: each would otherwise hold its own connection pool and threads
    this.client = Providers.kubernetesClient(Objects.requireNonNull(environment, "environment"));
    this.namespace = namespace;
    this.provider = builder().build();
  }

  private KubernetesSandbox.Builder builder() {
    // ids without the namespace: the server's ids go into URL paths and host names
    KubernetesSandbox.Builder b = KubernetesSandbox.builder().client(client).namespaceInRefs(false);
    if (namespace != null) {
      b.namespace(namespace);
    }
    return b;
  }

  @Override
  public KubernetesSandbox provider() {
    return provider;
  }

  @Override
  public KubernetesSandbox shaped(Shape s) {
    refuse("pids", s.pids() != null, "a pod has no process limit of ours");
    refuse("diskBytes", s.diskBytes() != null, "a pod has no disk quota of ours");
    refuse("diskInodes", s.diskInodes() != null, "a pod has no inode quota");
    refuse("snapshot", s.snapshot() != null, "the k8s backend has no snapshots");
    refuse("idleTimeoutMs", s.idleTimeout() != null, "the k8s backend has a lifetime only");
    refuse("autoSuspendTimeoutMs", s.autoSuspendTimeout() != null, "no auto-suspend on k8s");
    refuse("deleteAfter", s.deleteAfter() != null, "the k8s backend has a lifetime only");
    KubernetesSandbox.Builder b = builder();
    ShapeFields.field(
        "image",
        () -> {
          if (s.image() != null && !s.image().equals("default")) b.image(s.image());
        });
    ShapeFields.ifSet("cpus", s.cpus(), v -> b.cpus(v));
    ShapeFields.ifSet("memoryBytes", s.memoryBytes(), v -> b.memoryMiB(Providers.wholeMiB(v)));
    ShapeFields.field("env", () -> b.env(s.env()));
    ShapeFields.ifSet("workingDirectory", s.workingDirectory(), b::workingDirectory);
    ShapeFields.field("labels", () -> s.labels().forEach(b::label));
    ShapeFields.ifSet("sandboxTimeoutMs", s.sandboxTimeout(), b::shutdownAfter);
    ShapeFields.field(
        "isolation",
        () -> {
          if (s.isolation() == Isolation.GVISOR) b.runtimeClassName("gvisor");
        });
    return b.build();
  }

  private static void refuse(String field, boolean asked, String why) {
    if (asked) {
      throw new UnsupportedOperationException(field + ": " + why);
    }
  }
}
