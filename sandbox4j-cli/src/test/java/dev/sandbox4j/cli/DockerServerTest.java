package dev.sandbox4j.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.docker.DockerPrerequisites;
import dev.sandbox4j.docker.DockerSandbox;
import dev.sandbox4j.server.ServerEngine;
import dev.sandbox4j.server.TenancyTest;
import dev.sandbox4j.server.TestServer;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The API on a Docker daemon: a server on the CLI's {@link DockerServerEngine}, as {@code sandbox4j
 * serve --provider docker} runs it (here, in the CLI's module, where the server and the docker
 * provider meet: the server's own tests need no Docker). Needs a daemon (skips without one, fails
 * under {@code CI=true}). Every container it makes carries the label {@code sandbox4j.test=<random
 * tag>}, and each test ends with none left: the daemon is shared, so nothing else on it is touched.
 */
class DockerServerTest {

  @TempDir Path data;

  private final String tag = HexFormat.of().toHexDigits(ThreadLocalRandom.current().nextLong());
  private DockerSandbox docker;
  private TestServer s;

  /** The CLI's docker engine, every container it makes also labelled with this test's tag. */
  private ServerEngine engine() {
    return new DockerServerEngine(docker, b -> b.label("sandbox4j.test", tag), line -> {});
  }

  @BeforeEach
  void serve() {
    DockerPrerequisites.requireDaemon();
    docker = DockerSandbox.builder().build();
    s = new TestServer(data, engine(), b -> b);
  }

  @AfterEach
  void nothingLeft() {
    if (s == null) {
      return; // skipped
    }
    s.close(); // destroys the sandboxes the test made through the API
    // anything left is a failure, removed here all the same: only what carries this test's tag
    List<String> containers = DockerPrerequisites.containersLabelled(docker, tag);
    for (String names : containers) {
      java.util.regex.Matcher id =
          java.util.regex.Pattern.compile("sandbox4j-(" + ID + ")").matcher(names);
      if (id.find()) {
        docker.destroy(new WorkspaceRef(DockerSandbox.NAME, id.group(1)));
      }
    }
    List<String> snapshots =
        docker.snapshots().stream().map(SnapshotInfo::name).filter(n -> n.endsWith(tag)).toList();
    snapshots.forEach(docker::removeSnapshot);
    assertThat(containers).as("containers this test left").isEmpty();
    assertThat(snapshots).as("snapshots this test left").isEmpty();
  }

  private static final String ID = "[0-9a-f]{12}";

  @Test
  void createExecFilesListForkSnapshotLifecycleAndDelete() throws Exception {
    String a = s.key("org-a");
    String id =
        s.create(
            a, "{\"labels\": {\"owner\": \"a\"}, \"env\": {\"GREETING\": \"hi\"}, \"cpus\": 1}");
    assertThat(id).matches(ID);
    JsonNode sandbox = s.call(a, "GET", "/v1/sandboxes/" + id, null).json();
    assertThat(sandbox.get("state").asText()).isEqualTo("running");
    assertThat(sandbox.get("labels").get("owner").asText()).isEqualTo("a");
    assertThat(sandbox.get("timers").isObject())
        .as("the engine's default lifetime, on the egress network")
        .isTrue();

    // exec: the env of the create, and the egress network (its proxy in the environment)
    List<JsonNode> events =
        s.exec(
            a,
            id,
            "{\"argv\": [\"sh\", \"-c\", \"echo $GREETING; ls /sys/class/net; echo ${HTTPS_PROXY%%:*}\"]}");
    assertThat(TestServer.stdout(events, "stdout")).isEqualTo("hi\neth0\nlo\nhttp\n");
    assertThat(events.getLast().get("type").asText()).isEqualTo("exit");
    assertThat(events.getLast().get("exitCode").asInt()).isZero();

    // files
    String files = "/v1/sandboxes/" + id + "/files";
    assertThat(
            s.send(a, "PUT", files + "/content?path=/tmp/note.txt", "a's".getBytes(), null)
                .statusCode())
        .isEqualTo(204);
    assertThat(
            new String(
                s.send(a, "GET", files + "/content?path=/tmp/note.txt", null, null).body(),
                StandardCharsets.UTF_8))
        .isEqualTo("a's");
    assertThat(
            s.call(a, "GET", files + "/stat?path=/tmp/note.txt", null).json().get("size").asInt())
        .isEqualTo(3);
    assertThat(s.call(a, "GET", files + "/list?path=/tmp", null).text()).contains("note.txt");

    // list, filtered by label
    assertThat(ids(s.call(a, "GET", "/v1/sandboxes?label=owner=a", null).json()))
        .containsExactly(id);
    assertThat(ids(s.call(a, "GET", "/v1/sandboxes?label=owner=b", null).json())).isEmpty();

    // a fork has the files and the env (docker keeps env in the container), no processes
    TestServer.Answer fork = s.call(a, "POST", "/v1/sandboxes/" + id + "/fork", "{}");
    assertThat(fork.status()).as(fork.text()).isEqualTo(201);
    String child = fork.json().get("sandbox").get("id").asText();
    s.track(child);
    assertThat(child).matches(ID).isNotEqualTo(id);
    assertThat(fork.json().get("processesCopied").asBoolean()).isFalse();
    assertThat(fork.json().get("reason").asText()).isNotEmpty();
    assertThat(
            TestServer.stdout(
                s.exec(
                    a,
                    child,
                    "{\"argv\": [\"sh\", \"-c\", \"echo $GREETING; cat /tmp/note.txt\"]}"),
                "stdout"))
        .isEqualTo("hi\na's");
    assertThat(ids(s.call(a, "GET", "/v1/sandboxes", null).json()))
        .containsExactlyInAnyOrder(child, id);

    // a snapshot, and a sandbox from it
    String snapshot = "base-" + tag;
    TestServer.Answer saved =
        s.call(a, "POST", "/v1/sandboxes/" + id + "/snapshots", "{\"name\": \"" + snapshot + "\"}");
    assertThat(saved.status()).as(saved.text()).isEqualTo(201);
    assertThat(saved.json().get("name").asText()).isEqualTo(snapshot);
    assertThat(s.call(a, "GET", "/v1/snapshots", null).text()).contains(snapshot);
    String fromSnapshot = s.create(a, "{\"snapshot\": \"" + snapshot + "\"}");
    assertThat(
            TestServer.stdout(
                s.exec(a, fromSnapshot, "{\"argv\": [\"cat\", \"/tmp/note.txt\"]}"), "stdout"))
        .isEqualTo("a's");
    // shown as the organization's snapshot, not under the daemon's image name for it
    assertThat(s.call(a, "GET", "/v1/sandboxes/" + fromSnapshot, null).json().get("image").asText())
        .isEqualTo("snapshot:" + snapshot);

    // lifecycle: suspend and resume, stop and start; a command wakes a stopped sandbox
    assertThat(lifecycle(a, id, "suspend")).isEqualTo("suspended");
    assertThat(lifecycle(a, id, "resume")).isEqualTo("running");
    assertThat(lifecycle(a, id, "stop")).isEqualTo("stopped");
    assertThat(
            TestServer.stdout(s.exec(a, id, "{\"argv\": [\"cat\", \"/tmp/note.txt\"]}"), "stdout"))
        .isEqualTo("a's");
    assertThat(lifecycle(a, id, "stop")).isEqualTo("stopped");
    assertThat(lifecycle(a, id, "start")).isEqualTo("running");

    // a background command, written to through its stdin route; last before the deletes: a
    // docker pause (suspend, and the commit of a snapshot or fork) while one of its execs starts
    // can leave the container frozen for good (see the report of serve-docker), so none overlaps
    TestServer.Answer started =
        s.call(
            a,
            "POST",
            "/v1/sandboxes/" + id + "/commands",
            "{\"argv\": [\"sh\", \"-c\", \"read line; echo got $line\"], \"stdin\": \"eA==\","
                + " \"keepStdinOpen\": true}");
    assertThat(started.status()).as(started.text()).isEqualTo(201);
    String cid = started.json().get("id").asText();
    TestServer.Answer eof =
        s.call(
            a,
            "POST",
            "/v1/sandboxes/" + id + "/commands/" + cid + "/stdin",
            "{\"data\": \"eQo=\", \"eof\": true}");
    assertThat(eof.status()).as(eof.text()).isEqualTo(204);
    // polled until it ends: each answer has the output since the last one
    StringBuilder output = new StringBuilder();
    JsonNode state = null;
    for (int i = 0; i < 600 && (state == null || state.get("running").asBoolean()); i++) {
      if (state != null) {
        Thread.sleep(50);
      }
      TestServer.Answer polled = s.call(a, "GET", "/v1/sandboxes/" + id + "/commands/" + cid, null);
      assertThat(polled.status()).as(polled.text()).isEqualTo(200);
      state = polled.json();
      output.append(
          new String(
              java.util.Base64.getDecoder().decode(state.get("stdout").asText()),
              StandardCharsets.UTF_8));
    }
    assertThat(state.get("running").asBoolean()).as(state.toString()).isFalse();
    assertThat(state.get("exitCode").asInt()).as(state.toString()).isZero();
    assertThat(output.toString()).isEqualTo("got xy\n");

    // delete: gone from the list and from the daemon
    for (String gone : List.of(fromSnapshot, child, id)) {
      assertThat(s.call(a, "DELETE", "/v1/sandboxes/" + gone, null).status()).isEqualTo(204);
    }
    assertThat(ids(s.call(a, "GET", "/v1/sandboxes", null).json())).isEmpty();
    assertThat(docker.list())
        .noneMatch(i -> Set.of(id, child, fromSnapshot).contains(i.ref().id()));
    assertThat(s.call(a, "DELETE", "/v1/snapshots/" + snapshot, null).status()).isEqualTo(204);
    assertThat(s.call(a, "GET", "/v1/snapshots", null).text()).doesNotContain(snapshot);
  }

  /**
   * As TenancyTest on the local engine: organization b calls every route of the route table that
   * takes a sandbox id with a's docker sandbox (and a's command id, also on b's own sandbox), and
   * the creates and deletes that name a's snapshot, by its name and by the name the daemon stores
   * it under: each is a 404 and nothing of a's changes. Snapshot names stay per organization.
   */
  @Test
  void anotherOrganizationCannotSeeUseOrDeleteADockerSandboxOrItsSnapshot() throws Exception {
    String a = s.key("org-a");
    String b = s.key("org-b");
    String id = s.create(a, "{\"labels\": {\"owner\": \"a\"}}");
    String files = "/v1/sandboxes/" + id + "/files";
    assertThat(
            s.send(a, "PUT", files + "/content?path=secret.txt", "a's".getBytes(), null)
                .statusCode())
        .isEqualTo(204);
    String snapshot = "mine-" + tag;
    assertThat(
            s.call(
                    a,
                    "POST",
                    "/v1/sandboxes/" + id + "/snapshots",
                    "{\"name\": \"" + snapshot + "\"}")
                .status())
        .isEqualTo(201);
    String stored =
        docker.snapshots().stream()
            .map(SnapshotInfo::name)
            .filter(n -> n.endsWith("-" + snapshot))
            .findFirst()
            .orElseThrow();
    String own = s.create(b, "{}");
    // after a's snapshot and before b's: no docker pause overlaps one of the command's execs
    TestServer.Answer command =
        s.call(a, "POST", "/v1/sandboxes/" + id + "/commands", "{\"argv\": [\"sleep\", \"1000\"]}");
    assertThat(command.status()).as(command.text()).isEqualTo(201);
    String cid = command.json().get("id").asText();
    List<String> containers = DockerPrerequisites.containersLabelled(docker, tag);

    assertThat(ids(s.call(b, "GET", "/v1/sandboxes", null).json())).containsExactly(own);
    assertThat(ids(s.call(b, "GET", "/v1/sandboxes?label=owner=a", null).json())).isEmpty();
    assertThat(s.call(b, "GET", "/v1/snapshots", null).json().get("items")).isEmpty();
    List<String> routes = s.routes().stream().filter(r -> r.contains("{id}")).toList();
    assertThat(routes).hasSizeGreaterThan(20);
    for (String route : routes) {
      TenancyTest.attackById(s, b, route, id, cid);
      if (route.contains("{cid}")) {
        TenancyTest.attackById(s, b, route, own, cid);
      }
    }
    for (String name : List.of(snapshot, stored)) {
      for (TestServer.Answer answer :
          List.of(
              s.call(b, "POST", "/v1/sandboxes", "{\"snapshot\": \"" + name + "\"}"),
              s.call(b, "DELETE", "/v1/snapshots/" + name, null))) {
        assertThat(answer.status()).as(name + ": " + answer.text()).isEqualTo(404);
        assertThat(answer.error().get("code").asText()).isEqualTo("not_found");
      }
    }

    // nothing of a's changed, and b made nothing
    assertThat(DockerPrerequisites.containersLabelled(docker, tag))
        .containsExactlyInAnyOrderElementsOf(containers);
    assertThat(s.call(a, "GET", files + "/content?path=secret.txt", null).text()).isEqualTo("a's");
    assertThat(s.call(a, "GET", files + "/stat?path=/tmp/other-was-here", null).status())
        .isEqualTo(404);
    assertThat(s.call(a, "GET", files + "/stat?path=other", null).status()).isEqualTo(404);
    assertThat(s.call(a, "GET", "/v1/sandboxes/" + id, null).json().get("state").asText())
        .isEqualTo("running");
    assertThat(
            s.call(a, "GET", "/v1/sandboxes/" + id + "/commands/" + cid, null)
                .json()
                .get("running")
                .asBoolean())
        .isTrue();
    assertThat(docker.snapshots()).map(SnapshotInfo::name).contains(stored);
    assertThat(docker.snapshots()).map(SnapshotInfo::name).noneMatch(n -> n.endsWith("stolen"));

    // b may have a snapshot of the same name, apart from a's
    assertThat(
            s.call(
                    b,
                    "POST",
                    "/v1/sandboxes/" + own + "/snapshots",
                    "{\"name\": \"" + snapshot + "\"}")
                .status())
        .isEqualTo(201);
    assertThat(s.call(b, "DELETE", "/v1/snapshots/" + snapshot, null).status()).isEqualTo(204);
    assertThat(s.call(a, "GET", "/v1/snapshots", null).text()).contains(snapshot);
    assertThat(s.call(a, "DELETE", "/v1/snapshots/" + snapshot, null).status()).isEqualTo(204);
    assertThat(
            s.call(a, "POST", "/v1/sandboxes/" + id + "/commands/" + cid + "/stop", null).status())
        .isEqualTo(200);
    assertThat(s.call(a, "DELETE", "/v1/sandboxes/" + id, null).status()).isEqualTo(204);
    assertThat(s.call(b, "DELETE", "/v1/sandboxes/" + own, null).status()).isEqualTo(204);
  }

  @Test
  void whatDockerCannotDoIsA501NamingTheCapabilityAndTheProvider() throws Exception {
    String a = s.key("org-a");
    String id = s.create(a, "{}");

    TestServer.Answer hibernate = s.call(a, "POST", "/v1/sandboxes/" + id + "/hibernate", null);
    assertThat(hibernate.status()).as(hibernate.text()).isEqualTo(501);
    assertThat(hibernate.error().get("code").asText()).isEqualTo("not_supported");
    assertThat(hibernate.error().get("message").asText())
        .contains("'docker'")
        .contains("hibernate")
        .contains("SupportsHibernate");

    TestServer.Answer egress = s.call(a, "GET", "/v1/sandboxes/" + id + "/egress", null);
    assertThat(egress.status())
        .as("docker sandboxes have egress policies: " + egress.text())
        .isEqualTo(200);

    int before = DockerPrerequisites.containersLabelled(docker, tag).size();
    TestServer.Answer inodes = s.call(a, "POST", "/v1/sandboxes", "{\"diskInodes\": 100000}");
    assertThat(inodes.status()).as(inodes.text()).isEqualTo(501);
    assertThat(inodes.error().get("field").asText()).isEqualTo("diskInodes");
    assertThat(inodes.error().get("message").asText()).contains("'docker'");

    TestServer.Answer cpus = s.call(a, "POST", "/v1/sandboxes", "{\"cpus\": 0}");
    assertThat(cpus.status()).as(cpus.text()).isEqualTo(400);
    assertThat(cpus.error().get("field").asText()).isEqualTo("cpus");
    assertThat(DockerPrerequisites.containersLabelled(docker, tag)).hasSize(before);

    // a refused route changed nothing: the sandbox still runs commands
    assertThat(TestServer.stdout(s.exec(a, id, "{\"argv\": [\"echo\", \"ok\"]}"), "stdout"))
        .isEqualTo("ok\n");
    assertThat(s.call(a, "DELETE", "/v1/sandboxes/" + id, null).status()).isEqualTo(204);
  }

  /**
   * The ceilings hold on docker too: an omitted size gets docker's default capped at the ceiling,
   * in a create, a fork and a create from a snapshot (docker's snapshots carry no size), and a size
   * asked for over a ceiling is a 400 naming it, with a snapshot too.
   */
  @Test
  void theCeilingsHoldForCreatesForksAndSnapshots() throws Exception {
    s.close();
    s =
        new TestServer(
            data.resolve("small"),
            engine(),
            b -> b.maxMemoryPerSandbox(512L << 20).maxPidsPerSandbox(100));
    String a = s.key("org-a");
    String limits = // the container's own limits, read inside it (cgroup v2, or v1)
        "{\"shell\": \"cat /sys/fs/cgroup/memory.max 2>/dev/null"
            + " || cat /sys/fs/cgroup/memory/memory.limit_in_bytes;"
            + " cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max\"}";
    String capped = (512L << 20) + "\n100\n";

    String id = s.create(a, "{}");
    assertThat(TestServer.stdout(s.exec(a, id, limits), "stdout")).isEqualTo(capped);

    TestServer.Answer fork = s.call(a, "POST", "/v1/sandboxes/" + id + "/fork", "{}");
    assertThat(fork.status()).as(fork.text()).isEqualTo(201);
    String child = fork.json().get("sandbox").get("id").asText();
    s.track(child);
    assertThat(TestServer.stdout(s.exec(a, child, limits), "stdout")).isEqualTo(capped);

    String snapshot = "small-" + tag;
    assertThat(
            s.call(
                    a,
                    "POST",
                    "/v1/sandboxes/" + id + "/snapshots",
                    "{\"name\": \"" + snapshot + "\"}")
                .status())
        .isEqualTo(201);
    String fromSnapshot = s.create(a, "{\"snapshot\": \"" + snapshot + "\"}");
    assertThat(TestServer.stdout(s.exec(a, fromSnapshot, limits), "stdout")).isEqualTo(capped);

    int before = DockerPrerequisites.containersLabelled(docker, tag).size();
    for (String body :
        List.of(
            "{\"memoryBytes\": 1073741824}",
            "{\"snapshot\": \"" + snapshot + "\", \"memoryBytes\": 1073741824}")) {
      TestServer.Answer over = s.call(a, "POST", "/v1/sandboxes", body);
      assertThat(over.status()).as(over.text()).isEqualTo(400);
      assertThat(over.error().get("field").asText()).isEqualTo("memoryBytes");
      assertThat(over.error().get("message").asText()).contains("ceiling");
    }
    TestServer.Answer pids = s.call(a, "POST", "/v1/sandboxes", "{\"pids\": 101}");
    assertThat(pids.status()).as(pids.text()).isEqualTo(400);
    assertThat(pids.error().get("field").asText()).isEqualTo("pids");
    assertThat(DockerPrerequisites.containersLabelled(docker, tag)).hasSize(before);

    for (String gone : List.of(fromSnapshot, child, id)) {
      assertThat(s.call(a, "DELETE", "/v1/sandboxes/" + gone, null).status()).isEqualTo(204);
    }
    assertThat(s.call(a, "DELETE", "/v1/snapshots/" + snapshot, null).status()).isEqualTo(204);
  }

  private String lifecycle(String key, String id, String op) throws Exception {
    TestServer.Answer r = s.call(key, "POST", "/v1/sandboxes/" + id + "/" + op, null);
    assertThat(r.status()).as(op + ": " + r.text()).isEqualTo(200);
    return r.json().get("state").asText();
  }

  private static List<String> ids(JsonNode page) {
    return java.util.stream.StreamSupport.stream(page.get("items").spliterator(), false)
        .map(i -> i.get("id").asText())
        .sorted()
        .collect(Collectors.toList());
  }
}
