package dev.sandbox4j.modal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.modal.internal.proto.GenericResult.GenericStatus;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Modal-specific behaviour of the client against the fake, beyond the workspace contract. */
class ModalSandboxTest {
  private static final Duration BOUND = Duration.ofSeconds(30);

  private static FakeModal modal;
  @TempDir static Path home;
  private final List<WorkspaceRef> created = new ArrayList<>();

  @BeforeAll
  static void startFake() {
    LocalEngine.require();
    modal = new FakeModal();
  }

  @AfterAll
  static void stopFake() {
    if (modal != null) {
      modal.close();
    }
  }

  @AfterEach
  void destroy() {
    try (ModalSandbox client = client().build()) {
      created.forEach(client::destroy);
    }
  }

  private static ModalSandbox.Builder client() {
    return modal.client(home).image("debian:bookworm-slim");
  }

  private Workspace open(ModalSandbox client) {
    Workspace ws = Workspace.of(client.newBackend());
    created.add(ws.open());
    return ws;
  }

  @Test
  void aLostCreateAnswerStillCreatesOneSandbox() {
    int before = modal.sandboxes.size();
    modal.loseNextResponse("SandboxCreate");
    try (ModalSandbox client = client().build()) {
      Workspace ws = open(client);
      assertThat(modal.sandboxes).hasSize(before + 1);
      assertThat(ws.ref().orElseThrow().id()).isIn(modal.sandboxes.keySet());
    }
    List<FakeModal.Call> creates = modal.calls("SandboxCreate");
    assertThat(creates.get(creates.size() - 1).header(ControlPlane.IDEMPOTENCY_KEY))
        .isEqualTo(creates.get(creates.size() - 2).header(ControlPlane.IDEMPOTENCY_KEY));
  }

  @Test
  void aStreamCutMidwayResumesAtItsOffset() {
    try (ModalSandbox client = client().build()) {
      Workspace ws = open(client);
      int readsBefore = modal.calls("TaskExecStdioRead").size();
      modal.cutStdioAfterChunks = 3;
      CommandResult result = ws.run(Command.shell("seq 1 200000"), RunOptions.withTimeout(BOUND));
      StringBuilder expected = new StringBuilder();
      for (int i = 1; i <= 200000; i++) {
        expected.append(i).append('\n');
      }
      assertThat(result.exitCode()).isZero();
      assertThat(result.stdoutText()).isEqualTo(expected.toString());
      assertThat(modal.cutStdioAfterChunks).as("the fake did cut the stream").isZero();
      List<FakeModal.Call> reads = modal.calls("TaskExecStdioRead");
      assertThat(reads.size() - readsBefore)
          .as("stdout twice, stderr once")
          .isGreaterThanOrEqualTo(3);
    }
  }

  @Test
  void transientRouterFailuresAreRetried() {
    try (ModalSandbox client = client().build()) {
      Workspace ws = open(client);
      modal.failNext("TaskExecStart", io.grpc.Status.UNAVAILABLE, 2);
      modal.failNext("TaskExecWait", io.grpc.Status.UNAVAILABLE, 1);
      assertThat(ws.run(Command.shell("echo ok"), RunOptions.withTimeout(BOUND)).stdoutText())
          .isEqualTo("ok\n");
    }
  }

  @Test
  void anExpiredRouterTokenIsRenewed() {
    modal.routerTokenLifetime = Duration.ofSeconds(2);
    try (ModalSandbox client = client().build()) {
      Workspace ws = open(client);
      int accesses = modal.calls("TaskGetCommandRouterAccess").size();
      sleep(Duration.ofMillis(2500));
      assertThat(ws.run(Command.shell("echo again"), RunOptions.withTimeout(BOUND)).stdoutText())
          .isEqualTo("again\n");
      assertThat(modal.calls("TaskGetCommandRouterAccess").size()).isGreaterThan(accesses);
    } finally {
      modal.routerTokenLifetime = Duration.ofHours(1);
    }
  }

  @Test
  void aStreamReopenedAfterTheRouterTokenExpiredRenewsIt() {
    modal.routerTokenLifetime = Duration.ofSeconds(2);
    try (ModalSandbox client = client().build()) {
      Workspace ws = open(client);
      int accesses = modal.calls("TaskGetCommandRouterAccess").size();
      modal.cutStdioAfterChunks = 1;
      CommandResult result =
          ws.run(Command.shell("echo first; sleep 3; seq 1 50000"), RunOptions.withTimeout(BOUND));
      assertThat(result.exitCode()).isZero();
      assertThat(result.stdoutText()).startsWith("first\n1\n2\n").endsWith("\n50000\n");
      assertThat(modal.calls("TaskGetCommandRouterAccess").size()).isGreaterThan(accesses);
    } finally {
      modal.routerTokenLifetime = Duration.ofHours(1);
      modal.cutStdioAfterChunks = 0;
    }
  }

  @Test
  void anImageThatCannotBeBuiltSaysWhy() {
    try (ModalSandbox client = modal.client(home).image("missing/image:1").build()) {
      Workspace ws = Workspace.of(client.newBackend());
      assertThatThrownBy(ws::open)
          .isInstanceOf(dev.sandbox4j.workspace.WorkspaceException.class)
          .isNotInstanceOf(WorkspaceUnavailableException.class)
          .hasMessageContaining("Modal could not build the image [FROM missing/image:1]")
          .hasMessageContaining("pull access denied");
      assertThat(ws.ref()).as("no sandbox was created").isEmpty();
    }
  }

  @Test
  void aSandboxThatCannotStartSaysWhy() {
    try (ModalSandbox client = modal.client(home).image("broken/image:1").build()) {
      Workspace ws = Workspace.of(client.newBackend());
      assertThatThrownBy(ws::open)
          .isInstanceOf(dev.sandbox4j.workspace.WorkspaceException.class)
          .isNotInstanceOf(WorkspaceUnavailableException.class)
          .hasMessageContaining("Modal could not start sandbox")
          .hasMessageContaining("GENERIC_STATUS_INIT_FAILURE")
          .hasMessageContaining("entrypoint failed");
      created.add(ws.ref().orElseThrow());
    }
  }

  @Test
  void aTerminatedSandboxIsUnavailableWithExit137() {
    try (ModalSandbox client = client().build()) {
      WorkspaceRef ref = open(client).ref().orElseThrow();
      client.destroy(ref);
      client.destroy(ref); // quiet
      Workspace attached = Workspace.of(client.backend(ref).orElseThrow());
      assertThatThrownBy(attached::open)
          .isInstanceOf(WorkspaceUnavailableException.class)
          .hasMessageContaining("GENERIC_STATUS_TERMINATED")
          .hasMessageContaining("exit 137")
          .hasMessageContaining("never replaced");
      assertThat(modal.sandboxes.get(ref.id()).result.getStatus())
          .isEqualTo(GenericStatus.GENERIC_STATUS_TERMINATED);
    }
  }

  @Test
  void aTimedOutSandboxIsUnavailableWithExit124() {
    try (ModalSandbox client = client().build()) {
      Workspace ws = open(client);
      WorkspaceRef ref = ws.ref().orElseThrow();
      modal.expire(ref.id());
      assertThatThrownBy(() -> ws.run(Command.shell("true"), RunOptions.withTimeout(BOUND)))
          .isInstanceOf(WorkspaceUnavailableException.class);
      assertThatThrownBy(() -> Workspace.of(client.backend(ref).orElseThrow()).open())
          .isInstanceOf(WorkspaceUnavailableException.class)
          .hasMessageContaining("exit 124");
    }
  }

  @Test
  void aKilledCommandInARunningSandboxExits137() {
    try (ModalSandbox client = client().build()) {
      Workspace ws = open(client);
      assertThat(ws.run(Command.shell("kill -9 $$"), RunOptions.withTimeout(BOUND)).exitCode())
          .isEqualTo(137);
    }
  }

  @Test
  void unknownAndForeignRefs() {
    try (ModalSandbox client = client().build()) {
      WorkspaceRef unknown = new WorkspaceRef("modal", "sb-doesnotexist");
      assertThatThrownBy(() -> Workspace.of(client.backend(unknown).orElseThrow()).open())
          .isInstanceOf(WorkspaceUnavailableException.class)
          .hasMessageContaining("no longer exists");
      client.destroy(unknown); // quiet
      WorkspaceRef foreign = new WorkspaceRef("local", "abc");
      assertThat(client.backend(foreign)).isEmpty();
      assertThatThrownBy(() -> client.destroy(foreign))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("belongs to provider 'local', not to 'modal'");
      assertThatThrownBy(() -> client.snapshotFilesystem(foreign))
          .isInstanceOf(IllegalArgumentException.class);
      assertThatThrownBy(() -> client.backend(new WorkspaceRef("modal", "a/b")))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("not a Modal sandbox id");
    }
  }

  @Test
  void newSandboxesGetTheBuildersSettings() {
    modal.namedSecrets.put("db", "st-db");
    modal.secrets.put("st-db", Map.of("DB_URL", "postgres://db"));
    try (ModalSandbox client =
        client()
            .appName("settings")
            .cpu(1.5)
            .memoryMiB(2048)
            .sandboxTimeout(Duration.ofMinutes(30))
            .idleTimeout(Duration.ofMinutes(5))
            .secret("db")
            .tag("team", "a")
            .openPorts(8080, 8443)
            .workingDirectory("/tmp/project/src")
            .env("GREETING", "hi")
            .build()) {
      Workspace ws = open(client);
      var sandbox = modal.sandboxes.get(ws.ref().orElseThrow().id());
      var definition = sandbox.definition;
      assertThat(definition.getTimeoutSecs()).isEqualTo(1800);
      assertThat(definition.getIdleTimeoutSecs()).isEqualTo(300);
      assertThat(definition.getResources().getMilliCpu()).isEqualTo(1500);
      assertThat(definition.getResources().getMemoryMb()).isEqualTo(2048);
      assertThat(definition.getSecretIdsList()).containsExactly("st-db");
      assertThat(definition.getOpenPorts().getPortsList()).hasSize(2);
      assertThat(sandbox.tags)
          .extracting(t -> t.getTagName() + "=" + t.getTagValue())
          .containsExactly("team=a");
      assertThat(ws.workingDirectory())
          .as("created on a new sandbox")
          .isEqualTo("/tmp/project/src");
      assertThat(
              ws.run(Command.shell("echo $GREETING $DB_URL; pwd"), RunOptions.withTimeout(BOUND))
                  .stdoutText())
          .isEqualTo("hi postgres://db\n/tmp/project/src\n");
      Map<Integer, URI> tunnels = client.tunnels(ws.ref().orElseThrow());
      String id = ws.ref().orElseThrow().id();
      assertThat(tunnels)
          .containsEntry(8080, URI.create("https://" + id + "-8080.fake-modal.test"))
          .containsEntry(8443, URI.create("https://" + id + "-8443.fake-modal.test:8443"));
    }
  }

  @Test
  void listFindsSandboxesByTagAcrossPages() {
    try (ModalSandbox tagged = client().appName("listing").tag("run", "42").build();
        ModalSandbox untagged = client().appName("listing").build()) {
      List<WorkspaceRef> refs = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        refs.add(open(tagged).ref().orElseThrow());
      }
      open(untagged);
      assertThat(tagged.list().stream().map(i -> i.ref()).toList())
          .as("three, over two pages of two")
          .containsExactlyInAnyOrderElementsOf(refs);
      var info = tagged.info(refs.getFirst()).orElseThrow();
      assertThat(info.state()).isEqualTo("running");
      assertThat(info.labels()).containsEntry("run", "42");
      assertThat(info.created()).isNotNull();
      assertThat(info.timers().sandboxTimeout()).isPositive();
      tagged.destroy(refs.getFirst());
      assertThat(tagged.list()).as("finished sandboxes are not listed").hasSize(2);
      assertThat(tagged.info(refs.getFirst())).as("a finished sandbox has no info").isEmpty();
      assertThat(untagged.list()).hasSize(3);
    }
  }

  @Test
  void aFilesystemSnapshotStartsNewSandboxes() {
    String image;
    try (ModalSandbox client = client().build()) {
      Workspace ws = open(client);
      ws.writeText("/tmp/kept.txt", "from the snapshot\n");
      image = client.snapshotFilesystem(ws.ref().orElseThrow());
    }
    assertThat(image).startsWith("im-");
    try (ModalSandbox client = modal.client(home).imageId(image).build()) {
      Workspace ws = open(client);
      assertThat(ws.readText("/tmp/kept.txt")).isEqualTo("from the snapshot\n");
    }
  }

  @Test
  void theDefaultImageIsTheSeedsRecipe() {
    try (ModalSandbox client =
        modal.client(home).appName("default-image").workingDirectory("/tmp").build()) {
      open(client);
    }
    List<List<String>> layers =
        modal.calls("ImageGetOrCreate").isEmpty()
            ? List.of()
            : modal.images.values().stream().toList();
    assertThat(layers)
        .anySatisfy(l -> assertThat(l).containsExactly("FROM python:3.12-slim-bookworm"))
        .anySatisfy(
            l ->
                assertThat(String.join("\n", l))
                    .startsWith("FROM base\nRUN apt-get update")
                    .contains("git ripgrep")
                    .contains("WORKDIR /root")
                    .contains("# base im-"));
    assertThat(modal.calls("ImageJoinStreaming").size())
        .as("the build is followed, across a stream that ended without a result")
        .isGreaterThanOrEqualTo(2);
  }

  private static void sleep(Duration d) {
    try {
      Thread.sleep(d);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
