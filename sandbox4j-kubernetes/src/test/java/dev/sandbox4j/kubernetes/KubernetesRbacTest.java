package dev.sandbox4j.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import io.fabric8.kubernetes.api.model.HasMetadata;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.rbac.PolicyRule;
import io.fabric8.kubernetes.api.model.rbac.Role;
import io.fabric8.kubernetes.api.model.rbac.RoleBinding;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.mockwebserver.http.RecordedRequest;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The manifests in {@code deploy/kubernetes} against what the provider really calls: every request
 * the provider sends to the fake cluster while it goes through both modes (plain pods with a volume
 * and an egress policy; Sandboxes, suspend and resume, a warm-pool claim), lists, forwards a port
 * and reaps (a kill is one more exec), is mapped to its RBAC resource and verb the way the API
 * server maps it, and the Role must allow each, with no rule left unused. The Deployment must run
 * {@code serve --provider k8s} in the Role's namespace under the bound ServiceAccount.
 */
class KubernetesRbacTest {
  private static final Path DEPLOY = Path.of("..", "deploy", "kubernetes");
  private static final String AGENT = "sandbox4j-under-test";

  /** {@code /api/v1/...} or {@code /apis/GROUP/VERSION/...}, namespaced, with an optional name. */
  private static final Pattern RESOURCE =
      Pattern.compile(
          "/(?:api/v1|apis/([^/]+)/[^/]+)/namespaces/[^/]+/([^/?]+)(?:/([^/?]+)(?:/([^/?]+))?)?"
              + "(?:\\?(.*))?");

  @TempDir Path node;

  @Test
  void theRoleAllowsEveryCallTheProviderMakesAndNothingElse() throws Exception {
    Set<String> used = new TreeSet<>();
    try (FakeCluster cluster = new FakeCluster(node, true)) {
      KubernetesClient client =
          new KubernetesClientBuilder()
              .withConfig(
                  new ConfigBuilder(cluster.client.getConfiguration()).withUserAgent(AGENT).build())
              .build();
      exercise(cluster, client);
      List<String> unmapped = new ArrayList<>();
      RecordedRequest request;
      while ((request = cluster.server.takeRequest(0, TimeUnit.MILLISECONDS)) != null) {
        if (AGENT.equals(request.getHeader("User-Agent"))) {
          used.addAll(rbacOf(request, unmapped));
        }
      }
      client.close();
      assertThat(unmapped).as("requests that name no namespaced resource").isEmpty();
    }
    Set<String> allowed = new TreeSet<>();
    for (PolicyRule rule : role().getRules()) {
      for (String group : rule.getApiGroups()) {
        for (String resource : rule.getResources()) {
          for (String verb : rule.getVerbs()) {
            allowed.add(group + "/" + resource + ":" + verb);
          }
        }
      }
    }
    assertThat(allowed).as("the Role allows every call").containsAll(used);
    assertThat(used).as("every rule of the Role is used").containsAll(allowed);
  }

  @Test
  void theDeploymentServesK8sInTheRolesNamespaceUnderTheBoundAccount() throws Exception {
    Role role = role();
    RoleBinding binding = only(load("rbac.yaml"), RoleBinding.class);
    Deployment server = only(load("server.yaml"), Deployment.class);
    String ns = role.getMetadata().getNamespace();
    assertThat(binding.getRoleRef().getName()).isEqualTo(role.getMetadata().getName());
    assertThat(binding.getSubjects())
        .singleElement()
        .satisfies(
            s -> {
              assertThat(s.getKind()).isEqualTo("ServiceAccount");
              assertThat(s.getName())
                  .isEqualTo(server.getSpec().getTemplate().getSpec().getServiceAccountName());
            });
    assertThat(server.getMetadata().getNamespace()).isEqualTo(ns);
    List<String> args =
        server.getSpec().getTemplate().getSpec().getContainers().getFirst().getArgs();
    assertThat(String.join(" ", args)).contains("serve --provider k8s --namespace " + ns);
  }

  /** Both modes, every operation: create, exec, files, list, suspend, resume, gc, destroy. */
  private static void exercise(FakeCluster cluster, KubernetesClient client) throws Exception {
    KubernetesSandbox pods =
        KubernetesSandbox.builder()
            .client(client)
            .namespace("rbac")
            .mode(KubernetesSandbox.Mode.POD)
            .persistentVolume("1Gi")
            .egressNone()
            .owner("rbac-pods")
            .build();
    Workspace pod = Workspace.of(pods.newBackend());
    pod.writeText("f", "x");
    assertThat(pod.readText("f")).isEqualTo("x");
    assertThat(pods.list()).hasSize(1);
    // a port URL: each connection to the local listener is one port-forward WebSocket
    int local = pods.forwardTcp(pod.ref().orElseThrow(), 9);
    try (java.net.Socket connection = new java.net.Socket("127.0.0.1", local)) {
      connection.setSoTimeout(10_000);
      assertThat(connection.getInputStream().read())
          .as("nothing listens on 9 in the pod")
          .isEqualTo(-1);
    }
    assertThat(pods.gc("rbac-pods")).hasSize(1);

    KubernetesSandbox sandboxes =
        KubernetesSandbox.builder()
            .client(client)
            .namespace("rbac")
            .readyTimeout(Duration.ofSeconds(20))
            .build();
    Workspace sandbox = Workspace.of(sandboxes.newBackend());
    assertThat(sandbox.run(Command.shell("echo hi")).stdoutText()).isEqualTo("hi\n");
    WorkspaceRef ref = sandbox.ref().orElseThrow();
    sandboxes.suspend(ref);
    sandboxes.resume(ref);
    assertThat(sandboxes.info(ref)).isPresent();
    assertThat(sandboxes.list()).extracting(i -> i.ref()).containsExactly(ref);
    sandboxes.destroy(ref);

    KubernetesAgentSandboxTest.makeWarmPool(cluster, "rbac", "pool");
    KubernetesSandbox claims =
        KubernetesSandbox.builder()
            .client(client)
            .namespace("rbac")
            .warmPool("pool")
            .readyTimeout(Duration.ofSeconds(20))
            .build();
    Workspace claimed = Workspace.of(claims.newBackend());
    assertThat(claimed.run(Command.shell("echo warm")).stdoutText()).isEqualTo("warm\n");
    claims.destroy(claimed.ref().orElseThrow());
  }

  /**
   * The RBAC {@code GROUP/RESOURCE[/SUBRESOURCE]:VERB}s a request needs, as the API server maps it;
   * API discovery (allowed to every authenticated user) needs none.
   */
  private static List<String> rbacOf(RecordedRequest request, List<String> unmapped) {
    String path = request.getPath();
    if (path.matches("/apis?(/[^/]+)?(/[^/]+)?") || path.startsWith("/version")) {
      return List.of();
    }
    Matcher m = RESOURCE.matcher(path);
    if (!m.matches()) {
      unmapped.add(request.getMethod() + " " + path);
      return List.of();
    }
    String group = m.group(1) == null ? "" : m.group(1);
    String resource = m.group(2) + (m.group(4) == null ? "" : "/" + m.group(4));
    boolean named = m.group(3) != null;
    String query = m.group(5) == null ? "" : m.group(5);
    List<String> verbs =
        switch (request.getMethod()) {
          // a WebSocket exec or port-forward is a GET: "create" since Kubernetes 1.30
          // (KEP-4006), "get" before
          case "GET" ->
              resource.equals("pods/exec") || resource.equals("pods/portforward")
                  ? List.of("create", "get")
                  : List.of(named ? "get" : query.contains("watch=true") ? "watch" : "list");
          case "POST" -> List.of("create");
          case "PUT" -> List.of("update");
          case "PATCH" -> List.of("patch");
          case "DELETE" -> List.of(named ? "delete" : "deletecollection");
          default -> {
            unmapped.add(request.getMethod() + " " + path);
            yield List.of();
          }
        };
    return verbs.stream().map(v -> group + "/" + resource + ":" + v).toList();
  }

  private static Role role() throws Exception {
    return only(load("rbac.yaml"), Role.class);
  }

  private static List<HasMetadata> load(String file) throws Exception {
    try (InputStream in = Files.newInputStream(DEPLOY.resolve(file));
        KubernetesClient parser = new KubernetesClientBuilder().build()) {
      return parser.load(in).items();
    }
  }

  private static <T> T only(List<HasMetadata> items, Class<T> type) {
    List<T> found = items.stream().filter(type::isInstance).map(type::cast).toList();
    assertThat(found).as("one %s", type.getSimpleName()).hasSize(1);
    return found.getFirst();
  }
}
