package dev.sandbox4j.bench;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.async.ResultCallback;
import com.github.dockerjava.api.model.Frame;
import com.github.dockerjava.core.DefaultDockerClientConfig;
import com.github.dockerjava.core.DockerClientImpl;
import com.github.dockerjava.zerodep.ZerodepDockerHttpClient;
import dev.sandbox4j.docker.DockerSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.net.URI;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The {@code docker} provider with its defaults (the daemon found as the docker CLI finds it, the
 * default image). Every sandbox of a run carries {@link LocalTarget#RUN_LABEL}; closing destroys
 * what is left. Its own scenarios: {@code fork_files}, and {@code raw_api_exec_true}, an exec of
 * {@code true} through docker-java alone (create, attach until the stream ends, inspect), the floor
 * that {@code exec_true} through the provider is compared with.
 */
final class DockerTarget implements Target {
  private static final Command NODE_VERSION = Command.argv("node", "-v");

  private final String runId = ProcessHandle.current().pid() + "@" + Instant.now();
  private final DockerSandbox sandboxes =
      DockerSandbox.builder()
          .label(LocalTarget.RUN_LABEL, runId)
          .progress(line -> System.err.println("bench: " + line))
          .build();

  static DockerTarget create() {
    return new DockerTarget();
  }

  @Override
  public WorkspaceProvider provider() {
    return sandboxes;
  }

  @Override
  public Command firstCommand() {
    return NODE_VERSION;
  }

  @Override
  public boolean sandboxed() {
    return false; // its memory is the daemon's cgroup's, not one IdleMemory reads
  }

  @Override
  public Optional<ExtraScenarios> extraScenarios() {
    return Optional.of(
        new ExtraScenarios() {
          private final List<Workspace> made = new java.util.ArrayList<>();

          @Override
          public List<WorkspaceBench.Scenario> scenarios(int iterations, int warmup) {
            Workspace ws = Workspace.of(sandboxes.newBackend());
            made.add(ws);
            ws.run(Command.argv("true"));
            String container = "sandbox4j-" + ws.open().id();
            DockerClient client = client();
            return List.of(
                new WorkspaceBench.Scenario(
                    "raw_api_exec_true", warmup, iterations, () -> rawExec(client, container)),
                new WorkspaceBench.Scenario(
                    "fork_files",
                    Math.min(warmup, 3),
                    Math.max(10, iterations / 10),
                    () -> forkFiles(ws)));
          }

          @Override
          public void close() {
            made.forEach(w -> sandboxes.destroy(w.open()));
          }
        });
  }

  private static DockerClient client() {
    String host = System.getenv().getOrDefault("DOCKER_HOST", "unix:///var/run/docker.sock");
    return DockerClientImpl.getInstance(
        DefaultDockerClientConfig.createDefaultConfigBuilder().withDockerHost(host).build(),
        new ZerodepDockerHttpClient.Builder().dockerHost(URI.create(host)).build());
  }

  private static long[] rawExec(DockerClient client, String container) throws Exception {
    long start = System.nanoTime();
    String exec =
        client
            .execCreateCmd(container)
            .withCmd("true")
            .withAttachStdout(true)
            .withAttachStderr(true)
            .exec()
            .getId();
    client.execStartCmd(exec).exec(new ResultCallback.Adapter<Frame>()).awaitCompletion();
    Long code = client.inspectExecCmd(exec).exec().getExitCodeLong();
    while (code == null) {
      code = client.inspectExecCmd(exec).exec().getExitCodeLong();
    }
    return new long[] {System.nanoTime() - start};
  }

  private long[] forkFiles(Workspace parent) {
    long start = System.nanoTime();
    WorkspaceRef child = sandboxes.forkFiles(parent.open()).ref();
    long took = System.nanoTime() - start;
    sandboxes.destroy(child);
    return new long[] {took};
  }

  @Override
  public Map<String, Object> details() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("image", DockerSandbox.DEFAULT_IMAGE);
    m.put("run_label", LocalTarget.RUN_LABEL + "=" + runId);
    return m;
  }

  @Override
  public void close() {
    for (int sweep = 0; sweep < 3; sweep++) {
      List<WorkspaceRef> left =
          sandboxes.list().stream()
              .filter(i -> runId.equals(i.labels().get(LocalTarget.RUN_LABEL)))
              .map(SandboxInfo::ref)
              .toList();
      if (left.isEmpty()) {
        return;
      }
      left.forEach(sandboxes::destroy);
    }
  }
}
