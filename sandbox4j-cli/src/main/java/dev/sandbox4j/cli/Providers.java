package dev.sandbox4j.cli;

import dev.sandbox4j.boxd.BoxdSandbox;
import dev.sandbox4j.docker.DockerSandbox;
import dev.sandbox4j.kubernetes.KubernetesSandbox;
import dev.sandbox4j.modal.ModalSandbox;
import dev.sandbox4j.remote.RemoteSandbox;
import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.BiFunction;
import java.util.function.Consumer;

/**
 * The one place that knows which workspace providers the CLI offers, where each keeps its state
 * under the sandbox4j home, and which of them isolate. A new engine is one more entry here.
 *
 * <p>{@code local} (the default) keeps its state in the home itself ({@code images/}, {@code
 * sandboxes/}, {@code run/}); {@code host} keeps its workspaces in {@code host/} under it. With a
 * server (a {@link Server}), {@code remote} takes {@code local}'s place: it is the default, bare
 * ids are its ids, and the machine commands act on the server's sandboxes.
 */
final class Providers {

  /** The provider of {@code --provider}'s default without a server. */
  static final String DEFAULT = LocalSandbox.NAME;

  /**
   * The sandbox4j server the CLI talks to instead of the local engine.
   *
   * @param url its base URL, from {@code --server} or {@code $SANDBOX4J_URL}
   * @param environment where the API key comes from ({@code $SANDBOX4J_API_KEY})
   */
  record Server(String url, Map<String, String> environment) {
    Server {
      Objects.requireNonNull(url, "url");
      environment = Map.copyOf(environment);
    }

    @Override
    public String toString() {
      return "Server[" + url + "]"; // never the environment: it holds the key
    }
  }

  /**
   * What a command line asks of the provider it opens. Only {@code env} applies to every provider;
   * the rest shape local sandboxes, and a provider that cannot honour one refuses it.
   *
   * @param env variables every command gets
   * @param workingDirectory where commands start, or null for the provider's default
   * @param image the image of a new sandbox, or null for the default
   * @param cpus the CPU quota of a new sandbox, or null for the default
   * @param memoryBytes the memory limit of a new sandbox, or null for the default
   * @param labels labels of a new sandbox
   * @param snapshot the snapshot a new sandbox starts from, or null
   * @param timers the timers of a new sandbox, or null for the defaults
   * @param egress the egress policy of a new sandbox, or null for the default (all)
   * @param networks the named networks of a new sandbox (and that sandboxes attached to may be on)
   * @param portToken whether a new sandbox's port URLs need a token
   * @param diskBytes the byte quota of a new sandbox's writable layer, or null for the default
   * @param diskInodes the inode quota of a new sandbox's writable layer, or null for the default
   * @param isolation the isolation of a new sandbox, or null for the default (container)
   */
  record Settings(
      Map<String, String> env,
      String workingDirectory,
      String image,
      Integer cpus,
      Long memoryBytes,
      Map<String, String> labels,
      String snapshot,
      Timers timers,
      EgressPolicy egress,
      List<String> networks,
      boolean portToken,
      Long diskBytes,
      Long diskInodes,
      Isolation isolation,
      String user) {

    static final Settings DEFAULTS =
        new Settings(
            Map.of(), null, null, null, null, Map.of(), null, null, null, List.of(), false, null,
            null, null, null);

    Settings {
      env = env == null ? Map.of() : Map.copyOf(env);
      labels = labels == null ? Map.of() : Map.copyOf(labels);
      networks = networks == null ? List.of() : List.copyOf(networks);
    }

    Settings withNetworks(List<String> networks) {
      return new Settings(
          env,
          workingDirectory,
          image,
          cpus,
          memoryBytes,
          labels,
          snapshot,
          timers,
          egress,
          networks,
          portToken,
          diskBytes,
          diskInodes,
          isolation,
          user);
    }

    Settings withWorkingDirectory(String workingDirectory) {
      return new Settings(
          env,
          workingDirectory,
          image,
          cpus,
          memoryBytes,
          labels,
          snapshot,
          timers,
          egress,
          networks,
          portToken,
          diskBytes,
          diskInodes,
          isolation,
          user);
    }

    Settings withIsolation(Isolation isolation) {
      return new Settings(
          env,
          workingDirectory,
          image,
          cpus,
          memoryBytes,
          labels,
          snapshot,
          timers,
          egress,
          networks,
          portToken,
          diskBytes,
          diskInodes,
          isolation,
          user);
    }

    /** The options set here that only local sandboxes take, as the command line names them. */
    List<String> localOnlyOptions() {
      Map<String, Boolean> set = new LinkedHashMap<>();
      set.put("--workdir", workingDirectory != null);
      set.put("--image", image != null);
      set.put("--cpus", cpus != null);
      set.put("--memory", memoryBytes != null);
      set.put("--disk", diskBytes != null);
      set.put("--disk-inodes", diskInodes != null);
      set.put("--label", !labels.isEmpty());
      set.put("--snapshot", snapshot != null);
      set.put("--port-token", portToken);
      set.put("--egress", egress != null);
      set.put("--network", !networks.isEmpty());
      set.put("--isolation", isolation != null);
      set.put("--user", user != null);
      if (timers != null) {
        set.put("--auto-suspend", timers.autoSuspend() != null);
        set.put("--lifetime", timers.lifetime() != null);
        set.put("--idle-timeout", timers.idle() != null);
        set.put("--delete-after", timers.deleteAfter() != null);
      }
      return set.entrySet().stream().filter(Map.Entry::getValue).map(Map.Entry::getKey).toList();
    }
  }

  /**
   * The timers of a new local sandbox; each null for its default.
   *
   * @param autoSuspend idle time before it is suspended (zero: never)
   * @param lifetime its total lifetime (10 s to 24 h)
   * @param idle idle time before it is destroyed (zero: never)
   * @param deleteAfter when it is destroyed
   */
  record Timers(Duration autoSuspend, Duration lifetime, Duration idle, Instant deleteAfter) {
    /** Hands the timers that were given (any of {@code timers} may be null) to a builder. */
    static void apply(
        Timers timers,
        java.util.function.Consumer<Duration> autoSuspend,
        java.util.function.Consumer<Duration> lifetime,
        java.util.function.Consumer<Duration> idle,
        java.util.function.Consumer<Instant> deleteAfter) {
      if (timers == null) {
        return;
      }
      if (timers.autoSuspend() != null) {
        autoSuspend.accept(timers.autoSuspend());
      }
      if (timers.lifetime() != null) {
        lifetime.accept(timers.lifetime());
      }
      if (timers.idle() != null) {
        idle.accept(timers.idle());
      }
      if (timers.deleteAfter() != null) {
        deleteAfter.accept(timers.deleteAfter());
      }
    }
  }

  /** One provider the CLI offers. */
  private record Entry(
      String name,
      boolean isolates,
      boolean keepsEnv,
      BiFunction<Providers, Settings, WorkspaceProvider> factory) {}

  private static final List<Entry> ENTRIES =
      List.of(
          new Entry(LocalSandbox.NAME, true, false, Providers::local),
          new Entry(RemoteSandbox.NAME, true, true, Providers::newRemote),
          new Entry(DockerSandbox.NAME, true, false, Providers::docker),
          new Entry(ModalSandbox.NAME, true, false, Providers::modal),
          new Entry(BoxdSandbox.NAME, true, false, Providers::boxd),
          new Entry(KubernetesSandbox.NAME, true, false, Providers::kubernetes),
          new Entry(
              HostWorkspaceProvider.NAME,
              false,
              false,
              (providers, settings) -> {
                List<String> unsupported = settings.localOnlyOptions();
                if (!unsupported.isEmpty()) {
                  throw new IllegalArgumentException(
                      String.join(", ", unsupported)
                          + (unsupported.size() == 1 ? " is" : " are")
                          + " for local sandboxes only, not host workspaces");
                }
                return HostWorkspaceProvider.builder()
                    .root(providers.home.resolve(HostWorkspaceProvider.NAME))
                    .env(settings.env())
                    .build();
              }));

  private final Path home;
  private final Consumer<String> progress;
  private final Server server;
  private final Map<String, String> environment;

  /**
   * @param home the sandbox4j home
   * @param progress receives progress lines of long work (building the default image)
   */
  Providers(Path home, Consumer<String> progress) {
    this(home, progress, null);
  }

  /**
   * @param home the sandbox4j home
   * @param progress receives progress lines of long work (building the default image)
   * @param server the server whose sandboxes the machine commands act on, or null for the local
   *     engine
   */
  Providers(Path home, Consumer<String> progress, Server server) {
    this(home, progress, server, System.getenv());
  }

  /**
   * @param environment the CLI's environment variables, where the cloud providers find their
   *     credentials and endpoints ({@code MODAL_*}, {@code BOXD_*})
   */
  Providers(Path home, Consumer<String> progress, Server server, Map<String, String> environment) {
    this.home = Objects.requireNonNull(home, "home");
    this.progress = Objects.requireNonNull(progress, "progress");
    this.server = server;
    this.environment = Map.copyOf(environment);
  }

  /** The names of every provider, in the order help text shows them. */
  List<String> names() {
    String absent = server == null ? RemoteSandbox.NAME : LocalSandbox.NAME;
    return ENTRIES.stream().map(Entry::name).filter(n -> !n.equals(absent)).toList();
  }

  /** The provider {@code --provider} defaults to: {@code remote} with a server, else local. */
  String defaultName() {
    return server == null ? LocalSandbox.NAME : RemoteSandbox.NAME;
  }

  /** Where the machine commands act: the server's sandboxes, or the local engine's. */
  Machines machines() {
    return new Machines(this, defaultName());
  }

  /**
   * The options a Modal sandbox cannot take, as the command line names them: Modal has no disk
   * quota, egress policy, named network, isolation choice, suspend or deadline of ours.
   */
  private static final List<String> NOT_FOR_MODAL =
      List.of(
          "--user",
          "--disk",
          "--disk-inodes",
          "--port-token",
          "--egress",
          "--network",
          "--isolation",
          "--auto-suspend",
          "--delete-after");

  /**
   * A Modal sandbox of {@code settings}: {@code --image} is a registry tag Modal pulls, {@code
   * --snapshot} an image id from a filesystem snapshot, {@code --label} a tag, {@code --lifetime}
   * its sandbox timeout. Credentials and endpoint come from the CLI's environment ({@code
   * MODAL_TOKEN_ID}, {@code MODAL_TOKEN_SECRET}, {@code MODAL_SERVER_URL}) or {@code
   * ~/.modal.toml}, as Modal's own clients find them.
   */
  private static ModalSandbox modal(Providers providers, Settings settings) {
    refuse(settings, NOT_FOR_MODAL, "modal sandboxes");
    ModalSandbox.Builder b = modalBuilder(providers.environment).env(settings.env());
    if (settings.workingDirectory() != null) {
      b.workingDirectory(settings.workingDirectory());
    }
    if (settings.image() != null) {
      b.image(settings.image());
    }
    if (settings.snapshot() != null) {
      b.imageId(settings.snapshot());
    }
    if (settings.cpus() != null) {
      b.cpu(settings.cpus());
    }
    if (settings.memoryBytes() != null) {
      try {
        b.memoryMiB(wholeMiB(settings.memoryBytes()));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("--memory for a modal sandbox " + e.getMessage(), e);
      }
    }
    settings.labels().forEach(b::tag);
    Timers.apply(settings.timers(), d -> {}, b::sandboxTimeout, b::idleTimeout, t -> {});
    return b.build();
  }

  /**
   * A Modal builder with the credentials and endpoint of {@code environment} ({@code
   * MODAL_TOKEN_ID}, {@code MODAL_TOKEN_SECRET}, {@code MODAL_SERVER_URL}); without them, the
   * builder finds them as Modal's own clients do ({@code ~/.modal.toml}).
   */
  static ModalSandbox.Builder modalBuilder(Map<String, String> environment) {
    ModalSandbox.Builder b = ModalSandbox.builder();
    String id = environment.get("MODAL_TOKEN_ID");
    String secret = environment.get("MODAL_TOKEN_SECRET");
    if (id != null && secret != null && !id.isBlank() && !secret.isBlank()) {
      b.token(id, secret);
    }
    String url = environment.get("MODAL_SERVER_URL");
    if (url != null && !url.isBlank()) {
      b.serverUrl(url);
    }
    return b;
  }

  /** {@code bytes} in MiB, which Modal sizes memory in. */
  static int wholeMiB(long bytes) {
    long mib = bytes >> 20;
    if (mib < 1 || mib > Integer.MAX_VALUE || (bytes & ((1 << 20) - 1)) != 0) {
      throw new IllegalArgumentException("must be a whole number of MiB, not " + bytes + " bytes");
    }
    return (int) mib;
  }

  /**
   * The options a boxd machine cannot take, as the command line names them: boxd sizes machines by
   * vCPU class (memory follows) and has no labels, disk quota, egress policy, named network or
   * isolation choice of ours (its machines are always isolated).
   */
  private static final List<String> NOT_FOR_BOXD =
      List.of(
          "--user",
          "--memory",
          "--disk",
          "--disk-inodes",
          "--label",
          "--port-token",
          "--egress",
          "--network",
          "--isolation",
          "--idle-timeout",
          "--delete-after");

  /**
   * A boxd machine of {@code settings}: {@code --cpus} a size class (1, 2, 4 or 8 vCPU), {@code
   * --snapshot} a boxd snapshot, {@code --auto-suspend} boxd's auto-suspend, {@code --lifetime} its
   * auto-destroy. Credentials and endpoints come from the CLI's environment ({@code BOXD_API_KEY}
   * or {@code BOXD_TOKEN}, {@code BOXD_BASE_URL}, {@code BOXD_TOKEN_URL}).
   */
  private static BoxdSandbox boxd(Providers providers, Settings settings) {
    refuse(settings, NOT_FOR_BOXD, "boxd machines");
    BoxdSandbox.Builder b = BoxdSandbox.builder(providers.environment).env(settings.env());
    if (settings.workingDirectory() != null) {
      b.workingDirectory(settings.workingDirectory());
    }
    if (settings.image() != null) {
      b.image(settings.image());
    }
    if (settings.snapshot() != null) {
      b.snapshot(settings.snapshot());
    }
    if (settings.cpus() != null) {
      b.vcpu(settings.cpus());
    }
    Timers.apply(settings.timers(), b::autoSuspendTimeout, b::autoDestroyTimeout, d -> {}, t -> {});
    try {
      return b.build();
    } catch (IllegalStateException e) {
      throw new IllegalArgumentException(e.getMessage(), e); // no credentials: a usage error
    }
  }

  /**
   * The options a Kubernetes workspace cannot take, as the command line names them: a pod has no
   * snapshot, disk or inode quota, port token, named network or timers of ours but a lifetime.
   */
  private static final List<String> NOT_FOR_K8S =
      List.of(
          "--snapshot",
          "--disk",
          "--disk-inodes",
          "--port-token",
          "--network",
          "--auto-suspend",
          "--idle-timeout",
          "--delete-after");

  /** Where the CLI finds the namespace of {@code --provider k8s} when kubeconfig's is not it. */
  static final String K8S_NAMESPACE_VARIABLE = "SANDBOX4J_K8S_NAMESPACE";

  /**
   * A Kubernetes workspace of {@code settings}, on the cluster of the CLI's kubeconfig ({@code
   * $KUBECONFIG}, else {@code ~/.kube/config}, else the pod's in-cluster account, as {@code
   * kubectl} finds it), in {@code $SANDBOX4J_K8S_NAMESPACE} or kubeconfig's namespace: {@code
   * --image}, {@code --cpus}, {@code --memory} (whole MiB), {@code --label}, {@code --user} (a
   * numeric uid), {@code --egress} (none, all as the public internet, or CIDRs: domains need an
   * egress proxy, which the backend does not run), {@code --isolation gvisor} (the RuntimeClass
   * {@code gvisor}), {@code --lifetime} (agent-sandbox's shutdown time).
   */
  private static KubernetesSandbox kubernetes(Providers providers, Settings settings) {
    refuse(settings, NOT_FOR_K8S, "k8s sandboxes");
    KubernetesSandbox.Builder b = kubernetesBuilder(providers.environment).env(settings.env());
    String namespace = providers.environment.get(K8S_NAMESPACE_VARIABLE);
    if (namespace != null && !namespace.isBlank()) {
      b.namespace(namespace);
    }
    if (settings.workingDirectory() != null) {
      b.workingDirectory(settings.workingDirectory());
    }
    if (settings.image() != null) {
      b.image(settings.image());
    }
    if (settings.cpus() != null) {
      b.cpus(settings.cpus());
    }
    if (settings.memoryBytes() != null) {
      try {
        b.memoryMiB(wholeMiB(settings.memoryBytes()));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("--memory for a k8s sandbox " + e.getMessage(), e);
      }
    }
    if (settings.user() != null) {
      try {
        b.runAsUser(Long.parseLong(settings.user()));
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(
            "--user for a k8s sandbox is a numeric uid (a pod's runAsUser), not '"
                + settings.user()
                + "'",
            e);
      }
    }
    if (settings.isolation() == Isolation.GVISOR) {
      b.runtimeClassName("gvisor");
    }
    if (settings.egress() != null) {
      kubernetesEgress(b, settings.egress(), "--egress");
    }
    settings.labels().forEach(b::label);
    Timers.apply(settings.timers(), d -> {}, b::shutdownAfter, d -> {}, t -> {});
    return b.build();
  }

  /** Gives {@code policy} to {@code b} as a NetworkPolicy can hold it, or refuses it by name. */
  static void kubernetesEgress(KubernetesSandbox.Builder b, EgressPolicy policy, String option) {
    if (!policy.narrowings().isEmpty()
        || !policy.headerRules().isEmpty()
        || policy.interceptTls()) {
      throw new IllegalArgumentException(
          option
              + ": a k8s sandbox's egress is a NetworkPolicy (none, the public internet, or CIDRs);"
              + " it cannot narrow, add headers or intercept TLS");
    }
    switch (policy.mode()) {
      case NONE -> b.egressNone();
      case ALL -> b.egressPublic();
      case ALLOWLIST -> {
        if (!policy.domains().isEmpty()) {
          throw new IllegalArgumentException(
              option
                  + ": a k8s sandbox's egress is a NetworkPolicy, which allows CIDRs, not domains ("
                  + String.join(", ", policy.domains())
                  + "): domains need an egress proxy, which the k8s backend does not run");
        }
        b.egressAllowCidrs(policy.cidrs());
      }
    }
  }

  /**
   * A Kubernetes builder on the cluster of {@code environment}'s {@code KUBECONFIG} (see {@link
   * #kubernetesClient}), else the provider's default as kubectl finds it ({@code ~/.kube/config},
   * else the in-cluster service account), made on first use.
   */
  static KubernetesSandbox.Builder kubernetesBuilder(Map<String, String> environment) {
    KubernetesSandbox.Builder b = KubernetesSandbox.builder();
    String kubeconfig = environment.get("KUBECONFIG");
    if (kubeconfig != null && !kubeconfig.isBlank()) {
      b.client(kubernetesClient(environment));
    }
    return b;
  }

  /**
   * A client of the cluster of {@code environment}'s {@code KUBECONFIG} (its first file, where
   * kubectl would merge them all), else of kubectl's defaults. Does no I/O but reading the file.
   */
  static io.fabric8.kubernetes.client.KubernetesClient kubernetesClient(
      Map<String, String> environment) {
    String kubeconfig = environment.get("KUBECONFIG");
    if (kubeconfig == null || kubeconfig.isBlank()) {
      return new io.fabric8.kubernetes.client.KubernetesClientBuilder().build();
    }
    String first = kubeconfig.split(java.io.File.pathSeparator)[0];
    io.fabric8.kubernetes.client.Config config;
    try {
      config = io.fabric8.kubernetes.client.Config.fromKubeconfig(new java.io.File(first));
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(
          "KUBECONFIG: cannot read " + first + ": " + e.getMessage(), e);
    }
    return new io.fabric8.kubernetes.client.KubernetesClientBuilder().withConfig(config).build();
  }

  /** Refuses the options of {@code settings} that {@code notFor} lists, naming them. */
  private static void refuse(Settings settings, List<String> notFor, String what) {
    List<String> unsupported =
        settings.localOnlyOptions().stream().filter(notFor::contains).toList();
    if (!unsupported.isEmpty()) {
      throw new IllegalArgumentException(
          String.join(", ", unsupported)
              + (unsupported.size() == 1 ? " is" : " are")
              + " not supported by "
              + what);
    }
  }

  /** The options a docker sandbox cannot take (yet), as the command line names them. */
  private static final List<String> NOT_FOR_DOCKER = List.of("--disk-inodes");

  private static DockerSandbox docker(Providers providers, Settings settings) {
    refuse(settings, NOT_FOR_DOCKER, "docker sandboxes yet");
    if (settings.isolation() == Isolation.GVISOR) {
      // a docker sandbox is a container of the daemon's runtime: 'container' is what it is
      throw new IllegalArgumentException(
          "--isolation gvisor is not supported by docker sandboxes (they run under the Docker"
              + " daemon's runtime): use --provider local");
    }
    DockerSandbox.Builder b =
        DockerSandbox.builder().env(settings.env()).progress(providers.progress);
    if (settings.workingDirectory() != null) {
      b.workingDirectory(settings.workingDirectory());
    }
    if (settings.image() != null) {
      b.image(settings.image());
    }
    if (settings.user() != null) {
      b.user(settings.user());
    }
    if (settings.cpus() != null) {
      b.cpus(settings.cpus());
    }
    if (settings.memoryBytes() != null) {
      b.memory(settings.memoryBytes());
    }
    if (settings.snapshot() != null) {
      b.snapshot(settings.snapshot());
    }
    if (settings.diskBytes() != null) {
      b.disk(settings.diskBytes());
    }
    if (settings.egress() != null) {
      b.egress(settings.egress());
    }
    settings.networks().forEach(b::network);
    b.portToken(settings.portToken());
    Timers.apply(
        settings.timers(),
        b::autoSuspendTimeout,
        b::sandboxTimeout,
        b::idleTimeout,
        b::deleteAfter);
    settings.labels().forEach(b::label);
    try {
      return b.build();
    } catch (IllegalStateException e) {
      throw new IllegalArgumentException(e.getMessage(), e);
    }
  }

  /**
   * The create options a server's sandbox cannot take, as the command line names them: refused,
   * never dropped (a policy or a token silently left out would leave a sandbox more open than
   * asked).
   */
  private static final List<String> NOT_FOR_REMOTE =
      List.of("--egress", "--network", "--port-token", "--user");

  private static RemoteSandbox newRemote(Providers providers, Settings settings) {
    if (providers.server == null) {
      throw new IllegalStateException("no sandbox4j server: use --server URL or set SANDBOX4J_URL");
    }
    List<String> unsupported =
        settings.localOnlyOptions().stream().filter(NOT_FOR_REMOTE::contains).toList();
    if (!unsupported.isEmpty()) {
      throw new IllegalArgumentException(
          String.join(", ", unsupported)
              + (unsupported.size() == 1 ? " is" : " are")
              + " not supported for a sandbox on a server"
              + (unsupported.contains("--egress")
                  ? ": create it, then set its egress policy with `sandbox4j egress REF ...`"
                  : ""));
    }
    RemoteSandbox.Builder b;
    try {
      b = RemoteSandbox.builder(providers.server.environment()).url(providers.server.url());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("--server / SANDBOX4J_URL: " + e.getMessage(), e);
    }
    b.env(settings.env());
    if (settings.workingDirectory() != null) {
      b.workingDirectory(settings.workingDirectory());
    }
    if (settings.image() != null) {
      b.image(settings.image());
    }
    if (settings.cpus() != null) {
      b.cpus(settings.cpus());
    }
    if (settings.memoryBytes() != null) {
      b.memory(settings.memoryBytes());
    }
    if (settings.diskBytes() != null) {
      b.disk(settings.diskBytes());
    }
    if (settings.diskInodes() != null) {
      b.diskInodes(settings.diskInodes());
    }
    if (settings.snapshot() != null) {
      b.snapshot(settings.snapshot());
    }
    if (settings.isolation() != null) {
      b.isolation(settings.isolation().id()); // the server judges it: its operator may force one
    }
    settings.labels().forEach(b::label);
    Timers.apply(
        settings.timers(),
        b::autoSuspendTimeout,
        b::sandboxTimeout,
        b::idleTimeout,
        b::deleteAfter);
    try {
      return b.build();
    } catch (IllegalStateException e) {
      throw new IllegalArgumentException(e.getMessage(), e);
    }
  }

  /**
   * The provider called {@code name}, configured by {@code settings}. Does no I/O.
   *
   * @throws IllegalArgumentException if there is no such provider, naming the ones there are, or if
   *     a setting is invalid or does not apply to it
   */
  WorkspaceProvider open(String name, Settings settings) {
    return entry(name).factory().apply(this, settings);
  }

  /** The provider that holds {@code ref}'s workspace, with default settings. */
  WorkspaceProvider open(WorkspaceRef ref) {
    return open(ref.provider(), Settings.DEFAULTS);
  }

  /** The local engine with default settings: images, gc, shell. Does no I/O. */
  LocalSandbox local() {
    return local(this, Settings.DEFAULTS);
  }

  /** The settings each local provider this object made was built from. */
  private final Map<WorkspaceProvider, Settings> built =
      java.util.Collections.synchronizedMap(new java.util.IdentityHashMap<>());

  /**
   * {@code provider}, or the same built for the named networks {@code ref}'s sandbox is on: the CLI
   * is the machine's operator and may reach into any network, which a provider built without it
   * refuses (see {@link LocalSandbox.Builder#network}). Reads the sandbox's files; where that fails
   * (no root, say), the provider as it is, and its error comes with the first use.
   */
  WorkspaceProvider forRef(WorkspaceProvider provider, WorkspaceRef ref) {
    if (provider instanceof DockerSandbox docker && ref.provider().equals(DockerSandbox.NAME)) {
      try {
        List<String> networks =
            docker.info(ref).map(SandboxInfo::networks).orElse(List.<String>of());
        if (networks.isEmpty()) {
          return provider;
        }
        DockerSandbox withThem =
            docker(this, built.getOrDefault(provider, Settings.DEFAULTS).withNetworks(networks));
        built.put(withThem, built.getOrDefault(provider, Settings.DEFAULTS));
        return withThem;
      } catch (RuntimeException e) {
        return provider; // its error comes with the first use
      }
    }
    return provider instanceof LocalSandbox local ? forRef(local, ref) : provider;
  }

  /** {@link #forRef(WorkspaceProvider, WorkspaceRef)} for the local engine. */
  LocalSandbox forRef(LocalSandbox provider, WorkspaceRef ref) {
    if (!ref.provider().equals(LocalSandbox.NAME) || !mayHoldWorkspaces(LocalSandbox.NAME)) {
      return provider;
    }
    try {
      List<String> networks = provider.info(ref).map(SandboxInfo::networks).orElse(List.of());
      Settings settings = built.getOrDefault(provider, Settings.DEFAULTS);
      return networks.isEmpty() ? provider : local(this, settings.withNetworks(networks));
    } catch (RuntimeException e) {
      return provider;
    }
  }

  private static LocalSandbox local(Providers providers, Settings settings) {
    LocalSandbox built =
        shareDefaultLocal && settings.equals(Settings.DEFAULTS)
            ? sharedLocal(providers)
            : buildLocal(providers, settings, b -> {});
    providers.built.put(built, settings);
    return built;
  }

  /** Whether this process shares one default local engine per home ({@link #shareDefaultLocal}). */
  private static volatile boolean shareDefaultLocal;

  private static final Map<Path, LocalSandbox> SHARED_LOCAL =
      new java.util.concurrent.ConcurrentHashMap<>();

  /** Where the shared engine's progress goes: the command that is using it on this thread. */
  private static final InheritableThreadLocal<Consumer<String>> SHARED_PROGRESS =
      new InheritableThreadLocal<>();

  /**
   * Makes every command of this process use one local engine with default settings per home, kept
   * for the life of the process, instead of a new one per command: for the resident CLI process
   * ({@link Resident}). A new engine per command would open the home again and start a new exec
   * helper in the sandbox for each command (its {@code crun exec} is most of a command's time), and
   * leave the last one running there until a garbage collection closed its socket. The engine is
   * made for many users at once; its progress goes to the command that caused it.
   */
  static void shareDefaultLocal() {
    shareDefaultLocal = true;
  }

  private static LocalSandbox sharedLocal(Providers providers) {
    SHARED_PROGRESS.set(providers.progress);
    return SHARED_LOCAL.computeIfAbsent(
        providers.home,
        home ->
            buildLocal(
                providers,
                Settings.DEFAULTS,
                b ->
                    b.progress(
                        line -> {
                          Consumer<String> to = SHARED_PROGRESS.get();
                          if (to != null) {
                            to.accept(line);
                          }
                        })));
  }

  /** The local engine with default settings and what {@code customize} adds (registry auth). */
  LocalSandbox local(java.util.function.Consumer<LocalSandbox.Builder> customize) {
    return buildLocal(this, Settings.DEFAULTS, customize);
  }

  private static LocalSandbox buildLocal(
      Providers providers,
      Settings settings,
      java.util.function.Consumer<LocalSandbox.Builder> customize) {
    LocalSandbox.Builder b =
        LocalSandbox.builder()
            .home(providers.home)
            .env(settings.env())
            .progress(providers.progress);
    customize.accept(b);
    if (settings.workingDirectory() != null) {
      b.workingDirectory(settings.workingDirectory());
    }
    if (settings.image() != null) {
      b.image(settings.image());
    }
    if (settings.user() != null) {
      b.user(settings.user());
    }
    if (settings.cpus() != null) {
      b.cpus(settings.cpus());
    }
    if (settings.memoryBytes() != null) {
      b.memory(settings.memoryBytes());
    }
    if (settings.diskBytes() != null) {
      b.disk(settings.diskBytes());
    }
    if (settings.diskInodes() != null) {
      b.diskInodes(settings.diskInodes());
    }
    if (settings.snapshot() != null) {
      b.snapshot(settings.snapshot());
    }
    settings.labels().forEach(b::label);
    if (settings.egress() != null) {
      b.egress(settings.egress());
    }
    settings.networks().forEach(b::network);
    b.portToken(settings.portToken());
    if (settings.isolation() != null) {
      b.isolation(settings.isolation());
    }
    Timers.apply(
        settings.timers(),
        b::autoSuspendTimeout,
        b::sandboxTimeout,
        b::idleTimeout,
        b::deleteAfter);
    return b.build();
  }

  /** Whether the provider's workspaces are isolated from this machine. */
  boolean isolates(String name) {
    return entry(name).isolates();
  }

  /**
   * Whether a workspace keeps the env it was created with for every later command, also in later
   * runs of the CLI. Only a server's sandboxes do (the server stores it with the sandbox): a host
   * workspace's env lives as long as its provider object, and a local sandbox's env (like its
   * working directory) belongs to each {@link LocalSandbox}.
   */
  boolean keepsEnv(String name) {
    return entry(name).keepsEnv();
  }

  /**
   * Whether {@code name} may hold workspaces at all: false for {@code local} before its first
   * sandbox, so that listing every provider does not need root for an engine never used here; false
   * for docker without a daemon, and for modal and boxd without credentials (a user who has no
   * account there has no sandboxes there, and hears nothing of them).
   */
  boolean mayHoldWorkspaces(String name) {
    if (name.equals(DockerSandbox.NAME)) {
      return DockerSandbox.isDaemonConfigured();
    }
    if (name.equals(ModalSandbox.NAME)) {
      return isSet("MODAL_TOKEN_ID") && isSet("MODAL_TOKEN_SECRET")
          || Files.isRegularFile(
              isSet("MODAL_CONFIG_PATH")
                  ? Path.of(environment.get("MODAL_CONFIG_PATH"))
                  : Path.of(System.getProperty("user.home"), ".modal.toml"));
    }
    if (name.equals(BoxdSandbox.NAME)) {
      return isSet(BoxdSandbox.KEY_VARIABLE) || isSet(BoxdSandbox.TOKEN_VARIABLE);
    }
    if (name.equals(KubernetesSandbox.NAME)) {
      return isSet("KUBECONFIG")
          || isSet("KUBERNETES_SERVICE_HOST")
          || Files.isRegularFile(Path.of(System.getProperty("user.home"), ".kube", "config"));
    }
    return !name.equals(LocalSandbox.NAME) || Files.isDirectory(home.resolve("sandboxes"));
  }

  private boolean isSet(String variable) {
    String value = environment.get(variable);
    return value != null && !value.isBlank();
  }

  private Entry entry(String name) {
    return ENTRIES.stream()
        .filter(e -> e.name().equals(name) && names().contains(name))
        .findFirst()
        .orElseThrow(
            () ->
                new IllegalArgumentException(
                    "unknown workspace provider '"
                        + name
                        + "' (known: "
                        + String.join(", ", names())
                        + ")"));
  }
}
