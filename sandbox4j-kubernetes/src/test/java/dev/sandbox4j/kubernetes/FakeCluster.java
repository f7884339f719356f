package dev.sandbox4j.kubernetes;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodConditionBuilder;
import io.fabric8.kubernetes.api.model.PodStatusBuilder;
import io.fabric8.kubernetes.client.NamespacedKubernetesClient;
import io.fabric8.kubernetes.client.dsl.base.CustomResourceDefinitionContext;
import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import io.fabric8.mockwebserver.http.MockResponse;
import io.fabric8.mockwebserver.http.RecordedRequest;
import io.fabric8.mockwebserver.http.WebSocket;
import io.fabric8.mockwebserver.http.WebSocketListener;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A FAKE Kubernetes cluster for tests: fabric8's mock API server ({@code kubernetes-server-mock}
 * 8.0.0) in CRUD mode for every object, plus a test-side "kubelet" and, optionally, a test-side
 * agent-sandbox controller ({@link FakeAgentSandboxController}). No real cluster is reachable from
 * this machine; this is built from the documented protocol, not from what the client does:
 *
 * <ul>
 *   <li><b>Pod exec</b> ({@code GET /api/v1/namespaces/NS/pods/POD/exec?command=..&stdin=..}),
 *       upgraded to a WebSocket with subprotocol {@code v4.channel.k8s.io} (the newest the mock's
 *       server negotiates). Each binary frame starts with its channel byte: 0 stdin (client to
 *       server), 1 stdout, 2 stderr, 3 the exit status, a {@code Status} JSON ({@code Success}, or
 *       {@code Failure} with reason {@code NonZeroExitCode} and a cause of reason {@code ExitCode}
 *       whose message is the code), after which the server closes. (Kubernetes' {@code
 *       remotecommand} protocol; kubelet's {@code NonZeroExitCode} status.)
 *   <li>The command really runs, as a process of this host (the fake cannot make containers): with
 *       the pod container's env (and a default {@code PATH}) and nothing of the host's, in the
 *       container's working directory. A pod's processes are killed when it is deleted. A closed
 *       connection closes the process's stdin but does not kill it (as a kubelet does not).
 *   <li>Differences from a real cluster: no isolation (the "pod" filesystem is the host's); the
 *       kubelet, on starting a pod, creates a fresh host directory and writes it into the
 *       container's {@code workingDir} (as a mutating admission webhook could), since a host path
 *       is all its processes see; pods are Ready at once; there is no garbage collection by owner
 *       reference (the controller fake does what the tests need). A pod's processes carry {@link
 *       #POD_MARKER} in their environment, the fake's stand-in for the pod's cgroup: deleting the
 *       pod kills them all in one pass.
 *   <li>The status is sent once the process has exited <em>and</em> both of its output pipes have
 *       ended, however long a background child holds them: that is what a kubelet does ({@code
 *       kubectl exec pod -- sh -c 'sleep 100 &'} returns when {@code sleep} ends: kubernetes/
 *       kubernetes#44371, cri-o/cri-o#7640, kata-containers#4747; Docker's exec likewise,
 *       moby/moby#33039). When the process exits its stdin is closed, as the runtime's is.
 *   <li>stdin is bounded: the kubelet writes it into the process's pipe and stops reading the
 *       stream while the pipe is full, which TCP carries back to the client. The fake keeps at most
 *       {@link #STDIN_WINDOW} bytes that the process has not read, then pauses reading the
 *       WebSocket (the mock's Vert.x socket, reached by reflection: the mock's own {@code
 *       WebSocket} has no pause) until the process reads.
 *   <li>Faults: {@link #cutExecsPrinting} makes the server close an exec's WebSocket without a
 *       status once its output shows a marker, leaving the process running.
 * </ul>
 */
public final class FakeCluster implements AutoCloseable {
  /**
   * The mock server logs every request at INFO: kept quiet (a strong reference keeps the level).
   */
  private static final java.util.logging.Logger MOCK_LOG = quiet("io.fabric8.mockwebserver");

  private static java.util.logging.Logger quiet(String name) {
    java.util.logging.Logger log = java.util.logging.Logger.getLogger(name);
    log.setLevel(java.util.logging.Level.WARNING);
    return log;
  }

  /** The environment variable that marks every process of a pod (its value: the pod's uid). */
  static final String POD_MARKER = "FAKE_KUBELET_POD=";

  private static final String KILL_POD =
      dev.sandbox4j.workspace.spi.MarkedTrees.killScript(
          dev.sandbox4j.workspace.spi.MarkedTrees.MarkerIn.ENVIRON, POD_MARKER);

  /** Unread stdin bytes the fake holds for a process before it stops reading the stream. */
  static final int STDIN_WINDOW = 256 * 1024;

  private static final Pattern PORT_FORWARD =
      Pattern.compile(
          "/api/v1/namespaces/([^/]+)/pods/([^/?]+)/portforward\\?(?:.*&)?ports=(\\d+).*");

  private static final Pattern EXEC =
      Pattern.compile("/api/v1/namespaces/([^/]+)/pods/([^/?]+)/exec\\?(.*)");

  final KubernetesMockServer server;
  final NamespacedKubernetesClient client;
  private final NamespacedKubernetesClient control;
  private final Path nodeRoot;
  private final boolean agentSandbox;
  private final Set<String> cutMarkers = ConcurrentHashMap.newKeySet();
  private final Map<String, List<Process>> processesByPod = new ConcurrentHashMap<>();
  private final Map<String, String> uidByPod = new ConcurrentHashMap<>();
  private final Set<String> started = ConcurrentHashMap.newKeySet();
  private final Thread kubelet;
  private final FakeAgentSandboxController controller;
  private volatile boolean closed;
  final List<String> execCommands = new CopyOnWriteArrayList<>();

  /**
   * Starts the mock API server, the kubelet and, with {@code agentSandbox}, the controller.
   *
   * @param nodeRoot where the kubelet makes each pod's directory
   * @param agentSandbox whether the cluster serves the agent-sandbox CRDs
   */
  public FakeCluster(Path nodeRoot, boolean agentSandbox) {
    this.nodeRoot = nodeRoot;
    this.agentSandbox = agentSandbox;
    Dispatcher dispatcher = new Dispatcher();
    server =
        new KubernetesMockServer(
            new Context(Serialization.jsonMapper()),
            new MockWebServer(),
            new HashMap<>(),
            dispatcher,
            false);
    if (agentSandbox) {
      for (String[] crd :
          new String[][] {
            {"agents.x-k8s.io", "Sandbox", "sandboxes"},
            {"extensions.agents.x-k8s.io", "SandboxClaim", "sandboxclaims"},
            {"extensions.agents.x-k8s.io", "SandboxTemplate", "sandboxtemplates"},
            {"extensions.agents.x-k8s.io", "SandboxWarmPool", "sandboxwarmpools"}
          }) {
        dispatcher.expectCustomResource(
            new CustomResourceDefinitionContext.Builder()
                .withGroup(crd[0])
                .withVersion("v1beta1")
                .withKind(crd[1])
                .withPlural(crd[2])
                .withScope("Namespaced")
                .build());
      }
    }
    server.init();
    client = server.createClient();
    control = server.createClient();
    kubelet = Thread.ofPlatform().daemon().name("fake-kubelet").start(this::runKubelet);
    controller = agentSandbox ? new FakeAgentSandboxController(control) : null;
  }

  /**
   * Writes a kubeconfig for this cluster (its URL, a context whose namespace is {@code namespace})
   * into {@code dir}, as a user's {@code KUBECONFIG} would point at a real one; returns its path.
   */
  public Path writeKubeconfig(Path dir, String namespace) throws IOException {
    String url = client.getConfiguration().getMasterUrl();
    String yaml =
        """
        apiVersion: v1
        kind: Config
        clusters:
        - name: fake
          cluster:
            server: %s
        users:
        - name: fake
          user:
            token: fake-token
        contexts:
        - name: fake
          context:
            cluster: fake
            user: fake
            namespace: %s
        current-context: fake
        """
            .formatted(url, namespace);
    return Files.writeString(dir.resolve("kubeconfig"), yaml);
  }

  /** The pods of {@code namespace}, by name: what a test sees on the cluster. */
  public List<String> podNames(String namespace) {
    return control.pods().inNamespace(namespace).list().getItems().stream()
        .map(p -> p.getMetadata().getName())
        .toList();
  }

  @Override
  public String toString() {
    return "FakeCluster[" + client.getConfiguration().getMasterUrl() + "]";
  }

  /** Execs whose stdout includes {@code marker} are cut there, with no status, left running. */
  void cutExecsPrinting(String marker) {
    cutMarkers.add(marker);
  }

  NamespacedKubernetesClient control() {
    return control;
  }

  /** Stops the kubelet and the controller, kills every pod's processes, stops the server. */
  @Override
  public void close() {
    closed = true;
    if (controller != null) {
      controller.close();
    }
    kubelet.interrupt();
    List<Thread> kills = new ArrayList<>();
    for (String pod : new ArrayList<>(processesByPod.keySet())) {
      kills.add(killPod(pod));
    }
    for (Thread kill : kills) {
      try {
        kill.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    client.close();
    control.close();
    server.destroy();
  }

  /** Starts new pods (Ready, a fresh directory), kills the processes of deleted ones. */
  private void runKubelet() {
    while (!closed) {
      try {
        Set<String> live = new java.util.HashSet<>();
        for (Pod pod : control.pods().inAnyNamespace().list().getItems()) {
          String key = pod.getMetadata().getNamespace() + "/" + pod.getMetadata().getName();
          live.add(key);
          if (started.add(key + "@" + pod.getMetadata().getUid())) {
            if (uidByPod.containsKey(key)) {
              killPod(key); // replaced by a pod of the same name between two looks
            }
            uidByPod.put(key, pod.getMetadata().getUid());
            start(pod);
          }
        }
        for (String key : new ArrayList<>(processesByPod.keySet())) {
          if (!live.contains(key)) {
            killPod(key);
          }
        }
        Thread.sleep(20);
      } catch (InterruptedException e) {
        return;
      } catch (RuntimeException e) {
        if (closed) {
          return;
        }
        // a pod changed under us: look again
      }
    }
  }

  private void start(Pod pod) {
    String ns = pod.getMetadata().getNamespace();
    String name = pod.getMetadata().getName();
    Path dir;
    try {
      dir = Files.createDirectories(nodeRoot.resolve(ns).resolve(name + "-" + System.nanoTime()));
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    control
        .pods()
        .inNamespace(ns)
        .withName(name)
        .edit(
            p -> {
              for (Container c : p.getSpec().getContainers()) {
                c.setWorkingDir(dir.toString());
              }
              return p;
            });
    control
        .pods()
        .inNamespace(ns)
        .withName(name)
        .editStatus(
            p -> {
              p.setStatus(
                  new PodStatusBuilder()
                      .withPhase("Running")
                      .withPodIP("10.244.0." + (1 + Math.floorMod(name.hashCode(), 250)))
                      .withConditions(
                          new PodConditionBuilder().withType("Ready").withStatus("True").build())
                      .build());
              return p;
            });
  }

  /**
   * Kills every process of the pod, daemons that left the exec's tree included, on a thread of its
   * own: one pass over this host's processes costs about half a second, and the kubelet loop must
   * go on starting other pods meanwhile.
   */
  private Thread killPod(String key) {
    List<Process> processes = processesByPod.remove(key);
    String uid = uidByPod.remove(key);
    return Thread.ofVirtual()
        .name("fake-kubelet-kill-" + key)
        .start(
            () -> {
              if (uid != null) {
                killMarked(uid);
              }
              if (processes != null) {
                for (Process p : processes) {
                  p.descendants().forEach(ProcessHandle::destroyForcibly);
                  p.destroyForcibly();
                }
              }
            });
  }

  /** Kills this host's processes of the pod whose uid is {@code uid}. */
  private static void killMarked(String uid) {
    try {
      Process killer =
          new ProcessBuilder("/bin/sh", "-c", KILL_POD, "kill-pod", uid)
              .redirectErrorStream(true)
              .redirectOutput(ProcessBuilder.Redirect.DISCARD)
              .start();
      killer.waitFor(10, TimeUnit.SECONDS);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** CRUD for everything, plus exec and the discovery of agent-sandbox's API groups. */
  private final class Dispatcher extends KubernetesCrudDispatcher {
    @Override
    public MockResponse dispatch(RecordedRequest request) {
      String path = request.getPath();
      Matcher exec = EXEC.matcher(path);
      if (exec.matches()) {
        // this runs on the server's event loop: read the store directly, never through a client
        MockResponse found =
            handleGet("/api/v1/namespaces/" + exec.group(1) + "/pods/" + exec.group(2));
        Pod pod =
            found.code() == 200
                ? control
                    .getKubernetesSerialization()
                    .unmarshal(found.getBody().readUtf8(), Pod.class)
                : null;
        try {
          return exec(pod, exec.group(1), exec.group(2), exec.group(3));
        } catch (RuntimeException e) {
          System.err.println("FAKE EXEC FAILED " + path);
          e.printStackTrace();
          throw e;
        }
      }
      Matcher forward = PORT_FORWARD.matcher(path);
      if (forward.matches()) {
        MockResponse found =
            handleGet("/api/v1/namespaces/" + forward.group(1) + "/pods/" + forward.group(2));
        if (found.code() != 200) {
          return notFound("pods \\\"" + forward.group(2) + "\\\" not found");
        }
        return new MockResponse()
            .withWebSocketUpgrade(new PortForwardSession(Integer.parseInt(forward.group(3))));
      }
      if (path.equals("/apis/agents.x-k8s.io") || path.equals("/apis/extensions.agents.x-k8s.io")) {
        if (!agentSandbox) {
          return notFound("the server could not find the requested resource");
        }
        String group = path.substring("/apis/".length());
        return new MockResponse()
            .setResponseCode(200)
            .setBody(
                """
                {"kind":"APIGroup","apiVersion":"v1","name":"%s",\
                "versions":[{"groupVersion":"%s/v1beta1","version":"v1beta1"}],\
                "preferredVersion":{"groupVersion":"%s/v1beta1","version":"v1beta1"}}"""
                    .formatted(group, group, group));
      }
      MockResponse response = super.dispatch(request);
      WebSocketListener watch = response.getWebSocketListener();
      if (watch != null && WATCH.matcher(path).find()) {
        response.withWebSocketUpgrade(new WatchClosedOffTheEventLoop(watch));
      }
      return response;
    }
  }

  /** A watch request ({@code ?watch=true}, also among other parameters). */
  private static final Pattern WATCH = Pattern.compile("[?&]watch=true(&|$)");

  /**
   * The mock's watch, whose end is handled away from the server's event loop. The mock's {@code
   * WatchEventsListener} waits in {@code onClosed} (and {@code onFailure}) for its sender thread,
   * which may itself be waiting for a write that only that event loop completes: every connection
   * of the server then stalls for 30 s. fabric8's client opens and closes a watch of the pod before
   * each exec ({@code PodOperationUtil.waitUntilReadyOrTerminal}), so a stalled exec's stdin failed
   * a conformance rule in CI. The watch's events and protocol stay the mock's own.
   */
  private static final class WatchClosedOffTheEventLoop extends WebSocketListener {
    private final WebSocketListener watch;

    WatchClosedOffTheEventLoop(WebSocketListener watch) {
      this.watch = watch;
    }

    @Override
    public void onBeforeAccept(WebSocket ws, io.fabric8.mockwebserver.http.Response response) {
      watch.onBeforeAccept(ws, response);
    }

    @Override
    public void onOpen(WebSocket ws, io.fabric8.mockwebserver.http.Response response) {
      watch.onOpen(ws, response);
    }

    @Override
    public void onMessage(WebSocket ws, String text) {
      watch.onMessage(ws, text);
    }

    @Override
    public void onMessage(WebSocket ws, io.fabric8.mockwebserver.http.ByteString bytes) {
      watch.onMessage(ws, bytes);
    }

    @Override
    public void onMessage(WebSocket ws, byte[] bytes) {
      watch.onMessage(ws, bytes);
    }

    @Override
    public void onPing(WebSocket ws, byte[] data) {
      watch.onPing(ws, data);
    }

    @Override
    public void onClosing(WebSocket ws, int code, String reason) {
      watch.onClosing(ws, code, reason);
    }

    @Override
    public void onClosed(WebSocket ws, int code, String reason) {
      Thread.ofPlatform()
          .daemon()
          .name("fake-watch-closed")
          .start(() -> watch.onClosed(ws, code, reason));
    }

    @Override
    public void onFailure(
        WebSocket ws, Throwable failure, io.fabric8.mockwebserver.http.Response response) {
      Thread.ofPlatform()
          .daemon()
          .name("fake-watch-failed")
          .start(() -> watch.onFailure(ws, failure, response));
    }
  }

  private static MockResponse notFound(String message) {
    return new MockResponse()
        .setResponseCode(404)
        .setBody(
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\""
                + message
                + "\",\"reason\":\"NotFound\",\"code\":404}");
  }

  /** The Vert.x socket under the mock's WebSocket, whose reading can be paused. */
  private static io.vertx.core.http.ServerWebSocket vertxSocket(WebSocket ws) {
    try {
      java.lang.reflect.Field f = ws.getClass().getDeclaredField("webSocket");
      f.setAccessible(true);
      return (io.vertx.core.http.ServerWebSocket) f.get(ws);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(
          "the mock server's WebSocket is not the Vert.x one this fake was written for", e);
    }
  }

  private MockResponse exec(Pod pod, String ns, String podName, String query) {
    if (pod == null) {
      return notFound("pods \\\"" + podName + "\\\" not found");
    }
    List<String> command = new ArrayList<>();
    Map<String, String> flags = new HashMap<>();
    String container = null;
    for (String pair : query.split("&")) {
      int eq = pair.indexOf('=');
      String key = URLDecoder.decode(pair.substring(0, eq), StandardCharsets.UTF_8);
      String value = URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8);
      switch (key) {
        case "command" -> command.add(value);
        case "container" -> container = value;
        default -> flags.put(key, value);
      }
    }
    Container c = pod.getSpec().getContainers().getFirst();
    for (Container each : pod.getSpec().getContainers()) {
      if (each.getName().equals(container)) {
        c = each;
      }
    }
    execCommands.add(String.join(" ", command));
    return new MockResponse()
        .withWebSocketUpgrade(
            new ExecSession(
                ns + "/" + podName,
                pod.getMetadata().getUid(),
                c,
                command,
                "true".equals(flags.get("stdin"))));
  }

  /**
   * One port-forward connection ({@code GET .../pods/POD/portforward?ports=P} upgraded to a
   * WebSocket): as the kubelet's streaming server does, the first frame on each of the port's two
   * channels (0 data, 1 error) is the port number, two bytes little-endian; then data frames on
   * channel 0 both ways, and a connection the pod refuses is a message on channel 1. The fake's
   * pods share this host's network, so the pod's port is this host's loopback port.
   */
  private static final class PortForwardSession extends WebSocketListener {
    private final int port;
    private volatile java.net.Socket socket;

    PortForwardSession(int port) {
      this.port = port;
    }

    private byte[] frame(int channel, byte[] body, int length) {
      byte[] frame = new byte[length + 1];
      frame[0] = (byte) channel;
      System.arraycopy(body, 0, frame, 1, length);
      return frame;
    }

    @Override
    public void onOpen(WebSocket ws, io.fabric8.mockwebserver.http.Response response) {
      byte[] portBytes = {(byte) (port & 0xff), (byte) (port >> 8)};
      ws.send(frame(0, portBytes, 2));
      ws.send(frame(1, portBytes, 2));
      try {
        socket = new java.net.Socket(java.net.InetAddress.getLoopbackAddress(), port);
      } catch (IOException e) {
        byte[] error =
            ("error forwarding port " + port + ": " + e.getMessage())
                .getBytes(StandardCharsets.UTF_8);
        ws.send(frame(1, error, error.length));
        ws.close(1000, "");
        return;
      }
      java.net.Socket connected = socket;
      Thread.ofVirtual()
          .start(
              () -> {
                byte[] buf = new byte[16 * 1024];
                try (InputStream in = connected.getInputStream()) {
                  int n;
                  while ((n = in.read(buf)) > 0) {
                    ws.send(frame(0, buf, n));
                  }
                } catch (IOException e) {
                  // the connection ended
                }
                ws.close(1000, "");
              });
    }

    @Override
    public void onMessage(WebSocket ws, byte[] bytes) {
      java.net.Socket s = socket;
      if (s == null || bytes.length < 2 || bytes[0] != 0) {
        return;
      }
      try {
        s.getOutputStream().write(bytes, 1, bytes.length - 1);
      } catch (IOException e) {
        ws.close(1000, "");
      }
    }

    @Override
    public void onClosed(WebSocket ws, int code, String reason) {
      java.net.Socket s = socket;
      if (s != null) {
        try {
          s.close();
        } catch (IOException e) {
          // closed already
        }
      }
    }
  }

  /** One exec: a host process whose streams are framed onto the WebSocket's channels. */
  private final class ExecSession extends WebSocketListener {
    private final String podKey;
    private final String podUid;
    private final Container container;
    private final List<String> command;
    private final boolean stdin;
    private volatile Process process;
    private volatile boolean cut;

    /** stdin frames, written by a thread of their own: never block the server's event loop. */
    private final java.util.concurrent.LinkedBlockingQueue<byte[]> input =
        new java.util.concurrent.LinkedBlockingQueue<>();

    /** Bytes received and not yet written to the process: bounded by pausing the socket. */
    private final java.util.concurrent.atomic.AtomicLong unread =
        new java.util.concurrent.atomic.AtomicLong();

    private io.vertx.core.http.ServerWebSocket socket;
    private io.vertx.core.Context loop;
    private volatile boolean paused; // changed on the socket's event loop only
    private volatile boolean discarding; // the process reads no more: frames are dropped

    ExecSession(
        String podKey, String podUid, Container container, List<String> command, boolean stdin) {
      this.podKey = podKey;
      this.podUid = podUid;
      this.container = container;
      this.command = command;
      this.stdin = stdin;
    }

    /**
     * Pauses or resumes reading the socket so that at most {@link #STDIN_WINDOW} unread bytes wait;
     * decided on the socket's event loop from the count at that moment, so the last decision
     * follows the last change.
     */
    private void adjust() {
      loop.runOnContext(
          v -> {
            boolean full = unread.get() > STDIN_WINDOW && !discarding;
            if (full && !paused) {
              socket.pause();
              paused = true;
            } else if (!full && paused) {
              socket.resume();
              paused = false;
            }
          });
    }

    @Override
    public void onOpen(WebSocket ws, io.fabric8.mockwebserver.http.Response response) {
      socket = vertxSocket(ws);
      loop = io.vertx.core.Vertx.currentContext();
      ProcessBuilder pb = new ProcessBuilder(command);
      pb.environment().clear();
      pb.environment().put("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
      pb.environment().put("HOSTNAME", podKey.substring(podKey.indexOf('/') + 1));
      pb.environment().put(POD_MARKER.substring(0, POD_MARKER.length() - 1), podUid);
      if (container.getEnv() != null) {
        for (EnvVar e : container.getEnv()) {
          pb.environment().put(e.getName(), e.getValue() == null ? "" : e.getValue());
        }
      }
      pb.directory(new File(container.getWorkingDir()));
      if (!stdin) {
        pb.redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
      }
      try {
        process = pb.start();
      } catch (IOException e) {
        // what a kubelet says when the runtime cannot start the command
        sendStatus(
            ws,
            "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"exec failed: "
                + e.getMessage().replace("\"", "'")
                + "\",\"reason\":\"InternalError\"}");
        return;
      }
      processesByPod.computeIfAbsent(podKey, k -> new CopyOnWriteArrayList<>()).add(process);
      Process started = process;
      Thread.ofVirtual()
          .start(
              () -> {
                OutputStream in = started.getOutputStream();
                try {
                  while (true) {
                    byte[] chunk = input.take();
                    if (chunk.length == 0) {
                      in.close();
                      return;
                    }
                    in.write(chunk);
                    in.flush();
                    unread.addAndGet(-chunk.length);
                    if (paused) {
                      adjust();
                    }
                  }
                } catch (IOException | InterruptedException e) {
                  // the command closed its stdin, or ended
                } finally {
                  discarding = true;
                  input.clear();
                  adjust();
                }
              });
      Thread out = pump(ws, process.getInputStream(), (byte) 1, true);
      Thread err = pump(ws, process.getErrorStream(), (byte) 2, false);
      Thread.ofVirtual()
          .start(
              () -> {
                try {
                  int code = process.waitFor();
                  try {
                    started.getOutputStream().close(); // the runtime closes an exited exec's stdin
                  } catch (IOException e) {
                    // already closed
                  }
                  out.join();
                  err.join();
                  if (cut) {
                    return;
                  }
                  sendStatus(
                      ws,
                      code == 0
                          ? "{\"metadata\":{},\"status\":\"Success\"}"
                          : ("{\"metadata\":{},\"status\":\"Failure\",\"message\":\"command"
                                  + " terminated with non-zero exit code: exit status %d\","
                                  + "\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":"
                                  + "[{\"reason\":\"ExitCode\",\"message\":\"%d\"}]}}")
                              .formatted(code, code));
                } catch (InterruptedException e) {
                  Thread.currentThread().interrupt();
                }
              });
    }

    private Thread pump(WebSocket ws, InputStream from, byte channel, boolean mayCut) {
      return Thread.ofVirtual()
          .start(
              () -> {
                byte[] buf = new byte[32 * 1024];
                try {
                  int n;
                  while ((n = from.read(buf)) > 0) {
                    if (cut) {
                      continue; // nobody listens: keep the process's pipe drained
                    }
                    byte[] frame = new byte[n + 1];
                    frame[0] = channel;
                    System.arraycopy(buf, 0, frame, 1, n);
                    ws.send(frame);
                    String text = new String(buf, 0, n, StandardCharsets.ISO_8859_1);
                    if (mayCut && cutMarkers.stream().anyMatch(text::contains)) {
                      cut = true;
                      ws.close(1000, "fake: connection cut");
                    }
                  }
                } catch (IOException e) {
                  // the process is gone
                }
              });
    }

    private void sendStatus(WebSocket ws, String json) {
      byte[] body = json.getBytes(StandardCharsets.UTF_8);
      byte[] frame = new byte[body.length + 1];
      frame[0] = 3;
      System.arraycopy(body, 0, frame, 1, body.length);
      ws.send(frame);
      ws.close(1000, "");
    }

    @Override
    public void onMessage(WebSocket ws, byte[] bytes) {
      if (bytes.length < 2 || bytes[0] != 0) {
        return; // resize (4) and anything else: no TTY here
      }
      if (discarding) {
        return;
      }
      unread.addAndGet(bytes.length - 1);
      input.add(java.util.Arrays.copyOfRange(bytes, 1, bytes.length));
      if (unread.get() > STDIN_WINDOW) {
        adjust();
      }
    }

    @Override
    public void onMessage(WebSocket ws, String text) {
      onMessage(ws, text.getBytes(StandardCharsets.UTF_8));
    }

    @Override
    public void onClosed(WebSocket ws, int code, String reason) {
      input.add(new byte[0]); // the connection's end is stdin's end
    }
  }
}
