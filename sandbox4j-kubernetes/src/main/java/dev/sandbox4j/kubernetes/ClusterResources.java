package dev.sandbox4j.kubernetes;

import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ContainerBuilder;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.api.model.GenericKubernetesResourceBuilder;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.OwnerReference;
import io.fabric8.kubernetes.api.model.PersistentVolumeClaimBuilder;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.PodCondition;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.PodSpecBuilder;
import io.fabric8.kubernetes.api.model.Quantity;
import io.fabric8.kubernetes.api.model.ResourceRequirementsBuilder;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.VolumeBuilder;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyBuilder;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyEgressRule;
import io.fabric8.kubernetes.api.model.networking.v1.NetworkPolicyEgressRuleBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.dsl.base.ResourceDefinitionContext;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The cluster objects of workspaces: Pods, agent-sandbox Sandboxes and SandboxClaims,
 * NetworkPolicies and volume claims; creating them, waiting for them to be ready, and removing
 * them. Field names, conditions and labels of agent-sandbox are those of its v1beta1 API ({@code
 * api/v1beta1/sandbox_types.go}, {@code extensions/api/v1beta1/*} of
 * kubernetes-sigs/agent-sandbox).
 */
final class ClusterResources {
  static final String SANDBOX_GROUP = "agents.x-k8s.io";
  static final String EXTENSIONS_GROUP = "extensions.agents.x-k8s.io";
  static final String LABEL_PREFIX = "sandbox4j.dev/";
  static final String WORKSPACE_LABEL = LABEL_PREFIX + "workspace";
  static final String OWNER_LABEL = LABEL_PREFIX + "owner";
  static final String MANAGED_BY = "app.kubernetes.io/managed-by";
  static final String CONTAINER = "sandbox";
  static final String VOLUME = "workspace";

  static final ResourceDefinitionContext SANDBOXES =
      new ResourceDefinitionContext.Builder()
          .withGroup(SANDBOX_GROUP)
          .withVersion("v1beta1")
          .withKind("Sandbox")
          .withPlural("sandboxes")
          .withNamespaced(true)
          .build();
  static final ResourceDefinitionContext CLAIMS =
      new ResourceDefinitionContext.Builder()
          .withGroup(EXTENSIONS_GROUP)
          .withVersion("v1beta1")
          .withKind("SandboxClaim")
          .withPlural("sandboxclaims")
          .withNamespaced(true)
          .build();

  /** Private, link-local and unique-local ranges: what {@code PUBLIC} egress excludes. */
  private static final List<String> PRIVATE_V4 =
      List.of("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10");

  private static final List<String> PRIVATE_V6 = List.of("fc00::/7", "fe80::/10");

  private final KubernetesClient client;
  private final KubernetesSandbox.Options options;
  private final Supplier<KubernetesSandbox.Mode> mode;

  ClusterResources(
      KubernetesClient client,
      KubernetesSandbox.Options options,
      Supplier<KubernetesSandbox.Mode> mode) {
    this.client = client;
    this.options = options;
    this.mode = mode;
  }

  KubernetesClient client() {
    return client;
  }

  /** A running pod of a workspace: where commands go. */
  record RunningPod(String namespace, String name, String container, String workingDirectory) {}

  /**
   * Creates workspace {@code name} (a Pod, a Sandbox, or a SandboxClaim whose adopted Sandbox's
   * name is returned) and waits until its pod is ready.
   */
  RunningPod create(String name) {
    String ns = options.namespace(client);
    try {
      if (mode.get() == KubernetesSandbox.Mode.POD) {
        createNetworkPolicy(ns, name);
        if (options.volumeSize != null) {
          client
              .persistentVolumeClaims()
              .inNamespace(ns)
              .resource(
                  new PersistentVolumeClaimBuilder()
                      .withNewMetadata()
                      .withName(VOLUME + "-" + name)
                      .withLabels(labels(name))
                      .endMetadata()
                      .withNewSpec()
                      .withAccessModes("ReadWriteOnce")
                      .withNewResources()
                      .addToRequests("storage", new Quantity(options.volumeSize))
                      .endResources()
                      .endSpec()
                      .build())
              .create();
        }
        client
            .pods()
            .inNamespace(ns)
            .resource(
                new PodBuilder()
                    .withNewMetadata()
                    .withName(name)
                    .withLabels(labels(name))
                    .endMetadata()
                    .withSpec(podSpec(VOLUME + "-" + name))
                    .build())
            .create();
        return awaitPod(ns, name);
      }
      if (options.warmPool != null) {
        String sandbox = claim(ns, name);
        return awaitSandboxReady(ns, sandbox);
      }
      createNetworkPolicy(ns, name);
      client.genericKubernetesResources(SANDBOXES).inNamespace(ns).resource(sandbox(name)).create();
      return awaitSandboxReady(ns, name);
    } catch (KubernetesClientException e) {
      throw new WorkspaceException(
          "cannot create workspace " + ns + "/" + name + " on the cluster: " + e.getMessage(), e);
    }
  }

  Map<String, String> labels(String name) {
    Map<String, String> labels = new LinkedHashMap<>(options.labels);
    labels.put(MANAGED_BY, "sandbox4j");
    labels.put(OWNER_LABEL, options.owner);
    labels.put(WORKSPACE_LABEL, name);
    return labels;
  }

  /** The pod: one container that idles, hardened; commands arrive by exec. */
  PodSpec podSpec(String claimName) {
    List<EnvVar> env = new ArrayList<>();
    env.add(new EnvVar("HOME", options.workingDirectory, null));
    options.env.forEach((k, v) -> env.add(new EnvVar(k, v, null)));
    ResourceRequirementsBuilder resources = new ResourceRequirementsBuilder();
    if (options.cpus > 0) {
      Quantity cpu = new Quantity(Math.round(options.cpus * 1000) + "m");
      resources.addToRequests("cpu", cpu).addToLimits("cpu", cpu);
    }
    if (options.memoryMiB > 0) {
      Quantity memory = new Quantity(options.memoryMiB + "Mi");
      resources.addToRequests("memory", memory).addToLimits("memory", memory);
    }
    Container container =
        new ContainerBuilder()
            .withName(CONTAINER)
            .withImage(options.image)
            // the image's entrypoint may exit at once: the container only has to stay up
            .withCommand(
                "/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done")
            .withWorkingDir(options.workingDirectory)
            .withEnv(env)
            .withResources(resources.build())
            .addNewVolumeMount()
            .withName(VOLUME)
            .withMountPath(options.workingDirectory)
            .endVolumeMount()
            .withNewSecurityContext()
            .withRunAsNonRoot(true)
            .withRunAsUser(options.runAsUser)
            .withRunAsGroup(options.runAsUser)
            .withAllowPrivilegeEscalation(false)
            .withNewCapabilities()
            .withDrop("ALL")
            .endCapabilities()
            .withNewSeccompProfile()
            .withType("RuntimeDefault")
            .endSeccompProfile()
            .endSecurityContext()
            .build();
    Volume volume =
        options.volumeSize != null && claimName != null
            ? new VolumeBuilder()
                .withName(VOLUME)
                .withNewPersistentVolumeClaim()
                .withClaimName(claimName)
                .endPersistentVolumeClaim()
                .build()
            : new VolumeBuilder().withName(VOLUME).withNewEmptyDir().endEmptyDir().build();
    PodSpecBuilder spec =
        new PodSpecBuilder()
            .withContainers(container)
            .withAutomountServiceAccountToken(false)
            // no environment variables describing the cluster's Services reach the sandbox
            .withEnableServiceLinks(false)
            .withTerminationGracePeriodSeconds(5L)
            .withNewSecurityContext()
            .withFsGroup(options.runAsUser)
            .endSecurityContext();
    spec.withVolumes(volume);
    if (options.runtimeClassName != null) {
      spec.withRuntimeClassName(options.runtimeClassName);
    }
    return spec.build();
  }

  /**
   * A v1beta1 Sandbox of the pod spec; the working directory on a volume claim template if sized.
   */
  GenericKubernetesResource sandbox(String name) {
    Map<String, Object> spec = new LinkedHashMap<>();
    PodSpec pod = podSpec(null);
    if (options.volumeSize != null) {
      // the controller names the claim <template>-<sandbox> and mounts it by the template's name
      pod.getVolumes().removeIf(v -> v.getName().equals(VOLUME));
    }
    spec.put(
        "podTemplate",
        Map.of(
            "metadata", Map.of("labels", labels(name)),
            "spec", client.getKubernetesSerialization().convertValue(pod, Map.class)));
    if (options.volumeSize != null) {
      spec.put(
          "volumeClaimTemplates",
          List.of(
              Map.of(
                  "metadata",
                  Map.of("name", VOLUME),
                  "spec",
                  Map.of(
                      "accessModes",
                      List.of("ReadWriteOnce"),
                      "resources",
                      Map.of("requests", Map.of("storage", options.volumeSize))))));
    }
    spec.put("operatingMode", "Running");
    if (options.shutdownAfter != null) {
      spec.put("shutdownTime", shutdownTime());
      spec.put("shutdownPolicy", "Delete");
    }
    return new GenericKubernetesResourceBuilder()
        .withApiVersion(SANDBOX_GROUP + "/v1beta1")
        .withKind("Sandbox")
        .withNewMetadata()
        .withName(name)
        .withLabels(labels(name))
        .endMetadata()
        .addToAdditionalProperties("spec", spec)
        .build();
  }

  private String shutdownTime() {
    return Instant.now().plus(options.shutdownAfter).truncatedTo(ChronoUnit.SECONDS).toString();
  }

  /**
   * Claims a Sandbox of the warm pool and returns its name, once the claim names it (the claim's
   * {@code status.sandbox.name}, set by the controller when it adopts a warm Sandbox or creates a
   * cold one). Our labels go on the pod through {@code additionalPodMetadata}; the pool's template
   * decides everything else, its NetworkPolicy included.
   */
  private String claim(String ns, String name) {
    Map<String, Object> spec = new LinkedHashMap<>();
    spec.put("warmPoolRef", Map.of("name", options.warmPool));
    spec.put("additionalPodMetadata", Map.of("labels", labels(name)));
    if (options.shutdownAfter != null) {
      spec.put("lifecycle", Map.of("shutdownTime", shutdownTime(), "shutdownPolicy", "Delete"));
    }
    client
        .genericKubernetesResources(CLAIMS)
        .inNamespace(ns)
        .resource(
            new GenericKubernetesResourceBuilder()
                .withApiVersion(EXTENSIONS_GROUP + "/v1beta1")
                .withKind("SandboxClaim")
                .withNewMetadata()
                .withName(name)
                .withLabels(labels(name))
                .endMetadata()
                .addToAdditionalProperties("spec", spec)
                .build())
        .create();
    return poll(
        "SandboxClaim "
            + ns
            + "/"
            + name
            + " to be given a Sandbox of warm pool "
            + options.warmPool,
        () -> {
          GenericKubernetesResource claim =
              client.genericKubernetesResources(CLAIMS).inNamespace(ns).withName(name).get();
          if (claim == null) {
            throw new WorkspaceUnavailableException(
                "SandboxClaim " + ns + "/" + name + " was deleted while it was waited for");
          }
          Optional<Map<String, Object>> ready = condition(claim, "Ready");
          if (ready.isPresent() && "False".equals(ready.get().get("status"))) {
            Object reason = ready.get().get("reason");
            if (List.of(
                    "InvalidMetadata",
                    "EnvVarsInjectionRejected",
                    "VolumeClaimTemplatesError",
                    "ClaimExpired",
                    "SandboxExpired")
                .contains(reason)) {
              throw new WorkspaceException(
                  "SandboxClaim " + ns + "/" + name + " failed: " + reason + " " + ready.get());
            }
          }
          Object sandbox = path(claim.getAdditionalProperties(), "status", "sandbox", "name");
          return sandbox instanceof String s && !s.isEmpty() ? Optional.of(s) : Optional.empty();
        });
  }

  /** Waits for the Sandbox's {@code Ready} condition, then for its pod (named as the Sandbox). */
  RunningPod awaitSandboxReady(String ns, String name) {
    poll(
        "Sandbox " + ns + "/" + name + " to be Ready",
        () -> {
          GenericKubernetesResource sandbox = getSandbox(ns, name);
          if (sandbox == null) {
            throw new WorkspaceUnavailableException(
                "sandbox k8s:" + ns + "/" + name + " is gone (its Sandbox was deleted)");
          }
          Optional<Map<String, Object>> ready = condition(sandbox, "Ready");
          if (ready.isEmpty() || !"True".equals(ready.get().get("status"))) {
            Object reason = ready.map(r -> r.get("reason")).orElse(null);
            if ("SandboxExpired".equals(reason)
                || "PodFailed".equals(reason)
                || "PodSucceeded".equals(reason)) {
              throw new WorkspaceUnavailableException(
                  "sandbox k8s:" + ns + "/" + name + " has ended (Ready=False, " + reason + ")");
            }
            return Optional.empty();
          }
          return Optional.of(true);
        });
    return awaitPod(ns, name);
  }

  private GenericKubernetesResource getSandbox(String ns, String name) {
    return client.genericKubernetesResources(SANDBOXES).inNamespace(ns).withName(name).get();
  }

  /** Waits until the pod's {@code Ready} condition is true; a pod that has ended is unavailable. */
  RunningPod awaitPod(String ns, String name) {
    Pod pod =
        poll(
            "pod " + ns + "/" + name + " to be ready",
            () -> {
              Pod p = client.pods().inNamespace(ns).withName(name).get();
              if (p == null) {
                return Optional.empty(); // not made yet (a controller makes it), or gone: the
                // timeout says so
              }
              String phase = p.getStatus() == null ? null : p.getStatus().getPhase();
              if ("Failed".equals(phase) || "Succeeded".equals(phase)) {
                throw new WorkspaceUnavailableException(
                    "sandbox k8s:" + ns + "/" + name + " has ended: its pod is " + phase);
              }
              return isReady(p) ? Optional.of(p) : Optional.empty();
            });
    return running(pod);
  }

  /** The pod of an existing workspace, if it exists and is ready. */
  Optional<RunningPod> existing(String ns, String name) {
    try {
      Pod pod = client.pods().inNamespace(ns).withName(name).get();
      if (pod != null && isReady(pod)) {
        return Optional.of(running(pod));
      }
      if (pod == null && mode.get() == KubernetesSandbox.Mode.SANDBOX) {
        GenericKubernetesResource sandbox = getSandbox(ns, name);
        if (sandbox != null) {
          return Optional.of(awaitSandboxReady(ns, name)); // suspended or starting: wait
        }
      }
      if (pod != null) {
        return Optional.of(awaitPod(ns, name));
      }
      return Optional.empty();
    } catch (KubernetesClientException e) {
      throw new WorkspaceUnavailableException(
          "cannot reach sandbox k8s:" + ns + "/" + name + ": " + e.getMessage(), e);
    }
  }

  /** Whether the pod exists (any phase). */
  boolean podExists(String ns, String name) {
    try {
      return client.pods().inNamespace(ns).withName(name).get() != null;
    } catch (KubernetesClientException e) {
      return false;
    }
  }

  private static boolean isReady(Pod pod) {
    if (pod.getStatus() == null || pod.getStatus().getConditions() == null) {
      return false;
    }
    for (PodCondition c : pod.getStatus().getConditions()) {
      if ("Ready".equals(c.getType()) && "True".equals(c.getStatus())) {
        return true;
      }
    }
    return false;
  }

  private static RunningPod running(Pod pod) {
    Container c = pod.getSpec().getContainers().getFirst();
    for (Container each : pod.getSpec().getContainers()) {
      if (CONTAINER.equals(each.getName())) {
        c = each;
      }
    }
    String dir = c.getWorkingDir() == null || c.getWorkingDir().isEmpty() ? "/" : c.getWorkingDir();
    return new RunningPod(
        pod.getMetadata().getNamespace(), pod.getMetadata().getName(), c.getName(), dir);
  }

  /** Egress as a NetworkPolicy selecting the workspace's pod; none for UNRESTRICTED. */
  private void createNetworkPolicy(String ns, String name) {
    if (options.egress == KubernetesSandbox.EgressMode.UNRESTRICTED) {
      return;
    }
    List<NetworkPolicyEgressRule> rules = new ArrayList<>();
    switch (options.egress) {
      case NONE -> {}
      case CIDRS -> {
        for (String cidr : options.egressCidrs) {
          rules.add(
              new NetworkPolicyEgressRuleBuilder()
                  .addNewTo()
                  .withNewIpBlock()
                  .withCidr(cidr)
                  .endIpBlock()
                  .endTo()
                  .build());
        }
      }
      case PUBLIC -> {
        rules.add(
            new NetworkPolicyEgressRuleBuilder()
                .addNewTo()
                .withNewIpBlock()
                .withCidr("0.0.0.0/0")
                .withExcept(PRIVATE_V4)
                .endIpBlock()
                .endTo()
                .addNewTo()
                .withNewIpBlock()
                .withCidr("::/0")
                .withExcept(PRIVATE_V6)
                .endIpBlock()
                .endTo()
                .build());
      }
      case UNRESTRICTED -> throw new AssertionError();
    }
    client
        .network()
        .v1()
        .networkPolicies()
        .inNamespace(ns)
        .resource(
            new NetworkPolicyBuilder()
                .withNewMetadata()
                .withName(name)
                .withLabels(labels(name))
                .endMetadata()
                .withNewSpec()
                .withNewPodSelector()
                .withMatchLabels(Map.of(WORKSPACE_LABEL, name))
                .endPodSelector()
                .withPolicyTypes("Egress")
                .withEgress(rules)
                .endSpec()
                .build())
        .create();
  }

  /**
   * Removes workspace {@code name}: its Sandbox and the SandboxClaim owning it (sandbox mode), its
   * Pod, NetworkPolicy and volume claim. What does not exist is skipped.
   */
  void delete(String ns, String name) {
    if (mode.get() == KubernetesSandbox.Mode.SANDBOX) {
      GenericKubernetesResource sandbox = getSandbox(ns, name);
      if (sandbox != null) {
        for (OwnerReference owner : sandbox.getMetadata().getOwnerReferences()) {
          if ("SandboxClaim".equals(owner.getKind())) {
            client
                .genericKubernetesResources(CLAIMS)
                .inNamespace(ns)
                .withName(owner.getName())
                .delete();
          }
        }
        client.genericKubernetesResources(SANDBOXES).inNamespace(ns).withName(name).delete();
      }
    }
    client.pods().inNamespace(ns).withName(name).withGracePeriod(0).delete();
    client.network().v1().networkPolicies().inNamespace(ns).withName(name).delete();
    client.persistentVolumeClaims().inNamespace(ns).withName(VOLUME + "-" + name).delete();
  }

  /** Sets a Sandbox's {@code spec.operatingMode}; sandbox mode only. */
  void setOperatingMode(String ns, String name, String operatingMode) {
    if (mode.get() != KubernetesSandbox.Mode.SANDBOX) {
      throw new UnsupportedOperationException(
          "suspend and resume are not supported by k8s in pod mode (a plain Pod cannot be"
              + " suspended); they need the agent-sandbox controller's Sandbox");
    }
    try {
      GenericKubernetesResource sandbox = getSandbox(ns, name);
      if (sandbox == null) {
        throw new WorkspaceUnavailableException(
            "sandbox k8s:" + ns + "/" + name + " is gone (no Sandbox of that name)");
      }
      // A merge patch of the one field, without a resourceVersion: the controller updates the
      // Sandbox's status all the time, and an edit (GET, then a patch that carries the version it
      // read) failed with 409 Conflict whenever it did so in between (a CI failure).
      client
          .genericKubernetesResources(SANDBOXES)
          .inNamespace(ns)
          .withName(name)
          .patch(
              io.fabric8.kubernetes.client.dsl.base.PatchContext.of(
                  io.fabric8.kubernetes.client.dsl.base.PatchType.JSON_MERGE),
              client
                  .getKubernetesSerialization()
                  .asJson(Map.of("spec", Map.of("operatingMode", operatingMode))));
    } catch (KubernetesClientException e) {
      throw new WorkspaceException(
          "cannot set sandbox k8s:" + ns + "/" + name + " " + operatingMode + ": " + e.getMessage(),
          e);
    }
  }

  /** Names of the workspaces in {@code ns} labelled as Sandbox4j's, of {@code owner}. */
  /**
   * What the cluster says of workspace {@code name}: {@code running} once its pod is ready, {@code
   * suspended} for a Sandbox whose {@code operatingMode} is {@code Suspended}, else {@code
   * starting}; the image, creation time and user labels of its pod (or Sandbox). Empty if neither
   * exists.
   */
  Optional<dev.sandbox4j.workspace.machine.SandboxInfo> describe(
      dev.sandbox4j.workspace.WorkspaceRef ref, String ns, String name) {
    Pod pod = client.pods().inNamespace(ns).withName(name).get();
    GenericKubernetesResource sandbox =
        mode.get() == KubernetesSandbox.Mode.SANDBOX ? getSandbox(ns, name) : null;
    HasMetadata found = pod != null ? pod : sandbox;
    if (found == null) {
      return Optional.empty();
    }
    String state;
    if (sandbox != null
        && "Suspended".equals(path(sandbox.getAdditionalProperties(), "spec", "operatingMode"))) {
      state = "suspended";
    } else {
      state = pod != null && isReady(pod) ? "running" : "starting";
    }
    Map<String, String> userLabels = new LinkedHashMap<>();
    if (found.getMetadata().getLabels() != null) {
      found.getMetadata().getLabels().entrySet().stream()
          .filter(e -> !e.getKey().startsWith(LABEL_PREFIX) && !e.getKey().equals(MANAGED_BY))
          .forEach(e -> userLabels.put(e.getKey(), e.getValue()));
    }
    dev.sandbox4j.workspace.machine.SandboxInfo.Builder info =
        dev.sandbox4j.workspace.machine.SandboxInfo.builder(ref, state).labels(userLabels);
    if (pod != null && pod.getSpec() != null && !pod.getSpec().getContainers().isEmpty()) {
      info.image(pod.getSpec().getContainers().getFirst().getImage());
    }
    String created = found.getMetadata().getCreationTimestamp();
    if (created != null) {
      try {
        info.created(java.time.Instant.parse(created));
      } catch (java.time.format.DateTimeParseException e) {
        // the API server writes RFC 3339; anything else is left unsaid
      }
    }
    return Optional.of(info.build());
  }

  List<String> listOwned(String ns, String owner) {
    Map<String, String> selector = Map.of(MANAGED_BY, "sandbox4j", OWNER_LABEL, owner);
    Set<String> names = new LinkedHashSet<>();
    List<HasMetadata> found = new ArrayList<>();
    found.addAll(client.pods().inNamespace(ns).withLabels(selector).list().getItems());
    found.addAll(
        client
            .network()
            .v1()
            .networkPolicies()
            .inNamespace(ns)
            .withLabels(selector)
            .list()
            .getItems());
    if (mode.get() == KubernetesSandbox.Mode.SANDBOX) {
      found.addAll(
          client
              .genericKubernetesResources(SANDBOXES)
              .inNamespace(ns)
              .withLabels(selector)
              .list()
              .getItems());
    }
    for (HasMetadata m : found) {
      String name = m.getMetadata().getLabels().get(WORKSPACE_LABEL);
      names.add(name != null ? name : m.getMetadata().getName());
    }
    return new ArrayList<>(names);
  }

  @SuppressWarnings("unchecked")
  private static Optional<Map<String, Object>> condition(GenericKubernetesResource r, String type) {
    Object conditions = path(r.getAdditionalProperties(), "status", "conditions");
    if (conditions instanceof List<?> list) {
      for (Object c : list) {
        if (c instanceof Map<?, ?> m && type.equals(m.get("type"))) {
          return Optional.of((Map<String, Object>) m);
        }
      }
    }
    return Optional.empty();
  }

  private static Object path(Map<String, Object> root, String... keys) {
    Object at = root;
    for (String k : keys) {
      if (!(at instanceof Map<?, ?> m)) {
        return null;
      }
      at = m.get(k);
    }
    return at;
  }

  /** Polls {@code check} until it yields, every 50 ms at first and then at most every second. */
  private <T> T poll(String what, Supplier<Optional<T>> check) {
    long deadline = System.nanoTime() + options.readyTimeout.toNanos();
    long pause = 50;
    while (true) {
      Optional<T> done = check.get();
      if (done.isPresent()) {
        return done.get();
      }
      if (System.nanoTime() > deadline) {
        throw new WorkspaceException(
            "timed out after " + options.readyTimeout + " waiting for " + what);
      }
      try {
        Thread.sleep(pause);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new java.util.concurrent.CancellationException("interrupted waiting for " + what);
      }
      pause = Math.min(pause * 2, 1000);
    }
  }
}
