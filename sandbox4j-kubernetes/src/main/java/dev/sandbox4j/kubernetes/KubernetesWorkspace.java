package dev.sandbox4j.kubernetes;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.SupportsCommands;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.spi.MarkedTrees;
import dev.sandbox4j.workspace.spi.ProcessCommands;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.dsl.ExecListener;
import io.fabric8.kubernetes.client.dsl.ExecWatch;
import io.fabric8.kubernetes.client.dsl.PodResource;
import io.fabric8.kubernetes.client.dsl.TtyExecOutputErrorable;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * One workspace: a pod (plain, or made by the agent-sandbox controller for a Sandbox), created on
 * first use or attached to by ref. Each command is one pod exec of {@link #WRAPPER}, which marks
 * every process of the command with an environment variable ({@link #MARKER}{@code ID}): an exec
 * cannot be killed through the API, so a kill is a second exec that kills the marked tree ({@link
 * #KILL_TREE}), daemons that called {@code setsid} included (they keep their environment). Both
 * execs run as the container's user, which can read its own processes' environ. Files go through
 * commands ({@code CommandFileSystem}): {@code cat}, {@code dd} and friends over exec, stdin
 * binary-safe. State: {@code namespace}, {@code name} and {@code pod} are set once, under {@code
 * this}.
 */
final class KubernetesWorkspace implements WorkspaceBackend, SupportsCommands {
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final System.Logger LOG = System.getLogger(KubernetesWorkspace.class.getName());

  static final String MARKER = "SANDBOX4J_COMMAND=";

  /**
   * The command line of every command: {@code sh -c WRAPPER sandbox4j-exec SANDBOX4J_COMMAND=ID},
   * short and the same for every command (an API server, and the mock's, bounds the length of the
   * exec URL that carries it). The command itself comes first on stdin, as a frame ({@code
   * LENGTH\n} and that many bytes; {@code head -c} reads exactly those) holding a {@link #prelude}:
   * it exports the command's env (the exec API has none), enters the working directory and sets the
   * positional parameters to the argv. The wrapper exports the marker, which every process of the
   * command inherits; it is also the wrapper's own argument, so that a kill finds the command from
   * the moment the wrapper starts: one that comes before the wrapper has started any process (the
   * caller's stdin failed at once, under load) found nothing to kill, and the stdin end that
   * followed the kill let the command run to completion on a truncated input.
   *
   * <p>stdin: without it, the command gets {@code /dev/null}; with it, further frames carry it,
   * {@code 0\n} its end, decoded into a FIFO that is the command's stdin, so that the command sees
   * EOF where the caller's stdin ended (a v4 exec cannot close stdin alone). An asynchronous list's
   * stdin is /dev/null in a non-interactive shell, so the decoder gets the exec's stdin through fd
   * 3; its stderr is /dev/null so that it never holds the exec's output open.
   *
   * <p>stdout and stderr: a kubelet ends an exec only once every process holding its output has
   * closed it (kubernetes/kubernetes#44371), so a command that leaves a background child would hold
   * the run until the child ends. The command writes into two FIFOs instead, which two {@code cat}s
   * relay to the exec's output. Once the command exits the wrapper waits for the relays to end
   * (every writer gone); a timer stops that wait after the drain grace ({@link
   * ProcessCommands#DRAIN_GRACE}, as the other backends keep output that late): it first gives each
   * FIFO to a detached drainer that reads it to its end and drops it, so that a child still writing
   * never gets SIGPIPE, then kills the relays. The timer opens each FIFO read-write and then
   * read-only before closing the first descriptor (it never blocks on the open, and the drainer
   * still sees EOF once the last writer is gone), and only then forks the drainers and kills the
   * relays: a FIFO always has a reader. (The drainers used to open their FIFOs themselves, in
   * subshells the kill did not wait for; on a loaded machine a relay could die first, the wrapper
   * then removed the FIFOs, the drainer's open failed, and the child's next write got SIGPIPE: a
   * conformance rule failed in CI, and a 0.2 s delay before the open reproduces it.) Needs POSIX
   * sh, {@code mktemp}, {@code mkfifo}, {@code cat}, {@code sleep} and {@code head}.
   */
  static final String WRAPPER =
      """
      export "$1"
      d=$(mktemp -d) || exit 1
      IFS= read -r n && head -c "$n" >"$d/args" || { rm -rf "$d"; exit 1; }
      . "$d/args"
      mkfifo "$d/o" "$d/e" || { rm -rf "$d"; exit 1; }
      cat "$d/o" & o=$!
      cat "$d/e" >&2 & e=$!
      if [ "$s4j_stdin" = 0 ]; then
        "$@" </dev/null >"$d/o" 2>"$d/e"; c=$?
      else
        mkfifo "$d/in" || exit 1
        exec 3<&0
        (while IFS= read -r n && [ "$n" -gt 0 ] 2>/dev/null; do head -c "$n" || exit; done) \
          <&3 >"$d/in" 2>/dev/null 3<&- &
        f=$!
        "$@" <"$d/in" >"$d/o" 2>"$d/e" 3<&-; c=$?
        kill $f 2>/dev/null
      fi
      { sleep %d
        exec 5<>"$d/o" 6<"$d/o" 7<>"$d/e" 8<"$d/e" 5>&- 7>&-
        cat <&6 6<&- 8<&- &
        cat <&8 6<&- 8<&- &
        exec 6<&- 8<&-
        kill $o $e; } </dev/null >/dev/null 2>&1 &
      t=$!
      wait $o $e
      kill $t 2>/dev/null; rm -rf "$d"; exit $c
      """
          .formatted(ProcessCommands.DRAIN_GRACE.toSeconds());

  /** The shell text that sets up one command: env, working directory, argv, whether stdin comes. */
  static String prelude(String dir, Map<String, String> env, List<String> argv, boolean stdin) {
    StringBuilder b = new StringBuilder();
    for (Map.Entry<String, String> e : env.entrySet()) {
      b.append("export ").append(quote(e.getKey() + "=" + e.getValue())).append('\n');
    }
    b.append("cd -- ").append(quote(dir)).append(" || exit 1\n");
    b.append("s4j_stdin=").append(stdin ? 1 : 0).append('\n');
    b.append("set --");
    for (String a : argv) {
      b.append(' ').append(quote(a));
    }
    return b.append('\n').toString();
  }

  /** Single quotes keep every byte but NUL (which no argument or env value holds) literal. */
  private static String quote(String s) {
    return "'" + s.replace("'", "'\\''") + "'";
  }

  /**
   * Kills every process whose arguments or environment hold {@code SANDBOX4J_COMMAND=$1}, and their
   * descendants.
   */
  static final String KILL_TREE =
      MarkedTrees.killScript(MarkedTrees.MarkerIn.CMDLINE_OR_ENVIRON, MARKER);

  private final KubernetesSandbox sandboxes;
  private final boolean attach;
  private String namespace;
  private String name;
  private ClusterResources.RunningPod pod;

  KubernetesWorkspace(KubernetesSandbox sandboxes, String namespace, String name) {
    this.sandboxes = sandboxes;
    this.attach = name != null;
    this.namespace = namespace;
    this.name = name;
  }

  @Override
  public synchronized Optional<WorkspaceRef> ref() {
    return Optional.ofNullable(name)
        .map(n -> new WorkspaceRef(KubernetesSandbox.NAME, sandboxes.idOf(namespace, n)));
  }

  @Override
  public String workingDirectory() {
    return acquire().workingDirectory();
  }

  /** Creates the workspace, or finds the attached one's pod (waking a suspended Sandbox). */
  private synchronized ClusterResources.RunningPod acquire() {
    if (pod != null) {
      return pod;
    }
    ClusterResources resources = sandboxes.resources();
    if (attach) {
      pod =
          resources
              .existing(namespace, name)
              .orElseThrow(
                  () ->
                      new WorkspaceUnavailableException(
                          "sandbox k8s:"
                              + namespace
                              + "/"
                              + name
                              + " is gone (no Pod or Sandbox of that name)"));
      return pod;
    }
    sandboxes.beforeCreate().run();
    String fresh = "s4j-" + HexFormat.of().formatHex(randomBytes(6));
    namespace = sandboxes.options.namespace(resources.client());
    if (sandboxes.options.warmPool == null) {
      name = fresh; // known before the wait, so that a workspace slow to start can be destroyed
    }
    pod = resources.create(fresh);
    name = pod.name();
    return pod;
  }

  private static byte[] randomBytes(int n) {
    byte[] b = new byte[n];
    RANDOM.nextBytes(b);
    return b;
  }

  @Override
  public CommandResult run(Command command, RunOptions options) {
    ClusterResources.RunningPod target = acquire();
    long clockStart = System.nanoTime();
    String commandId = HexFormat.of().formatHex(randomBytes(8));
    boolean framed = options.stdin().isPresent();
    List<String> argv = List.of("/bin/sh", "-c", WRAPPER, "sandbox4j-exec", MARKER + commandId);
    byte[] prelude =
        prelude(target.workingDirectory(), options.env(), command.toArgv(), framed)
            .getBytes(StandardCharsets.UTF_8);
    PodExecProcess.Outcome outcome = new PodExecProcess.Outcome();
    PodExecProcess process =
        new PodExecProcess(exec(target, argv, true, outcome), prelude, framed, outcome);
    try {
      CommandResult result =
          ProcessCommands.await(
              process,
              process.getInputStream(),
              process.getErrorStream(),
              options,
              clockStart,
              () -> kill(target, commandId));
      if (process.cut()) {
        kill(target, commandId);
        if (!sandboxes.resources().podExists(target.namespace(), target.name())) {
          throw gone(target, null);
        }
        throw new WorkspaceException(
            "the exec stream of a command in sandbox "
                + describe(target)
                + " ended without its exit status (connection cut); the command was killed");
      }
      // killed by a signal: by the pod's end (destroyed, evicted, suspended) or by the command's
      // own
      if (result.exitCode() > 128
          && !sandboxes.resources().podExists(target.namespace(), target.name())) {
        throw gone(target, null);
      }
      if (process.failure() != null) {
        throw new WorkspaceException(
            "cannot run a command in sandbox " + describe(target) + ": " + process.failure());
      }
      return result;
    } finally {
      process.release();
    }
  }

  private ExecWatch exec(
      ClusterResources.RunningPod target, List<String> argv, boolean stdin, ExecListener listener) {
    try {
      PodResource pod =
          sandboxes
              .resources()
              .client()
              .pods()
              .inNamespace(target.namespace())
              .withName(target.name());
      TtyExecOutputErrorable in =
          stdin
              ? pod.inContainer(target.container()).redirectingInput()
              : pod.inContainer(target.container());
      return in.redirectingOutput()
          .redirectingError()
          .usingListener(listener)
          .exec(argv.toArray(String[]::new));
    } catch (KubernetesClientException e) {
      if (e.getCode() == 404
          || !sandboxes.resources().podExists(target.namespace(), target.name())) {
        throw gone(target, e);
      }
      throw new WorkspaceException(
          "cannot run a command in sandbox " + describe(target) + ": " + e.getMessage(), e);
    }
  }

  /**
   * Kills every process of command {@code commandId}, on a thread of its own that this one waits
   * for: the caller is often a thread being cancelled, whose interrupt flag would break the call.
   */
  private void kill(ClusterResources.RunningPod target, String commandId) {
    Thread killing =
        Thread.ofVirtual()
            .name("sandbox4j-k8s-kill-" + commandId)
            .start(() -> killNow(target, commandId));
    boolean interrupted = false;
    while (true) {
      try {
        killing.join();
        break;
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  private void killNow(ClusterResources.RunningPod target, String commandId) {
    PodExecProcess.Outcome outcome = new PodExecProcess.Outcome();
    try {
      ExecWatch killer =
          exec(target, List.of("/bin/sh", "-c", KILL_TREE, "kill-tree", commandId), false, outcome);
      try {
        int code = outcome.future.get(30, TimeUnit.SECONDS).code();
        if (code != 0) {
          LOG.log(
              System.Logger.Level.WARNING,
              "sandbox {0}: killing command {1} ended with {2}: a process may be left",
              describe(target),
              commandId,
              code);
        }
      } finally {
        killer.close();
      }
    } catch (Exception e) {
      // the pod is gone (nothing left to kill), or the kill could not run: said, so that a
      // command left running is never a silent mystery
      LOG.log(
          System.Logger.Level.WARNING,
          "sandbox {0}: cannot kill command {1}: {2}",
          describe(target),
          commandId,
          e.getMessage());
      if (e instanceof InterruptedException) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private static String describe(ClusterResources.RunningPod target) {
    return KubernetesSandbox.NAME + ":" + target.namespace() + "/" + target.name();
  }

  private WorkspaceUnavailableException gone(ClusterResources.RunningPod target, Exception cause) {
    return new WorkspaceUnavailableException(
        "sandbox "
            + describe(target)
            + " is gone (destroyed, its pod deleted, suspended, or the cluster unreachable)"
            + (cause == null ? "" : ": " + cause.getMessage()),
        cause);
  }
}
