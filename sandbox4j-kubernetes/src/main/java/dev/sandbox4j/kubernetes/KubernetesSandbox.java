package dev.sandbox4j.kubernetes;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SupportsListing;
import dev.sandbox4j.workspace.machine.SupportsPorts;
import dev.sandbox4j.workspace.machine.SupportsSuspend;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.KubernetesClientException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The {@value #NAME} provider: workspaces in Kubernetes pods, reached through the Kubernetes API
 * (the fabric8 client). Commands and files go through the pod exec API; a timeout or cancellation
 * kills the command's whole process tree inside the pod by a second exec.
 *
 * <p>Two modes ({@link Mode}): on a cluster with the {@code agents.x-k8s.io} API (the Kubernetes
 * SIG Apps <a href="https://github.com/kubernetes-sigs/agent-sandbox">agent-sandbox</a> controller)
 * a workspace is a {@code Sandbox} (or a {@code SandboxClaim} against a {@code SandboxWarmPool},
 * {@link Builder#warmPool}), which the controller turns into a pod; elsewhere it is a plain Pod
 * this provider creates. {@link Mode#AUTO} (the default) asks the API server's discovery which one
 * the cluster has, once per provider.
 *
 * <p>Suspend ({@link SupportsSuspend}) exists in sandbox mode only: the controller deletes the pod
 * (memory is not kept; volume claims are) and makes a new one on resume. In pod mode it fails with
 * a clear error.
 *
 * <p>Building the provider does no I/O; the first operation of a workspace creates or attaches it.
 * A workspace's ref id is {@code NAMESPACE/NAME}. Thread-safe.
 */
public final class KubernetesSandbox
    implements WorkspaceProvider, SupportsSuspend, SupportsListing, SupportsPorts, AutoCloseable {

  /** The provider name in a {@link WorkspaceRef}. */
  public static final String NAME = "k8s";

  /** Where workspaces live on the cluster. */
  public enum Mode {
    /**
     * agent-sandbox's {@code Sandbox} where the cluster serves {@code agents.x-k8s.io}, else pods.
     */
    AUTO,
    /**
     * agent-sandbox's {@code Sandbox} (or {@code SandboxClaim}); fails where the CRDs are absent.
     */
    SANDBOX,
    /** A plain Pod. */
    POD
  }

  /** Which network a workspace's pod may reach, enforced by a NetworkPolicy. */
  enum EgressMode {
    /** No NetworkPolicy: whatever the cluster allows (the default). */
    UNRESTRICTED,
    /** Nothing: a policy allowing no egress (also no DNS). */
    NONE,
    /** Only the CIDR blocks given to {@link Builder#egressAllowCidrs}. */
    CIDRS,
    /** The public internet: everything except private, link-local and unique-local ranges. */
    PUBLIC
  }

  private static final Pattern DNS_LABEL = Pattern.compile("[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?");
  private static final Pattern CIDR =
      Pattern.compile(
          "(\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}/\\d{1,2})|([0-9a-fA-F:]+/\\d{1,3})");

  final Options options;
  private final boolean ownsClient;
  private final Runnable beforeCreate;
  private volatile Mode detected;

  private KubernetesSandbox(Builder b) {
    this.options = new Options(b);
    this.ownsClient = b.client == null;
    this.lazyClient = b.client;
    this.beforeCreate = b.beforeCreate;
  }

  /** Made on first use unless given; guarded by {@code this}. */
  private KubernetesClient lazyClient;

  /** A builder with the defaults: kubeconfig or in-cluster config, as {@code kubectl} finds it. */
  public static Builder builder() {
    return new Builder();
  }

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public WorkspaceBackend newBackend() {
    return new KubernetesWorkspace(this, null, null);
  }

  @Override
  public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
    if (!NAME.equals(ref.provider())) {
      return Optional.empty();
    }
    String[] nsName = parse(ref.id());
    return Optional.of(new KubernetesWorkspace(this, nsName[0], nsName[1]));
  }

  /**
   * Deletes the workspace's Sandbox (and the SandboxClaim that owns it) or Pod, its NetworkPolicy
   * and its volume claim. Idempotent: a workspace already gone is not an error.
   */
  @Override
  public void destroy(WorkspaceRef ref) {
    requireOurs(ref);
    String[] nsName = parse(ref.id());
    try {
      resources().delete(nsName[0], nsName[1]);
    } catch (KubernetesClientException e) {
      throw new WorkspaceException("cannot destroy " + ref + ": " + e.getMessage(), e);
    }
  }

  /**
   * Suspends a workspace in sandbox mode: sets the Sandbox's {@code operatingMode} to {@code
   * Suspended}, and the agent-sandbox controller deletes its pod. Memory is not kept (processes
   * end); volume claims are. A plain pod cannot be suspended: {@link
   * UnsupportedOperationException}.
   */
  @Override
  public void suspend(WorkspaceRef ref) {
    requireOurs(ref);
    String[] nsName = parse(ref.id());
    resources().setOperatingMode(nsName[0], nsName[1], "Suspended");
  }

  /**
   * Resumes a suspended workspace: {@code operatingMode} back to {@code Running}, then waits for
   * the Sandbox to be {@code Ready} again (a new pod, the same volume claims).
   */
  @Override
  public void resume(WorkspaceRef ref) {
    requireOurs(ref);
    String[] nsName = parse(ref.id());
    resources().setOperatingMode(nsName[0], nsName[1], "Running");
    resources().awaitSandboxReady(nsName[0], nsName[1]);
  }

  /**
   * Deletes every workspace of this provider's namespace labelled as made by Sandbox4j whose {@code
   * sandbox4j.dev/owner} label is {@code owner}, left behind by a process that ended without
   * destroying them; returns their refs.
   *
   * @param owner the value given to {@link Builder#owner} by the processes whose leftovers to reap
   */
  public List<WorkspaceRef> gc(String owner) {
    requireLabelValue("owner", owner);
    List<WorkspaceRef> removed = new ArrayList<>();
    for (String name : resources().listOwned(options.namespace(client()), owner)) {
      WorkspaceRef ref = new WorkspaceRef(NAME, idOf(options.namespace(client()), name));
      destroy(ref);
      removed.add(ref);
    }
    return removed;
  }

  /**
   * Every workspace of this provider's namespace and {@link Builder#owner owner}, found by label,
   * sorted by id: {@code running}, {@code starting}, or {@code suspended} (sandbox mode).
   */
  @Override
  public List<SandboxInfo> list() {
    String ns = options.namespace(client());
    List<SandboxInfo> all = new ArrayList<>();
    for (String name : resources().listOwned(ns, options.owner)) {
      resources().describe(new WorkspaceRef(NAME, idOf(ns, name)), ns, name).ifPresent(all::add);
    }
    all.sort(java.util.Comparator.comparing(i -> i.ref().id()));
    return all;
  }

  /** What {@link #list()} says of {@code ref}'s workspace, if its Pod or Sandbox exists. */
  @Override
  public Optional<SandboxInfo> info(WorkspaceRef ref) {
    requireOurs(ref);
    String[] nsName = parse(ref.id());
    return resources().describe(ref, nsName[0], nsName[1]);
  }

  /** Port forwards by {@code NAMESPACE/NAME:PORT}: one local listener per machine port. */
  private final Map<String, io.fabric8.kubernetes.client.LocalPortForward> forwards =
      new java.util.concurrent.ConcurrentHashMap<>();

  /**
   * Forwards a port on 127.0.0.1 of this host to {@code port} of the workspace's pod through the
   * API server's port-forward ({@code pods/portforward}, the same as {@code kubectl port-forward}):
   * each connection is a WebSocket to the API server, so it needs no Service, node port or network
   * path to the pod, only the API server and RBAC {@code create} on {@code pods/portforward}.
   * Asking again returns the same host port while the pod lives. No token: any local process that
   * can connect reaches the port.
   */
  @Override
  public int forwardTcp(WorkspaceRef ref, int port) {
    requireOurs(ref);
    if (port < 1 || port > 65535) {
      throw new IllegalArgumentException("port must be from 1 to 65535, not " + port);
    }
    String[] nsName = parse(ref.id());
    if (!resources().podExists(nsName[0], nsName[1])) {
      throw new WorkspaceUnavailableException(
          "sandbox " + ref + " is gone (no pod of that name), or suspended");
    }
    String key = nsName[0] + "/" + nsName[1] + ":" + port;
    io.fabric8.kubernetes.client.LocalPortForward forward =
        forwards.computeIfAbsent(
            key,
            k ->
                client()
                    .pods()
                    .inNamespace(nsName[0])
                    .withName(nsName[1])
                    .portForward(port, java.net.InetAddress.getLoopbackAddress(), 0));
    return forward.getLocalPort();
  }

  /**
   * {@code http://127.0.0.1:LOCAL/}, a {@link #forwardTcp} of the port: raw TCP, so every upgrade
   * passes; reachable from this host only.
   */
  @Override
  public java.net.URI url(WorkspaceRef ref, int port) {
    return java.net.URI.create("http://127.0.0.1:" + forwardTcp(ref, port) + "/");
  }

  /** Never a token: the forward listens on this host's loopback only. */
  @Override
  public Optional<String> portToken(WorkspaceRef ref) {
    requireOurs(ref);
    return Optional.empty();
  }

  /**
   * Stops this provider's port forwards and closes the Kubernetes client it made (not one given to
   * the builder).
   */
  @Override
  public void close() {
    for (io.fabric8.kubernetes.client.LocalPortForward forward : forwards.values()) {
      try {
        forward.close();
      } catch (java.io.IOException e) {
        // its listener is gone already
      }
    }
    forwards.clear();
    KubernetesClient c;
    synchronized (this) {
      c = lazyClient;
    }
    if (ownsClient && c != null) {
      c.close();
    }
  }

  @Override
  public String toString() {
    return "KubernetesSandbox[" + options.namespaceOption + ", " + options.mode + "]";
  }

  synchronized KubernetesClient client() {
    if (lazyClient == null) {
      lazyClient = new KubernetesClientBuilder().build();
    }
    return lazyClient;
  }

  Runnable beforeCreate() {
    return beforeCreate;
  }

  ClusterResources resources() {
    return new ClusterResources(client(), options, this::mode);
  }

  /** The mode this provider uses, discovered from the API server once for {@link Mode#AUTO}. */
  Mode mode() {
    if (options.mode != Mode.AUTO) {
      return options.mode;
    }
    Mode m = detected;
    if (m == null) {
      try {
        m = client().getApiGroup(ClusterResources.SANDBOX_GROUP) != null ? Mode.SANDBOX : Mode.POD;
      } catch (KubernetesClientException e) {
        throw new WorkspaceUnavailableException(
            "cannot reach the Kubernetes API server to discover its APIs: " + e.getMessage(), e);
      }
      detected = m;
    }
    return m;
  }

  private static void requireOurs(WorkspaceRef ref) {
    Objects.requireNonNull(ref, "ref");
    if (!NAME.equals(ref.provider())) {
      throw new IllegalArgumentException("not a " + NAME + " workspace ref: " + ref);
    }
  }

  /**
   * The ref id of workspace {@code name} of namespace {@code ns}: see {@link
   * Builder#namespaceInRefs}.
   */
  String idOf(String ns, String name) {
    return options.namespaceInRefs ? ns + "/" + name : name;
  }

  /**
   * {@code NAMESPACE/NAME}, or {@code NAME} in this provider's namespace, DNS labels; anything else
   * names no workspace of ours.
   */
  String[] parse(String id) {
    int slash = id.indexOf('/');
    if (slash < 0 && DNS_LABEL.matcher(id).matches()) {
      return new String[] {options.namespace(client()), id};
    }
    if (slash < 0
        || !DNS_LABEL.matcher(id.substring(0, slash)).matches()
        || !DNS_LABEL.matcher(id.substring(slash + 1)).matches()) {
      throw new IllegalArgumentException(
          "a k8s workspace id is NAMESPACE/NAME or NAME (lower-case DNS labels), not '" + id + "'");
    }
    return new String[] {id.substring(0, slash), id.substring(slash + 1)};
  }

  private static void requireLabelValue(String what, String value) {
    if (value == null || !value.matches("([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)")) {
      throw new IllegalArgumentException(
          what + " must be a Kubernetes label value (alphanumerics, '-', '_', '.'), not " + value);
    }
  }

  /** The options, immutable once built. */
  static final class Options {
    final String namespaceOption;
    final boolean namespaceInRefs;
    final String image;
    final double cpus;
    final int memoryMiB;
    final Map<String, String> labels;
    final Map<String, String> env;
    final String workingDirectory;
    final String runtimeClassName;
    final long runAsUser;
    final EgressMode egress;
    final List<String> egressCidrs;
    final Mode mode;
    final String warmPool;
    final String owner;
    final Duration readyTimeout;
    final Duration shutdownAfter;
    final String volumeSize;

    Options(Builder b) {
      namespaceOption = b.namespace;
      namespaceInRefs = b.namespaceInRefs;
      image = b.image;
      cpus = b.cpus;
      memoryMiB = b.memoryMiB;
      labels = Map.copyOf(b.labels);
      env = Map.copyOf(b.env);
      workingDirectory = b.workingDirectory;
      runtimeClassName = b.runtimeClassName;
      runAsUser = b.runAsUser;
      egress = b.egress;
      egressCidrs = List.copyOf(b.egressCidrs);
      mode = b.mode;
      warmPool = b.warmPool;
      owner = b.owner;
      readyTimeout = b.readyTimeout;
      shutdownAfter = b.shutdownAfter;
      volumeSize = b.volumeSize;
    }

    /**
     * The namespace given, else the configuration's (kubeconfig context, in-cluster), else default.
     */
    String namespace(KubernetesClient client) {
      if (namespaceOption != null) {
        return namespaceOption;
      }
      String ns = client.getNamespace();
      return ns == null ? "default" : ns;
    }
  }

  /** Options of a {@link KubernetesSandbox}; each setter validates its argument. */
  public static final class Builder {
    private KubernetesClient client;
    private String namespace;
    private String image = "debian:bookworm-slim";
    private double cpus;
    private int memoryMiB;
    private final Map<String, String> labels = new LinkedHashMap<>();
    private final Map<String, String> env = new LinkedHashMap<>();
    private String workingDirectory = "/workspace";
    private String runtimeClassName;
    private long runAsUser = 1000;
    private EgressMode egress = EgressMode.UNRESTRICTED;
    private List<String> egressCidrs = List.of();
    private Mode mode = Mode.AUTO;
    private String warmPool;
    private String owner = "sandbox4j";
    private boolean namespaceInRefs = true;
    private Duration readyTimeout = Duration.ofMinutes(5);
    private Duration shutdownAfter;
    private String volumeSize;
    private Runnable beforeCreate = () -> {};

    private Builder() {}

    /**
     * The client to use, instead of one configured the way {@code kubectl} is ({@code KUBECONFIG},
     * {@code ~/.kube/config}, or the pod's service account in a cluster). Not closed by {@link
     * KubernetesSandbox#close}.
     */
    public Builder client(KubernetesClient client) {
      this.client = Objects.requireNonNull(client, "client");
      return this;
    }

    /** The namespace of new workspaces (default: the configuration's, else {@code default}). */
    /**
     * Whether ref ids name the namespace ({@code NAMESPACE/NAME}, the default) or only the
     * workspace ({@code NAME}, in this provider's namespace). The server, which serves one
     * namespace, uses names alone: its sandbox ids go into URL paths and host names, where a {@code
     * /} cannot. Either form is accepted wherever a ref is.
     */
    public Builder namespaceInRefs(boolean inRefs) {
      this.namespaceInRefs = inRefs;
      return this;
    }

    public Builder namespace(String namespace) {
      if (namespace == null || !DNS_LABEL.matcher(namespace).matches()) {
        throw new IllegalArgumentException(
            "namespace must be a lower-case DNS label, not " + namespace);
      }
      this.namespace = namespace;
      return this;
    }

    /**
     * The container image (default {@code debian:bookworm-slim}). It needs POSIX {@code sh} and GNU
     * coreutils ({@code head}, {@code mktemp}, {@code mkfifo}, {@code tr}, {@code grep}).
     */
    public Builder image(String image) {
      if (image == null || image.isBlank() || image.chars().anyMatch(Character::isWhitespace)) {
        throw new IllegalArgumentException("image must be an image reference, not '" + image + "'");
      }
      this.image = image;
      return this;
    }

    /** CPU request and limit of the pod, in cores (0, the default: none). */
    public Builder cpus(double cpus) {
      if (!(cpus >= 0) || cpus > 1024) {
        throw new IllegalArgumentException("cpus must be between 0 and 1024, not " + cpus);
      }
      this.cpus = cpus;
      return this;
    }

    /** Memory request and limit of the pod, in MiB (0, the default: none). */
    public Builder memoryMiB(int memoryMiB) {
      if (memoryMiB < 0) {
        throw new IllegalArgumentException("memoryMiB must be 0 or more, not " + memoryMiB);
      }
      this.memoryMiB = memoryMiB;
      return this;
    }

    /** A label on the workspace's objects (keys under {@code sandbox4j.dev/} are reserved). */
    public Builder label(String key, String value) {
      if (key == null || !key.matches("([a-z0-9.-]{1,253}/)?[A-Za-z0-9]([-A-Za-z0-9_.]*)?")) {
        throw new IllegalArgumentException("not a Kubernetes label key: " + key);
      }
      if (key.startsWith(ClusterResources.LABEL_PREFIX)) {
        throw new IllegalArgumentException("label keys under sandbox4j.dev/ are reserved: " + key);
      }
      requireLabelValue("label " + key, value);
      labels.put(key, value);
      return this;
    }

    /** An environment variable of the workspace's container. */
    public Builder env(String name, String value) {
      if (name == null || !name.matches("[A-Za-z_][A-Za-z0-9_]*")) {
        throw new IllegalArgumentException("not an environment variable name: " + name);
      }
      env.put(name, Objects.requireNonNull(value, "value of " + name));
      return this;
    }

    /** Environment variables of the workspace's container. */
    public Builder env(Map<String, String> env) {
      env.forEach(this::env);
      return this;
    }

    /**
     * The working directory (default {@code /workspace}), an {@code emptyDir} volume, or the volume
     * claim of {@link #persistentVolume}; an absolute path.
     */
    public Builder workingDirectory(String workingDirectory) {
      if (workingDirectory == null
          || !workingDirectory.startsWith("/")
          || workingDirectory.indexOf('\0') >= 0) {
        throw new IllegalArgumentException(
            "workingDirectory must be an absolute path, not " + workingDirectory);
      }
      this.workingDirectory = workingDirectory;
      return this;
    }

    /** The pod's {@code runtimeClassName}, such as {@code gvisor} or {@code kata-qemu}. */
    public Builder runtimeClassName(String runtimeClassName) {
      if (runtimeClassName == null || !DNS_LABEL.matcher(runtimeClassName).matches()) {
        throw new IllegalArgumentException(
            "runtimeClassName must be a DNS label, not " + runtimeClassName);
      }
      this.runtimeClassName = runtimeClassName;
      return this;
    }

    /** The non-root user id the container runs as (default 1000); 0 is refused. */
    public Builder runAsUser(long uid) {
      if (uid <= 0 || uid > 0xFFFF_FFFEL) {
        throw new IllegalArgumentException("runAsUser must be a non-root uid, not " + uid);
      }
      this.runAsUser = uid;
      return this;
    }

    /** No egress at all: a NetworkPolicy that allows none (DNS included). */
    public Builder egressNone() {
      egress = EgressMode.NONE;
      egressCidrs = List.of();
      return this;
    }

    /** The public internet only (private, link-local, unique-local ranges refused). */
    public Builder egressPublic() {
      egress = EgressMode.PUBLIC;
      egressCidrs = List.of();
      return this;
    }

    /**
     * Egress only to these CIDR blocks. Domain names cannot be allowed this way: a NetworkPolicy
     * knows addresses only, and Sandbox4j's egress proxy does not run as a cluster Service yet.
     */
    public Builder egressAllowCidrs(List<String> cidrs) {
      List<String> copy = List.copyOf(cidrs);
      if (copy.isEmpty()) {
        throw new IllegalArgumentException(
            "egressAllowCidrs needs a CIDR block; egressNone() for none");
      }
      for (String c : copy) {
        if (!CIDR.matcher(c).matches()) {
          throw new IllegalArgumentException(
              "egress rule '"
                  + c
                  + "' is not a CIDR block (such as 10.0.0.0/8); domain allowlists are not"
                  + " supported by the k8s provider");
        }
      }
      egress = EgressMode.CIDRS;
      egressCidrs = copy;
      return this;
    }

    /** Sandbox, plain pod, or discovered ({@link Mode#AUTO}, the default). */
    public Builder mode(Mode mode) {
      this.mode = Objects.requireNonNull(mode, "mode");
      return this;
    }

    /**
     * Claims new workspaces from this {@code SandboxWarmPool} (sandbox mode): a {@code
     * SandboxClaim} adopts a pre-started Sandbox. Its pod is the pool template's, so image, env,
     * sizes and isolation options of this builder do not apply to it.
     */
    public Builder warmPool(String warmPool) {
      if (warmPool == null || !DNS_LABEL.matcher(warmPool).matches()) {
        throw new IllegalArgumentException("warmPool must be a DNS label, not " + warmPool);
      }
      this.warmPool = warmPool;
      return this;
    }

    /** The {@code sandbox4j.dev/owner} label of new workspaces, which {@link #gc} reaps by. */
    public Builder owner(String owner) {
      requireLabelValue("owner", owner);
      this.owner = owner;
      return this;
    }

    /** How long a new workspace may take to become ready (default 5 minutes). */
    public Builder readyTimeout(Duration timeout) {
      if (timeout == null || timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("readyTimeout must be positive, not " + timeout);
      }
      this.readyTimeout = timeout;
      return this;
    }

    /** Sandbox mode: the controller ends the workspace this long after creation (shutdownTime). */
    public Builder shutdownAfter(Duration after) {
      if (after == null || after.isNegative() || after.isZero()) {
        throw new IllegalArgumentException("shutdownAfter must be positive, not " + after);
      }
      this.shutdownAfter = after;
      return this;
    }

    /**
     * A PersistentVolumeClaim of this size (such as {@code 10Gi}) for the working directory, which
     * outlives a suspended pod; otherwise an {@code emptyDir}.
     */
    public Builder persistentVolume(String size) {
      if (size == null || !size.matches("[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?")) {
        throw new IllegalArgumentException("persistentVolume size such as 10Gi, not " + size);
      }
      this.volumeSize = size;
      return this;
    }

    /** Test hook: runs before each workspace is created. */
    Builder beforeCreate(Runnable hook) {
      this.beforeCreate = Objects.requireNonNull(hook);
      return this;
    }

    /** The provider; no I/O happens until a workspace is used. */
    public KubernetesSandbox build() {
      if (warmPool != null && mode == Mode.POD) {
        throw new IllegalArgumentException("warmPool needs sandbox mode, not pod mode");
      }
      return new KubernetesSandbox(this);
    }
  }
}
