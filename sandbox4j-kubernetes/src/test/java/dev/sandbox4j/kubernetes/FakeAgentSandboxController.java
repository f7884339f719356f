package dev.sandbox4j.kubernetes;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.OwnerReference;
import io.fabric8.kubernetes.api.model.OwnerReferenceBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.dsl.base.ResourceDefinitionContext;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A FAKE of the agent-sandbox controller (kubernetes-sigs/agent-sandbox, v1beta1), playing the
 * behaviour its code documents ({@code controllers/sandbox_controller.go}, {@code
 * extensions/controllers/sandboxclaim_controller.go}; notes in {@code
 * shared/research/boxd-and-k8s.md} part 2), polled every 20 ms rather than driven by watches:
 *
 * <ul>
 *   <li>a Sandbox in {@code operatingMode: Running} gets a Pod of its {@code podTemplate}, named as
 *       the Sandbox, labelled {@code agents.x-k8s.io/sandbox-name-hash} (FNV-1a 32 of the name),
 *       owned by the Sandbox; {@code volumeClaimTemplates} become PVCs {@code <template>-<sandbox>}
 *       mounted by the template's name; once the pod is Ready the Sandbox's {@code Ready} condition
 *       is True (reason {@code DependenciesReady}) with {@code status.podIPs};
 *   <li>{@code operatingMode: Suspended} deletes the Pod (PVCs stay), Ready False with reason
 *       {@code SandboxSuspended}, Suspended True; back to Running makes a new Pod;
 *   <li>past {@code shutdownTime}: the Pod is deleted, Ready False {@code SandboxExpired}; with
 *       {@code shutdownPolicy: Delete} the Sandbox too;
 *   <li>a SandboxWarmPool keeps {@code replicas} Sandboxes of its template (GenerateName {@code
 *       <pool>-}, label {@code agents.x-k8s.io/warm-pool-sandbox}, owned by the pool);
 *   <li>a SandboxClaim adopts a Ready warm Sandbox (claim annotation {@code
 *       agents.x-k8s.io/sandbox-name}; the Sandbox loses the pool label, gets {@code
 *       launch-type=warm}, {@code claim-uid}, the claim as controller owner, and the claim's {@code
 *       additionalPodMetadata} labels), else creates a cold one named as the claim; the claim's
 *       {@code status.sandbox.name} names it;
 *   <li>objects whose owner is gone are deleted (what the cluster's garbage collector does).
 * </ul>
 *
 * Not played: the conversion webhook, v1alpha1, NetworkPolicy management of templates, env/volume
 * injection into claims, the 2 s grace for a warm candidate's pod IP.
 */
final class FakeAgentSandboxController implements AutoCloseable {
  static final ResourceDefinitionContext TEMPLATES = context("SandboxTemplate", "sandboxtemplates");
  static final ResourceDefinitionContext POOLS = context("SandboxWarmPool", "sandboxwarmpools");

  private final KubernetesClient client;
  private final Thread loop;
  private volatile boolean closed;
  private int generated;

  FakeAgentSandboxController(KubernetesClient client) {
    this.client = client;
    this.loop = Thread.ofPlatform().daemon().name("fake-agent-sandbox").start(this::run);
  }

  private static ResourceDefinitionContext context(String kind, String plural) {
    return new ResourceDefinitionContext.Builder()
        .withGroup(ClusterResources.EXTENSIONS_GROUP)
        .withVersion("v1beta1")
        .withKind(kind)
        .withPlural(plural)
        .withNamespaced(true)
        .build();
  }

  @Override
  public void close() {
    closed = true;
    loop.interrupt();
  }

  private void run() {
    while (!closed) {
      try {
        reconcile();
        Thread.sleep(20);
      } catch (InterruptedException e) {
        return;
      } catch (RuntimeException e) {
        if (closed) {
          return;
        }
        // an object changed under us (a conflict): the next round sees the new state
      }
    }
  }

  void reconcile() {
    for (GenericKubernetesResource pool :
        client.genericKubernetesResources(POOLS).inAnyNamespace().list().getItems()) {
      reconcilePool(pool);
    }
    for (GenericKubernetesResource claim :
        client
            .genericKubernetesResources(ClusterResources.CLAIMS)
            .inAnyNamespace()
            .list()
            .getItems()) {
      reconcileClaim(claim);
    }
    for (GenericKubernetesResource sandbox :
        client
            .genericKubernetesResources(ClusterResources.SANDBOXES)
            .inAnyNamespace()
            .list()
            .getItems()) {
      reconcileSandbox(sandbox);
    }
    for (Pod pod : client.pods().inAnyNamespace().list().getItems()) {
      for (OwnerReference owner : pod.getMetadata().getOwnerReferences()) {
        if ("Sandbox".equals(owner.getKind())
            && sandboxes(pod.getMetadata().getNamespace()).withName(owner.getName()).get()
                == null) {
          client.pods().resource(pod).delete();
        }
      }
    }
  }

  private io.fabric8.kubernetes.client.dsl.NonNamespaceOperation<
          GenericKubernetesResource,
          io.fabric8.kubernetes.api.model.GenericKubernetesResourceList,
          io.fabric8.kubernetes.client.dsl.Resource<GenericKubernetesResource>>
      sandboxes(String ns) {
    return client.genericKubernetesResources(ClusterResources.SANDBOXES).inNamespace(ns);
  }

  @SuppressWarnings("unchecked")
  private static Map<String, Object> map(Object o) {
    return o instanceof Map<?, ?> m ? (Map<String, Object>) m : new LinkedHashMap<>();
  }

  private static Map<String, Object> spec(GenericKubernetesResource r) {
    return map(r.getAdditionalProperties().get("spec"));
  }

  static String fnv1a32(String s) {
    int h = 0x811c9dc5;
    for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
      h ^= b & 0xff;
      h *= 0x01000193;
    }
    return String.format("%08x", h);
  }

  private void reconcileSandbox(GenericKubernetesResource sandbox) {
    String ns = sandbox.getMetadata().getNamespace();
    String name = sandbox.getMetadata().getName();
    for (OwnerReference owner : sandbox.getMetadata().getOwnerReferences()) {
      boolean gone =
          switch (owner.getKind()) {
            case "SandboxClaim" ->
                client
                        .genericKubernetesResources(ClusterResources.CLAIMS)
                        .inNamespace(ns)
                        .withName(owner.getName())
                        .get()
                    == null;
            case "SandboxWarmPool" ->
                client
                        .genericKubernetesResources(POOLS)
                        .inNamespace(ns)
                        .withName(owner.getName())
                        .get()
                    == null;
            default -> false;
          };
      if (gone) {
        sandboxes(ns).withName(name).delete();
        return;
      }
    }
    Map<String, Object> spec = spec(sandbox);
    Pod pod = client.pods().inNamespace(ns).withName(name).get();
    Object shutdown = spec.get("shutdownTime");
    if (shutdown instanceof String t && Instant.parse(t).isBefore(Instant.now())) {
      if (pod != null) {
        client.pods().resource(pod).delete();
      }
      if ("Delete".equals(spec.get("shutdownPolicy"))) {
        sandboxes(ns).withName(name).delete();
      } else {
        setStatus(ns, name, false, "SandboxExpired", null, List.of());
      }
      return;
    }
    if ("Suspended".equals(spec.get("operatingMode"))) {
      if (pod != null) {
        client.pods().resource(pod).delete();
      }
      setStatus(ns, name, false, "SandboxSuspended", "PodTerminated", List.of());
      return;
    }
    if (pod == null) {
      createPod(sandbox);
      setStatus(ns, name, false, "DependenciesNotReady", "NotSuspended", List.of());
      return;
    }
    boolean ready =
        pod.getStatus() != null
            && pod.getStatus().getConditions().stream()
                .anyMatch(c -> "Ready".equals(c.getType()) && "True".equals(c.getStatus()));
    setStatus(
        ns,
        name,
        ready,
        ready ? "DependenciesReady" : "DependenciesNotReady",
        "NotSuspended",
        ready && pod.getStatus().getPodIP() != null
            ? List.of(pod.getStatus().getPodIP())
            : List.of());
  }

  private void createPod(GenericKubernetesResource sandbox) {
    String ns = sandbox.getMetadata().getNamespace();
    String name = sandbox.getMetadata().getName();
    Map<String, Object> template = map(spec(sandbox).get("podTemplate"));
    PodSpec podSpec =
        client.getKubernetesSerialization().convertValue(template.get("spec"), PodSpec.class);
    Map<String, String> labels = new HashMap<>();
    map(map(template.get("metadata")).get("labels")).forEach((k, v) -> labels.put(k, (String) v));
    labels.put("agents.x-k8s.io/sandbox-name-hash", fnv1a32(name));
    Object vcts = spec(sandbox).get("volumeClaimTemplates");
    if (vcts instanceof List<?> list) {
      for (Object o : list) {
        String vct = (String) map(map(o).get("metadata")).get("name");
        String claim = vct + "-" + name;
        if (client.persistentVolumeClaims().inNamespace(ns).withName(claim).get() == null) {
          client
              .persistentVolumeClaims()
              .inNamespace(ns)
              .resource(
                  new io.fabric8.kubernetes.api.model.PersistentVolumeClaimBuilder()
                      .withNewMetadata()
                      .withName(claim)
                      .withOwnerReferences(ownerRef(sandbox, false))
                      .endMetadata()
                      .build())
              .create();
        }
        podSpec.getVolumes().removeIf(v -> v.getName().equals(vct));
        podSpec
            .getVolumes()
            .add(
                new io.fabric8.kubernetes.api.model.VolumeBuilder()
                    .withName(vct)
                    .withNewPersistentVolumeClaim()
                    .withClaimName(claim)
                    .endPersistentVolumeClaim()
                    .build());
      }
    }
    client
        .pods()
        .inNamespace(ns)
        .resource(
            new io.fabric8.kubernetes.api.model.PodBuilder()
                .withNewMetadata()
                .withName(name)
                .withLabels(labels)
                .withOwnerReferences(ownerRef(sandbox, true))
                .endMetadata()
                .withSpec(podSpec)
                .build())
        .create();
  }

  private static OwnerReference ownerRef(GenericKubernetesResource owner, boolean controller) {
    return new OwnerReferenceBuilder()
        .withApiVersion(owner.getApiVersion())
        .withKind(owner.getKind())
        .withName(owner.getMetadata().getName())
        .withUid(owner.getMetadata().getUid())
        .withController(controller)
        .build();
  }

  private void setStatus(
      String ns,
      String name,
      boolean ready,
      String reason,
      String suspendedReason,
      List<String> podIPs) {
    GenericKubernetesResource current = sandboxes(ns).withName(name).get();
    if (current == null) {
      return;
    }
    List<Map<String, Object>> conditions = new ArrayList<>();
    conditions.add(
        Map.of(
            "type", "Ready", "status", ready ? "True" : "False", "reason", reason, "message", ""));
    if (suspendedReason != null) {
      conditions.add(
          Map.of(
              "type",
              "Suspended",
              "status",
              "PodTerminated".equals(suspendedReason) ? "True" : "False",
              "reason",
              suspendedReason,
              "message",
              ""));
    }
    Map<String, Object> status = new LinkedHashMap<>();
    status.put("conditions", conditions);
    status.put("podIPs", podIPs);
    if (status.equals(current.getAdditionalProperties().get("status"))) {
      return;
    }
    sandboxes(ns)
        .withName(name)
        .edit(
            s -> {
              s.getAdditionalProperties().put("status", status);
              return s;
            });
  }

  private void reconcilePool(GenericKubernetesResource pool) {
    String ns = pool.getMetadata().getNamespace();
    Map<String, Object> spec = spec(pool);
    int replicas = spec.get("replicas") instanceof Number n ? n.intValue() : 1;
    String templateName = (String) map(spec.get("sandboxTemplateRef")).get("name");
    GenericKubernetesResource template =
        client.genericKubernetesResources(TEMPLATES).inNamespace(ns).withName(templateName).get();
    if (template == null) {
      return;
    }
    String poolHash = fnv1a32(pool.getMetadata().getName());
    int have =
        sandboxes(ns)
            .withLabel("agents.x-k8s.io/warm-pool-sandbox", poolHash)
            .list()
            .getItems()
            .size();
    for (int i = have; i < replicas; i++) {
      String name = pool.getMetadata().getName() + "-" + Integer.toHexString(0x10000 + generated++);
      Map<String, Object> sandboxSpec = new LinkedHashMap<>();
      sandboxSpec.put("podTemplate", spec(template).get("podTemplate"));
      sandboxSpec.put("operatingMode", "Running");
      sandboxes(ns)
          .resource(
              new io.fabric8.kubernetes.api.model.GenericKubernetesResourceBuilder()
                  .withApiVersion(ClusterResources.SANDBOX_GROUP + "/v1beta1")
                  .withKind("Sandbox")
                  .withNewMetadata()
                  .withName(name)
                  .withLabels(
                      Map.of(
                          "agents.x-k8s.io/warm-pool-sandbox", poolHash,
                          "agents.x-k8s.io/sandbox-template-ref", templateName))
                  .withOwnerReferences(ownerRef(pool, true))
                  .endMetadata()
                  .addToAdditionalProperties("spec", sandboxSpec)
                  .build())
          .create();
    }
  }

  private void reconcileClaim(GenericKubernetesResource claim) {
    String ns = claim.getMetadata().getNamespace();
    if (map(map(claim.getAdditionalProperties().get("status")).get("sandbox")).get("name")
        != null) {
      return;
    }
    Map<String, Object> spec = spec(claim);
    String poolName = (String) map(spec.get("warmPoolRef")).get("name");
    Map<String, String> extraLabels = new HashMap<>();
    map(map(spec.get("additionalPodMetadata")).get("labels"))
        .forEach((k, v) -> extraLabels.put(k, (String) v));
    String poolHash = fnv1a32(poolName);
    GenericKubernetesResource warm = null;
    for (GenericKubernetesResource s :
        sandboxes(ns).withLabel("agents.x-k8s.io/warm-pool-sandbox", poolHash).list().getItems()) {
      Object conditions = map(s.getAdditionalProperties().get("status")).get("conditions");
      if (conditions instanceof List<?> list
          && list.stream()
              .anyMatch(
                  c -> "Ready".equals(map(c).get("type")) && "True".equals(map(c).get("status")))) {
        warm = s;
        break;
      }
    }
    String sandboxName;
    if (warm != null) {
      sandboxName = warm.getMetadata().getName();
      String claimName = claim.getMetadata().getName();
      client
          .genericKubernetesResources(ClusterResources.CLAIMS)
          .inNamespace(ns)
          .withName(claimName)
          .edit(
              c -> {
                c.getMetadata().getAnnotations().put("agents.x-k8s.io/sandbox-name", sandboxName);
                return c;
              });
      sandboxes(ns)
          .withName(sandboxName)
          .edit(
              s -> {
                s.getMetadata().getLabels().remove("agents.x-k8s.io/warm-pool-sandbox");
                s.getMetadata().getLabels().put("agents.x-k8s.io/launch-type", "warm");
                s.getMetadata()
                    .getLabels()
                    .put("agents.x-k8s.io/claim-uid", claim.getMetadata().getUid());
                s.getMetadata().setOwnerReferences(List.of(ownerRef(claim, true)));
                Map<String, Object> template = map(spec(s).get("podTemplate"));
                Map<String, Object> metadata = new LinkedHashMap<>(map(template.get("metadata")));
                Map<String, Object> labels = new LinkedHashMap<>(map(metadata.get("labels")));
                labels.putAll(extraLabels);
                metadata.put("labels", labels);
                template = new LinkedHashMap<>(template);
                template.put("metadata", metadata);
                spec(s).put("podTemplate", template);
                return s;
              });
      client
          .pods()
          .inNamespace(ns)
          .withName(sandboxName)
          .edit(
              p -> {
                p.getMetadata().getLabels().putAll(extraLabels);
                return p;
              });
    } else {
      boolean warming =
          !sandboxes(ns)
              .withLabel("agents.x-k8s.io/warm-pool-sandbox", poolHash)
              .list()
              .getItems()
              .isEmpty();
      if (warming) {
        return; // a warm one is on its way: wait for it
      }
      GenericKubernetesResource pool =
          client.genericKubernetesResources(POOLS).inNamespace(ns).withName(poolName).get();
      if (pool == null) {
        return;
      }
      String templateName = (String) map(spec(pool).get("sandboxTemplateRef")).get("name");
      GenericKubernetesResource template =
          client.genericKubernetesResources(TEMPLATES).inNamespace(ns).withName(templateName).get();
      sandboxName = claim.getMetadata().getName();
      Map<String, Object> podTemplate = new LinkedHashMap<>(map(spec(template).get("podTemplate")));
      Map<String, Object> metadata = new LinkedHashMap<>(map(podTemplate.get("metadata")));
      Map<String, Object> labels = new LinkedHashMap<>(map(metadata.get("labels")));
      labels.putAll(extraLabels);
      metadata.put("labels", labels);
      podTemplate.put("metadata", metadata);
      Map<String, Object> sandboxSpec = new LinkedHashMap<>();
      sandboxSpec.put("podTemplate", podTemplate);
      sandboxSpec.put("operatingMode", "Running");
      sandboxes(ns)
          .resource(
              new io.fabric8.kubernetes.api.model.GenericKubernetesResourceBuilder()
                  .withApiVersion(ClusterResources.SANDBOX_GROUP + "/v1beta1")
                  .withKind("Sandbox")
                  .withNewMetadata()
                  .withName(sandboxName)
                  .withLabels(
                      Map.of(
                          "agents.x-k8s.io/launch-type",
                          "cold",
                          "agents.x-k8s.io/claim-uid",
                          claim.getMetadata().getUid()))
                  .withOwnerReferences(ownerRef(claim, true))
                  .endMetadata()
                  .addToAdditionalProperties("spec", sandboxSpec)
                  .build())
          .create();
    }
    client
        .genericKubernetesResources(ClusterResources.CLAIMS)
        .inNamespace(ns)
        .withName(claim.getMetadata().getName())
        .edit(
            c -> {
              c.getAdditionalProperties()
                  .put(
                      "status",
                      Map.of(
                          "sandbox", Map.of("name", sandboxName),
                          "conditions",
                              List.of(
                                  Map.of(
                                      "type",
                                      "Ready",
                                      "status",
                                      "True",
                                      "reason",
                                      "SandboxReady"))));
              return c;
            });
  }
}
