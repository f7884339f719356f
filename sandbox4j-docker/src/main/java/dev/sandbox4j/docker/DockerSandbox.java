package dev.sandbox4j.docker;

import com.github.dockerjava.api.command.CreateContainerCmd;
import com.github.dockerjava.api.command.InspectContainerResponse;
import com.github.dockerjava.api.exception.DockerException;
import com.github.dockerjava.api.exception.NotFoundException;
import com.github.dockerjava.api.exception.NotModifiedException;
import com.github.dockerjava.api.model.Capability;
import com.github.dockerjava.api.model.Container;
import com.github.dockerjava.api.model.HostConfig;
import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.engine.Timers;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.EgressRules;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SandboxTimers;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import dev.sandbox4j.workspace.machine.SupportsEgress;
import dev.sandbox4j.workspace.machine.SupportsFork;
import dev.sandbox4j.workspace.machine.SupportsListing;
import dev.sandbox4j.workspace.machine.SupportsPorts;
import dev.sandbox4j.workspace.machine.SupportsSnapshots;
import dev.sandbox4j.workspace.machine.SupportsStop;
import dev.sandbox4j.workspace.machine.SupportsSuspend;
import dev.sandbox4j.workspace.machine.SupportsTimers;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * Sandboxes in containers of a Docker daemon (provider {@code docker}): where Docker runs (Docker
 * Desktop, rootless Docker, a CI runner) rather than on a host that {@code sandbox4j setup}
 * prepared. The daemon is found as the docker CLI finds it ({@code DOCKER_HOST}, the current
 * context, then the usual sockets). Podman's Docker-compatible service works too ({@code podman
 * system service}); the provider tells it apart once per daemon and works around what Podman does
 * differently (the user guide lists the differences).
 *
 * <p>Each sandbox is one container, named {@code sandbox4j-<id>} and labelled {@value #LABEL_ID},
 * started with Docker's default seccomp profile, the engine's capabilities and no more, a memory
 * and a pids limit always set, no host mounts, and Docker's init as PID 1. Its image is Sandbox4j's
 * default image unless the builder names another: the engine's own (the same recipe, the user
 * {@code sandbox}, {@code /home/sandbox}), imported into the daemon from this machine's image store
 * on first use, so nothing is pulled from a registry. An image's {@code USER}, {@code WORKDIR} and
 * {@code ENV} are honoured unless the builder sets them.
 *
 * <p>{@link #suspend}/{@link #resume} pause and unpause the container; {@link #stop}/{@link #start}
 * stop and start it (a fresh init; files kept). Any command wakes a paused or stopped sandbox.
 */
public final class DockerSandbox
    implements WorkspaceProvider,
        SupportsListing,
        SupportsSuspend,
        SupportsStop,
        SupportsFork,
        SupportsSnapshots,
        SupportsEgress,
        SupportsPorts,
        SupportsTimers {

  /** The provider name in refs. */
  public static final String NAME = "docker";

  /** The label every sandbox container carries, with the sandbox's id as its value. */
  public static final String LABEL_ID = "dev.sandbox4j.id";

  /** The image used unless the builder names one. */
  public static final String DEFAULT_IMAGE = DefaultDockerImage.REPOSITORY;

  /** The engine's capabilities (Docker's default set, listed so that no daemon widens it). */
  private static final Capability[] CAPABILITIES = {
    Capability.CHOWN,
    Capability.DAC_OVERRIDE,
    Capability.FSETID,
    Capability.FOWNER,
    Capability.MKNOD,
    Capability.NET_RAW,
    Capability.SETGID,
    Capability.SETUID,
    Capability.SETFCAP,
    Capability.SETPCAP,
    Capability.NET_BIND_SERVICE,
    Capability.SYS_CHROOT,
    Capability.KILL,
    Capability.AUDIT_WRITE
  };

  /** Every capability that is not in {@link #CAPABILITIES}. */
  private static final Capability[] NOT_DOCKERS =
      java.util.Arrays.stream(Capability.values())
          .filter(c -> c != Capability.ALL && !List.of(CAPABILITIES).contains(c))
          .toArray(Capability[]::new);

  private final DockerHosts.Found host;
  private final String image;
  private final String snapshot;
  private final int cpus;
  private final long memoryBytes;
  private final int pids;
  private final Map<String, String> env;
  private final Map<String, String> labels;
  private final String workingDirectory;
  private final String user;
  private final DockerNetworking networking;
  private final DockerTimers timers;
  private final long diskBytes;
  private final Consumer<String> progress;
  private final Runnable beforeCreate;
  private final DockerSandbox daemonOf; // null: its own connection
  private volatile Daemon daemon;
  private final SandboxImages images = new SandboxImages(this);
  private final Set<String> destroyed = ConcurrentHashMap.newKeySet();
  private volatile String defaultImage;

  /** Sandboxes with every default, on the daemon found as the docker CLI finds it. */
  public DockerSandbox() {
    this(new Builder());
  }

  private DockerSandbox(Builder b) {
    this.host = b.host;
    this.image = b.image;
    this.snapshot = b.snapshot;
    this.cpus = b.cpus;
    this.memoryBytes = b.memoryBytes != 0 ? b.memoryBytes : 4L * 1024 * 1024 * 1024 * b.cpus;
    this.pids = b.pids;
    this.env = Map.copyOf(b.env);
    this.labels = Map.copyOf(b.labels);
    this.workingDirectory = b.workingDirectory;
    this.user = b.user;
    this.networking =
        new DockerNetworking(this, b.network, b.egress, b.portToken, List.copyOf(b.networks));
    this.timers =
        new DockerTimers(
            this,
            new Timers.Config(b.autoSuspendTimeout, b.sandboxTimeout, b.idleTimeout, b.deleteAfter),
            b.timersSet);
    this.diskBytes = b.diskBytes;
    this.progress = b.progress;
    this.beforeCreate = b.beforeCreate;
    this.daemonOf = b.daemonOf;
  }

  /** A builder starting from the defaults. */
  public static Builder builder() {
    return new Builder();
  }

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public WorkspaceBackend newBackend() {
    return new DockerWorkspace(this, null);
  }

  @Override
  public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
    if (!ref.provider().equals(NAME)) {
      return Optional.empty();
    }
    return Optional.of(new DockerWorkspace(this, checkedId(ref)));
  }

  @Override
  public void destroy(WorkspaceRef ref) {
    String id = checkedId(ref);
    destroyed.add(id); // its running commands fail as unavailable, not with their kill signal
    String imageId;
    try {
      imageId = daemon().client().inspectContainerCmd(containerName(id)).exec().getImageId();
      daemon()
          .client()
          .removeContainerCmd(containerName(id))
          .withForce(true)
          .withRemoveVolumes(true)
          .exec();
    } catch (NotFoundException e) {
      networking.forget(id); // gone already; its state here may not be
      return;
    } catch (DockerException e) {
      if (!String.valueOf(e.getMessage()).contains("already in progress")) {
        throw Daemon.translate("cannot destroy sandbox docker:" + id, e);
      }
      return; // the other destroy cleans up
    }
    PauseLock.forget(stateDir(id));
    networking.forget(id); // after the container: its policy holds while it may still run
    images.removeIfLeft(imageId);
  }

  // ---- snapshots and forks (SandboxImages) -----------------------------------------------

  /**
   * Saves sandbox {@code ref}'s files as snapshot {@code name} (a commit to {@code
   * sandbox4j/snapshot:NAME}, paused for its duration), replacing a snapshot of that name;
   * sandboxes made from the old one keep it.
   */
  @Override
  public SnapshotInfo snapshot(WorkspaceRef ref, String name) {
    return images.snapshot(checkedId(ref), name);
  }

  @Override
  public List<SnapshotInfo> snapshots() {
    return images.snapshots();
  }

  @Override
  public boolean removeSnapshot(String name) {
    return images.removeSnapshot(name);
  }

  /** {@link #forkFiles}: Docker carries no processes here, and the result says so. */
  @Override
  public ForkResult fork(WorkspaceRef ref) {
    return forkFiles(ref);
  }

  /**
   * A new sandbox with a copy of {@code ref}'s files (a commit, paused for its duration, then a
   * container of this provider's size from it); no process is carried.
   */
  @Override
  public ForkResult forkFiles(WorkspaceRef ref) {
    String parent = checkedId(ref);
    networking.checkAccess(parent, inspect(parent), "fork");
    DockerWorkspace child = new DockerWorkspace(this, null);
    images.withForkImage(parent, image -> child.createFrom(image, parent));
    return new ForkResult(child.ref().orElseThrow(), false, SandboxImages.NO_CHECKPOINT);
  }

  // ---- timers (DockerTimers) -------------------------------------------------------------------

  /**
   * The timers of {@code ref}'s sandbox, as it was created with them; empty for one that has none
   * (made without the egress network and without a timer set).
   *
   * @throws WorkspaceUnavailableException if it does not exist (a timer may have ended it: the
   *     message then says which)
   */
  @Override
  public Optional<SandboxTimers> timers(WorkspaceRef ref) {
    String id = checkedId(ref);
    inspect(id);
    return timers.timers(id);
  }

  /** Why a timer ended sandbox {@code id}, if one did: the error for using it. */
  Optional<WorkspaceUnavailableException> endedByATimer(String id) {
    return timers.ended(id);
  }

  /** A command of sandbox {@code id} starts or ends: activity for its idle timers. */
  void touch(String id) {
    timers.touch(id);
  }

  // ---- egress and ports (DockerNetworking) ----------------------------------------------------

  /**
   * Replaces the egress policy of {@code ref}'s sandbox: the proxy applies it to the next request
   * (connections already open stay open). A policy that intercepts TLS installs the proxy's CA into
   * the sandbox's trust store (waking it). A sandbox made without the egress network ({@link
   * Builder#noNetwork}, {@link Builder#bridgeNetwork}) has no policy to change: {@link
   * WorkspaceException}.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   */
  public void setEgress(WorkspaceRef ref, EgressPolicy policy) {
    Objects.requireNonNull(policy, "policy");
    networking.setEgress(checkedId(ref), policy);
  }

  /**
   * The egress policy of {@code ref}'s sandbox ({@link EgressPolicy#none()} for one made with
   * {@link Builder#noNetwork}).
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   * @throws WorkspaceException for one on Docker's bridge, which has no policy
   */
  public EgressPolicy egress(WorkspaceRef ref) {
    return networking.egress(checkedId(ref));
  }

  /** {@link #egress} as the machine capability's value. */
  @Override
  public EgressRules egressRules(WorkspaceRef ref) {
    return egress(ref).toRules();
  }

  /** {@link #setEgress} with the policy {@code rules} state ({@link EgressPolicy#of}). */
  @Override
  public void setEgressRules(WorkspaceRef ref, EgressRules rules) {
    String id = checkedId(ref);
    networking.setEgress(id, EgressPolicy.of(rules));
  }

  /**
   * The URL on this host that serves port {@code port} of {@code ref}'s sandbox: {@code
   * http://{port}-{id}.localhost:{proxyPort}/}, answered by the daemon's supervisor (started if
   * needed), which connects to the container's address on the egress network: a server in the
   * sandbox must listen on that address (or on all), not only on its loopback. A request wakes a
   * paused or stopped sandbox. With a token ({@link Builder#portToken}), each connection's first
   * request must carry it in header {@code X-Sandbox4j-Token} or query parameter {@code s4j_token}.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   * @throws WorkspaceException if it is not on the egress network
   * @throws IllegalArgumentException if {@code port} is not from 1 to 65535
   */
  @Override
  public java.net.URI url(WorkspaceRef ref, int port) {
    return networking.url(checkedId(ref), port);
  }

  /** The access token of {@code ref}'s port URLs, if it was made with one; never in the sandbox. */
  @Override
  public Optional<String> portToken(WorkspaceRef ref) {
    return networking.portToken(checkedId(ref));
  }

  /**
   * Forwards a port on 127.0.0.1 of this host to port {@code port} of {@code ref}'s sandbox (its
   * address on the egress network), raw TCP, served by the daemon's supervisor until the sandbox is
   * destroyed; asking again returns the same host port. No token.
   *
   * @throws WorkspaceUnavailableException if the sandbox does not exist
   * @throws WorkspaceException if it is not on the egress network
   * @throws IllegalArgumentException if {@code port} is not from 1 to 65535
   */
  @Override
  public int forwardTcp(WorkspaceRef ref, int port) {
    return networking.forwardTcp(checkedId(ref), port);
  }

  /**
   * Whether a daemon is configured or its socket exists here ({@code DOCKER_HOST}, a docker
   * context, a known socket): no connection is made. What {@code sandbox4j ls} asks before it lists
   * docker sandboxes.
   */
  public static boolean isDaemonConfigured() {
    try {
      DockerHosts.discover();
      return true;
    } catch (WorkspaceUnavailableException e) {
      return false;
    }
  }

  /**
   * What docker sandboxes need here, for {@code sandbox4j doctor --docker}: a daemon found, that it
   * answers (and its version), and where the default image comes from. Changes nothing.
   */
  public static List<dev.sandbox4j.runtime.HostCheck> checks() {
    List<dev.sandbox4j.runtime.HostCheck> checks = new ArrayList<>();
    DockerHosts.Found found;
    try {
      found = DockerHosts.discover();
    } catch (WorkspaceUnavailableException e) {
      checks.add(
          dev.sandbox4j.runtime.HostCheck.missing(
              "docker daemon", e.getMessage(), "start Docker, or set DOCKER_HOST to its socket"));
      return checks;
    }
    checks.add(
        dev.sandbox4j.runtime.HostCheck.ok(
            "docker daemon", found.host() + " (" + found.how() + ")"));
    try (Daemon daemon = new Daemon(found)) {
      var version = daemon.client().versionCmd().exec();
      checks.add(
          dev.sandbox4j.runtime.HostCheck.ok(
              "docker answers",
              (daemon.podman() ? "Podman " : "Docker ")
                  + version.getVersion()
                  + ", API "
                  + version.getApiVersion()));
      checks.add(DefaultDockerImage.check(daemon));
    } catch (RuntimeException e) {
      checks.add(
          dev.sandbox4j.runtime.HostCheck.missing(
              "docker answers",
              found.host() + ": " + e.getMessage(),
              "start the daemon, or give this user access to its socket (the docker group)"));
    }
    return checks;
  }

  /** Every docker sandbox of the daemon (any JVM's), sorted by id. */
  @Override
  public List<SandboxInfo> list() {
    List<Container> containers;
    try {
      containers =
          daemon()
              .client()
              .listContainersCmd()
              .withShowAll(true)
              .withLabelFilter(List.of(LABEL_ID))
              .exec();
    } catch (DockerException e) {
      throw Daemon.translate(
          "cannot list the sandboxes of the Docker daemon at " + daemon().where(), e);
    }
    return containers.stream()
        .filter(
            c -> c.getLabels() != null && DockerHome.isId(c.getLabels().getOrDefault(LABEL_ID, "")))
        .map(this::info)
        .sorted(java.util.Comparator.comparing(i -> i.ref().id()))
        .toList();
  }

  @Override
  public Optional<SandboxInfo> info(WorkspaceRef ref) {
    String id = checkedId(ref);
    return list().stream().filter(i -> i.ref().id().equals(id)).findFirst();
  }

  /** A container as the machine listing shows it: Docker's states in the engine's words. */
  private SandboxInfo info(Container c) {
    Map<String, String> labels = new LinkedHashMap<>(c.getLabels());
    String id = labels.get(LABEL_ID);
    String networks = labels.getOrDefault(DockerNetworking.LABEL_NETWORKS, "");
    labels.keySet().removeIf(k -> k.startsWith("dev.sandbox4j.")); // ours, not the user's
    String state =
        switch (String.valueOf(c.getState())) {
          case "running" -> "running";
          case "paused" -> "suspended";
          case "exited" -> "stopped";
          case "created" -> "creating";
          case "removing", "dead" -> "destroying";
          default -> String.valueOf(c.getState());
        };
    return SandboxInfo.builder(new WorkspaceRef(NAME, id), state)
        .image(SandboxImages.shortName(c.getImage()))
        .created(java.time.Instant.ofEpochSecond(c.getCreated()))
        .labels(labels)
        .timers(timers.timers(id).orElse(null))
        .networks(networks.isEmpty() ? List.of() : List.of(networks.split(",")))
        .build();
  }

  @Override
  public void suspend(WorkspaceRef ref) {
    String id = checkedId(ref);
    InspectContainerResponse.ContainerState state = state(id);
    if (Boolean.TRUE.equals(state.getRunning()) && !Boolean.TRUE.equals(state.getPaused())) {
      try {
        pausing(id, () -> daemon().client().pauseContainerCmd(containerName(id)).exec());
      } catch (DockerException e) {
        throw Daemon.translate("cannot suspend sandbox docker:" + id, e);
      }
    }
  }

  @Override
  public void resume(WorkspaceRef ref) {
    wake(checkedId(ref));
  }

  @Override
  public void stop(WorkspaceRef ref) {
    String id = checkedId(ref);
    try {
      if (Boolean.TRUE.equals(state(id).getPaused())) {
        daemon().client().unpauseContainerCmd(containerName(id)).exec();
      }
      daemon().client().stopContainerCmd(containerName(id)).withTimeout(2).exec();
    } catch (NotModifiedException e) {
      // stopped already
    } catch (DockerException e) {
      throw Daemon.translate("cannot stop sandbox docker:" + id, e);
    }
  }

  @Override
  public void start(WorkspaceRef ref) {
    wake(checkedId(ref));
  }

  /**
   * Removes what crashed creations left: sandbox containers that the daemon marks dead, and those
   * created but never started whose creator is gone (the JVM died in between). The creator is the
   * process named by the container's {@value #LABEL_CREATOR} label, when it ran on this machine;
   * one made elsewhere is removed once it is ten minutes old. Also removes the daemon networks of
   * named networks no container is on.
   *
   * @return the ids removed
   */
  public List<String> gc() {
    List<String> removed = gcContainers();
    networking.removeUnusedNamedNetworks();
    return removed;
  }

  private List<String> gcContainers() {
    List<String> removed = new ArrayList<>();
    List<Container> containers;
    try {
      containers =
          daemon()
              .client()
              .listContainersCmd()
              .withShowAll(true)
              .withLabelFilter(List.of(LABEL_ID))
              .exec();
    } catch (DockerException e) {
      throw Daemon.translate("cannot look for docker sandboxes to clean", e);
    }
    for (Container c : containers) {
      // the states are picked here, not in the query: Podman refuses a status filter 'dead'
      // (it has no such state)
      if (!"created".equals(c.getState()) && !"dead".equals(c.getState())) {
        continue;
      }
      if ("created".equals(c.getState()) && creatorMayStillStart(c)) {
        continue;
      }
      try {
        daemon()
            .client()
            .removeContainerCmd(c.getId())
            .withForce(true)
            .withRemoveVolumes(true)
            .exec();
        removed.add(c.getLabels().get(LABEL_ID));
      } catch (NotFoundException e) {
        // removed meanwhile
      }
    }
    return removed;
  }

  /** The label naming the process that created a container: {@code host/pid/start millis}. */
  static final String LABEL_CREATOR = "dev.sandbox4j.creator";

  private static String creator() {
    ProcessHandle self = ProcessHandle.current();
    long start = self.info().startInstant().map(java.time.Instant::toEpochMilli).orElse(0L);
    return hostName() + "/" + self.pid() + "/" + start;
  }

  private static String hostName() {
    try {
      return java.net.InetAddress.getLocalHost().getHostName();
    } catch (java.io.IOException e) {
      return "unknown";
    }
  }

  private static boolean creatorMayStillStart(Container c) {
    String[] creator = c.getLabels().getOrDefault(LABEL_CREATOR, "").split("/");
    if (creator.length == 3 && creator[0].equals(hostName())) {
      try {
        long pid = Long.parseLong(creator[1]);
        long start = Long.parseLong(creator[2]);
        return ProcessHandle.of(pid)
            .flatMap(p -> p.info().startInstant())
            .map(i -> i.toEpochMilli() == start)
            .orElse(false);
      } catch (NumberFormatException e) {
        return false;
      }
    }
    long ageSeconds = java.time.Instant.now().getEpochSecond() - c.getCreated();
    return ageSeconds < 600;
  }

  // ---- for the workspace ---------------------------------------------------------------------

  Daemon daemon() {
    if (daemonOf != null) {
      return daemonOf.daemon();
    }
    Daemon d = daemon;
    if (d == null) {
      synchronized (this) {
        if (daemon == null) {
          daemon = new Daemon(host != null ? host : DockerHosts.discover());
        }
        d = daemon;
      }
    }
    return d;
  }

  /** The size of this provider's new sandboxes, for the snapshots it lists. */
  int cpus() {
    return cpus;
  }

  long memoryBytes() {
    return memoryBytes;
  }

  int pids() {
    return pids;
  }

  Runnable beforeCreate() {
    return beforeCreate;
  }

  String containerName(String id) {
    return "sandbox4j-" + id;
  }

  /**
   * Creates and starts the container of a new sandbox {@code id}, from {@code from} (a fork's
   * image, {@code parent} the sandbox it forks, whose egress policy and token it takes) or else
   * this provider's image.
   */
  void createContainer(String id, String from, String parent) {
    String imageName;
    try {
      imageName =
          from != null
              ? from
              : snapshot != null
                  ? SandboxImages.SNAPSHOTS + ":" + snapshot
                  : image != null ? image : defaultImage();
    } catch (DockerException e) {
      throw Daemon.translate("cannot create a sandbox", e);
    }
    Map<String, String> allLabels = new LinkedHashMap<>(labels);
    allLabels.put(LABEL_ID, id);
    allLabels.put(LABEL_CREATOR, creator());
    List<String> joined = networking.namedNetworksFor(parent);
    if (!joined.isEmpty()) {
      allLabels.put(DockerNetworking.LABEL_NETWORKS, String.join(",", joined));
    }
    HostConfig hostConfig =
        HostConfig.newHostConfig()
            .withInit(true)
            .withMemory(memoryBytes)
            .withMemorySwap(memoryBytes)
            .withPidsLimit((long) pids)
            .withNanoCPUs(cpus * 1_000_000_000L)
            .withPrivileged(false);
    boolean podman;
    try {
      podman = daemon().podman();
    } catch (DockerException e) {
      throw Daemon.translate("cannot create a sandbox", e);
    }
    if (podman) {
      // Podman gives a non-root user every capability named in CapAdd, effective in all its
      // processes (Docker: only in the bounding set). So none is added: its default set, less
      // every capability that is not Docker's, which only narrows it
      hostConfig.withCapDrop(NOT_DOCKERS).withUlimits(podmanUlimits());
    } else {
      hostConfig.withCapDrop(Capability.ALL).withCapAdd(CAPABILITIES);
    }
    if (diskBytes > 0) {
      hostConfig.withStorageOpt(Map.of("size", Long.toString(diskBytes)));
    }
    List<String> envList = new ArrayList<>();
    networking.prepare(id, parent, hostConfig).forEach((k, v) -> envList.add(k + "=" + v));
    try {
      timers.prepare(id, parent, networking.onEgressNetwork());
    } catch (RuntimeException e) {
      networking.forget(id);
      throw e;
    }
    env.forEach((k, v) -> envList.add(k + "=" + v)); // the builder's win over the proxy's
    try {
      CreateContainerCmd create =
          daemon()
              .client()
              .createContainerCmd(imageName)
              .withName(containerName(id))
              .withHostName(id)
              .withLabels(allLabels)
              .withEnv(envList)
              .withEntrypoint(
                  "/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 86400 & wait $!; done")
              .withCmd(List.of())
              .withHostConfig(hostConfig);
      if (workingDirectory != null) {
        create.withWorkingDir(workingDirectory);
      }
      if (user != null) {
        create.withUser(user);
      }
      try {
        create.exec();
      } catch (NotFoundException missing) {
        if (from != null || snapshot != null || image == null) {
          throw missing; // a fork's image or a snapshot is the daemon's own: nothing to pull
        }
        pull(imageName);
        create.exec();
      }
      try {
        networking.join(id, joined);
        daemon().client().startContainerCmd(containerName(id)).exec();
        networking.started(id);
      } catch (RuntimeException e) {
        destroyQuietly(id);
        throw e;
      }
    } catch (NotFoundException e) {
      destroyQuietly(id);
      if (imageName.equals(defaultImage)) {
        defaultImage = null; // removed from the daemon: the next create imports it again
      }
      throw new WorkspaceException(
          "cannot create a sandbox: the Docker daemon at "
              + daemon().where()
              + " has no image '"
              + imageName
              + "' ("
              + e.getMessage()
              + ")",
          e);
    } catch (DockerException e) {
      destroyQuietly(id);
      if (diskBytes > 0 && String.valueOf(e.getMessage()).contains("storage-opt")) {
        throw new WorkspaceException(
            "cannot create a sandbox with a disk quota: the Docker daemon at "
                + daemon().where()
                + " cannot enforce one with its storage driver ("
                + e.getMessage().strip()
                + "); leave disk unset there",
            e);
      }
      throw new WorkspaceException(
          "cannot create a sandbox on the Docker daemon at "
              + daemon().where()
              + ": "
              + e.getMessage(),
          e);
    }
  }

  /**
   * Pulls image {@code reference} into the daemon, as {@code docker run} does with an image it does
   * not have: from its registry, with the credentials the daemon's client finds in the docker CLI's
   * configuration ({@code ~/.docker/config.json}). Progress says so first; the daemon's own
   * per-layer progress is not relayed.
   *
   * @throws NotFoundException if the registry has no such image
   */
  private void pull(String reference) {
    progress.accept("pulling " + reference + " into the Docker daemon at " + daemon().where());
    try {
      boolean done =
          daemon()
              .client()
              .pullImageCmd(reference)
              .exec(new com.github.dockerjava.api.command.PullImageResultCallback())
              .awaitCompletion(PULL_TIMEOUT.toMinutes(), java.util.concurrent.TimeUnit.MINUTES);
      if (!done) {
        throw new WorkspaceException(
            "cannot create a sandbox: pulling '"
                + reference
                + "' into the Docker daemon took over "
                + PULL_TIMEOUT.toMinutes()
                + " minutes");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException(
          "interrupted while pulling " + reference);
    } catch (NotFoundException e) {
      throw e;
    } catch (DockerException | com.github.dockerjava.api.exception.DockerClientException e) {
      throw new WorkspaceException(
          "cannot create a sandbox: the Docker daemon at "
              + daemon().where()
              + " could not pull '"
              + reference
              + "': "
              + e.getMessage(),
          e);
    }
  }

  /** The longest a pull may take before a create gives up on it. */
  private static final java.time.Duration PULL_TIMEOUT = java.time.Duration.ofMinutes(30);

  /**
   * The open-file and process limits of a sandbox on Podman. Docker's containers inherit its
   * daemon's limits; Podman as root asks for 1048576 of both instead, which its OCI runtime cannot
   * set where root lacks CAP_SYS_RESOURCE above the host's hard limits (in a container or a
   * restricted VM: the container never starts). So: Linux's usual 1024 open files, raisable to 4096
   * (any host grants that); and processes as many as the pids limit allows, at least 4096 (a
   * per-user limit, counted over every process of the sandbox's uid on the daemon's host, so it
   * must not be tight: the pids limit is what bounds one sandbox).
   */
  private com.github.dockerjava.api.model.Ulimit[] podmanUlimits() {
    long nproc = Math.max(4096, pids);
    return new com.github.dockerjava.api.model.Ulimit[] {
      new com.github.dockerjava.api.model.Ulimit("nofile", 1024L, 4096L),
      new com.github.dockerjava.api.model.Ulimit("nproc", nproc, nproc)
    };
  }

  /**
   * The default image's name in the daemon, found (or imported) by the first create and kept: a
   * create then costs no store read and no image inspection. Forgotten when a create from it finds
   * it gone (removed from the daemon meanwhile), so the next create imports it again.
   */
  private String defaultImage() {
    String name = defaultImage;
    if (name == null) {
      name = DefaultDockerImage.ensure(daemon(), progress);
      defaultImage = name;
    }
    return name;
  }

  private void destroyQuietly(String id) {
    try {
      daemon().client().removeContainerCmd(containerName(id)).withForce(true).exec();
    } catch (DockerException e) {
      // never created
    }
    networking.forget(id);
  }

  /**
   * Sandbox {@code id} ({@code container}) was attached to by ref: refused if it is on a named
   * network this provider was not built with; what serves its network runs again if it died.
   */
  void attached(String id, InspectContainerResponse container) {
    networking.checkAccess(id, container, "use");
    networking.attached(id);
  }

  // ---- pausing never overlaps a starting exec (PauseLock) -------------------------------------

  private java.nio.file.Path stateDir(String id) {
    return DockerHome.of(daemon().host()).sandbox(id);
  }

  /** Starts an exec in sandbox {@code id} ({@link Daemon#exec}), never while it is being paused. */
  ExecProcess exec(
      String id, List<String> argv, List<String> env, String dir, String user, String name) {
    return PauseLock.execStarting(
        stateDir(id), () -> daemon().exec(containerName(id), argv, env, dir, user, name));
  }

  /** Runs {@code pause} (which pauses sandbox {@code id}) while no exec starts in it. */
  <T> T pausing(String id, java.util.function.Supplier<T> pause) {
    return PauseLock.pausing(stateDir(id), pause);
  }

  /**
   * Runs {@code argv} as root in sandbox {@code id} and fails naming {@code what} unless it exits
   * 0; the sandbox destroyed if this was its creation.
   */
  void runAsRoot(String id, List<String> argv, String what) {
    try {
      ExecProcess p =
          exec(id, argv, List.of("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), "/", "0", "root-" + id);
      try {
        p.getOutputStream().close();
        String err =
            new String(p.getErrorStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        int code = p.waitFor();
        if (code != 0) {
          throw new WorkspaceException(
              "cannot "
                  + what
                  + " in sandbox docker:"
                  + id
                  + " (exit "
                  + code
                  + "): "
                  + err.strip());
        }
      } finally {
        p.release();
      }
    } catch (DockerException e) {
      throw Daemon.translate("cannot " + what + " in sandbox docker:" + id, e);
    } catch (java.io.IOException e) {
      throw new WorkspaceException("cannot " + what + " in sandbox docker:" + id + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new WorkspaceException("interrupted while trying to " + what, e);
    }
  }

  InspectContainerResponse inspect(String id) {
    try {
      return daemon().client().inspectContainerCmd(containerName(id)).exec();
    } catch (NotFoundException e) {
      throw timers
          .ended(id)
          .orElseGet(
              () ->
                  new WorkspaceUnavailableException("sandbox docker:" + id + " does not exist", e));
    } catch (DockerException e) {
      throw Daemon.translate("cannot inspect sandbox docker:" + id, e);
    }
  }

  /**
   * Whether a command of sandbox {@code id} that a signal ended was ended because the sandbox went
   * away: destroyed through this provider, or its container missing, being removed, dead or no
   * longer running. A SIGKILL seen while the container still runs is looked at again for a moment:
   * the daemon marks the container only after its processes died.
   */
  boolean killedByItsEnd(String id, int exitCode) {
    for (int look = 0; ; look++) {
      if (destroyed.contains(id)) {
        return true;
      }
      String status;
      try {
        status =
            daemon().client().inspectContainerCmd(containerName(id)).exec().getState().getStatus();
      } catch (NotFoundException | Daemon.Unreachable e) {
        return true; // gone, or its daemon is: either way the command cannot be told apart
      }
      boolean alive =
          "running".equals(status) || "paused".equals(status) || "restarting".equals(status);
      if (!alive) {
        return true;
      }
      if (exitCode != 137 || look == 5) {
        return false;
      }
      try {
        Thread.sleep(50);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
  }

  private InspectContainerResponse.ContainerState state(String id) {
    return inspect(id).getState();
  }

  /** Unpauses a paused container, starts a stopped one; quiet if it runs. */
  void wake(String id) {
    InspectContainerResponse.ContainerState state = state(id);
    try {
      if (Boolean.TRUE.equals(state.getPaused())) {
        daemon().client().unpauseContainerCmd(containerName(id)).exec();
      } else if (!Boolean.TRUE.equals(state.getRunning())) {
        daemon().client().startContainerCmd(containerName(id)).exec();
      }
    } catch (NotModifiedException e) {
      // woken meanwhile
    } catch (DockerException e) {
      throw Daemon.translate("cannot wake sandbox docker:" + id, e);
    }
  }

  static String checkedId(WorkspaceRef ref) {
    if (!ref.provider().equals(NAME)) {
      throw new IllegalArgumentException("not a docker sandbox: " + ref);
    }
    return DockerHome.checkId(ref.id());
  }

  /** Builds a {@link DockerSandbox}; every setter validates its argument and names it on error. */
  public static final class Builder {
    private DockerHosts.Found host;
    private String image;
    private String snapshot;
    private int cpus = 1;
    private long memoryBytes;
    private int pids = 1024;
    private final Map<String, String> env = new LinkedHashMap<>();
    private final Map<String, String> labels = new LinkedHashMap<>();
    private String workingDirectory;
    private String user;
    private DockerNetworking.Mode network = DockerNetworking.Mode.EGRESS;
    private EgressPolicy egress = EgressPolicy.all();
    private boolean portToken;
    private final List<String> networks = new ArrayList<>();
    private Duration autoSuspendTimeout = Duration.ZERO;
    private Duration sandboxTimeout = Timers.MAX_LIFETIME;
    private Duration idleTimeout = Duration.ZERO;
    private Instant deleteAfter;
    private boolean timersSet;
    private long diskBytes;
    private Consumer<String> progress = line -> {};
    private Runnable beforeCreate = () -> {};
    private DockerSandbox daemonOf;

    private Builder() {}

    /**
     * The daemon, as {@code unix:///path/docker.sock} or {@code tcp://host:port} (default: found as
     * the docker CLI finds it).
     */
    public Builder host(String uri) {
      Objects.requireNonNull(uri, "host");
      this.host = DockerHosts.discover(Map.of("DOCKER_HOST", uri), java.nio.file.Path.of("/"));
      return this;
    }

    /**
     * The image of new sandboxes (default: Sandbox4j's default image): any the daemon has, or can
     * pull from its registry, which the first create then does ({@code python:3.12-slim}, a
     * snapshot pushed by {@code LocalSandbox.pushImage}).
     */
    public Builder image(String image) {
      if (image == null || image.isBlank()) {
        throw new IllegalArgumentException("image: must not be blank");
      }
      this.image = image;
      return this;
    }

    /** The snapshot new sandboxes start from ({@link DockerSandbox#snapshot}); not with image. */
    public Builder snapshot(String name) {
      if (name == null || !SandboxImages.SNAPSHOT_NAME.matcher(name).matches()) {
        throw new IllegalArgumentException("snapshot: no such snapshot name '" + name + "'");
      }
      this.snapshot = name;
      return this;
    }

    /** CPUs of a new sandbox (1 to 64; default 1). */
    public Builder cpus(int cpus) {
      if (cpus < 1 || cpus > 64) {
        throw new IllegalArgumentException("cpus: must be 1 to 64, not " + cpus);
      }
      this.cpus = cpus;
      return this;
    }

    /** Memory of a new sandbox in bytes (at least 64 MiB; default 4 GiB per CPU); no swap. */
    public Builder memory(long bytes) {
      this.memoryBytes = atLeast64Mib("memory", bytes);
      return this;
    }

    private static long atLeast64Mib(String what, long bytes) {
      if (bytes < 64L * 1024 * 1024) {
        throw new IllegalArgumentException(
            what + ": must be at least 64 MiB, not " + bytes + " bytes");
      }
      return bytes;
    }

    /** The most processes a new sandbox may have at once (16 to 65536; default 1024). */
    public Builder pids(int pids) {
      if (pids < 16 || pids > 65536) {
        throw new IllegalArgumentException("pids: must be 16 to 65536, not " + pids);
      }
      this.pids = pids;
      return this;
    }

    /** A variable every command of a new sandbox gets (over the image's). */
    public Builder env(String name, String value) {
      if (name == null || name.isEmpty() || name.contains("=") || name.indexOf('\0') >= 0) {
        throw new IllegalArgumentException("env: bad variable name '" + name + "'");
      }
      if (value == null || value.indexOf('\0') >= 0) {
        throw new IllegalArgumentException(
            "env: the value of " + name + " must be a string without NUL");
      }
      env.put(name, value);
      return this;
    }

    /** Variables every command of a new sandbox gets; see {@link #env(String, String)}. */
    public Builder env(Map<String, String> vars) {
      vars.forEach(this::env);
      return this;
    }

    /** A label of a new sandbox's container. */
    public Builder label(String key, String value) {
      if (key == null || key.isEmpty() || key.startsWith("dev.sandbox4j.")) {
        throw new IllegalArgumentException("label: bad or reserved key '" + key + "'");
      }
      labels.put(key, Objects.requireNonNull(value, "label value"));
      return this;
    }

    /** The directory commands start in (default: the image's {@code WORKDIR}, else /). */
    public Builder workingDirectory(String dir) {
      if (dir == null || !dir.startsWith("/")) {
        throw new IllegalArgumentException("workingDirectory: must be absolute, not " + dir);
      }
      this.workingDirectory = dir;
      return this;
    }

    /** The user commands run as (default: the image's {@code USER}). */
    public Builder user(String user) {
      if (user == null || user.isBlank()) {
        throw new IllegalArgumentException("user: must not be blank");
      }
      this.user = user;
      return this;
    }

    /**
     * Where a new sandbox may connect to (default {@link EgressPolicy#all()}: the public internet,
     * nothing private, not the host), as for the local engine, and changeable while it runs ({@link
     * DockerSandbox#setEgress}). The sandbox is on the daemon's network {@code sandbox4j-egress},
     * which Docker keeps from forwarding anywhere and whose containers cannot reach each other; the
     * host lets it reach only the egress proxy (the same proxy as the local engine's, run by this
     * daemon's supervisor process on the network's gateway) and a DNS stub that knows no name. So a
     * sandbox reaches the network over HTTP(S) through the proxy (its commands get {@code
     * HTTP_PROXY} and {@code HTTPS_PROXY}), never with raw TCP or UDP, under the policy's rules and
     * header injection.
     *
     * <p>That needs the daemon's networks on this host and this process to be root (the proxy binds
     * the gateway, and the firewall is this host's): creating a sandbox elsewhere (Docker Desktop,
     * rootless Docker, a remote daemon) fails saying so, and names the two choices there: {@link
     * EgressPolicy#none()} or {@link #bridgeNetwork()}. {@link EgressPolicy#none()} gives the
     * sandbox no network at all ({@code NetworkMode=none}), for good.
     */
    public Builder egress(EgressPolicy policy) {
      Objects.requireNonNull(policy, "egress");
      this.network =
          policy.mode() == EgressPolicy.Mode.NONE
              ? DockerNetworking.Mode.NONE
              : DockerNetworking.Mode.EGRESS;
      this.egress = policy;
      return this;
    }

    /** New sandboxes get no network at all, for good: {@code egress(EgressPolicy.none())}. */
    public Builder noNetwork() {
      return egress(EgressPolicy.none());
    }

    /**
     * New sandboxes go on Docker's default bridge, as {@code docker run} puts a container: they
     * reach the internet, and also the host, the other containers on that bridge and every network
     * the host reaches. Docker's isolation, not an egress policy (none can be set): for a daemon
     * where the egress network is impossible (Docker Desktop, rootless Docker) and a sandbox needs
     * a network anyway.
     */
    public Builder bridgeNetwork() {
      this.network = DockerNetworking.Mode.BRIDGE;
      this.egress = null;
      return this;
    }

    /**
     * Puts a new sandbox on named network {@code name} (1 to 32 of a-z, 0-9, '-'), as for the local
     * engine: the sandboxes on it reach each other, by id as host name, and nothing else does. It
     * is the daemon's internal network {@code sandbox4j-a-NAME}, made on first use, whose bridge
     * the host firewalls as the egress network's (no host port, nothing forwarded elsewhere); the
     * sandbox keeps its egress policy. A provider built with a network may also attach to and fork
     * sandboxes on it; one built without refuses them. May be called for several networks; not with
     * {@link #noNetwork}.
     */
    public Builder network(String name) {
      String checked = dev.sandbox4j.runtime.internal.net.Networks.checkNetworkName(name);
      if (!networks.contains(checked)) {
        networks.add(checked);
      }
      return this;
    }

    /**
     * Whether a new sandbox's port URLs need an access token (default false), as for the local
     * engine; a fork gets a token of its own if its parent had one.
     */
    public Builder portToken(boolean required) {
      this.portToken = required;
      return this;
    }

    /**
     * The most a new sandbox may write (its writable layer), as the daemon's {@code storage-opt
     * size}. Only some storage drivers can: overlay2 on xfs with {@code pquota}, btrfs, zfs; on
     * others (overlay2 on ext4, Docker Desktop's default) creating the sandbox fails with the
     * daemon's reason. Default: no quota.
     */
    public Builder disk(long bytes) {
      this.diskBytes = atLeast64Mib("disk", bytes);
      return this;
    }

    /**
     * How long a new sandbox may be idle before it is paused (boxd's {@code auto_suspend_timeout});
     * zero, the default, never. Idle means: no command running in it (an exec of the daemon's),
     * none started or ended within that time, and its processes used less than 0.1 CPU. Any
     * operation, and a request to its port URLs, wakes it. Timers are enforced by the daemon's
     * supervisor process, as the local engine's are (see {@link #egress}).
     */
    public Builder autoSuspendTimeout(Duration idle) {
      this.autoSuspendTimeout = Timers.checkIdle(idle, "autoSuspendTimeout");
      this.timersSet = true;
      return this;
    }

    /**
     * The total lifetime of a new sandbox from its creation (Modal's {@code sandbox_timeout}): 10
     * seconds to 24 hours, default 24 hours for a sandbox on the egress network (none for one
     * without it unless a timer is set). Then it is destroyed, and using it raises {@link
     * WorkspaceUnavailableException} saying so.
     */
    public Builder sandboxTimeout(Duration lifetime) {
      this.sandboxTimeout = Timers.checkLifetime(lifetime);
      this.timersSet = true;
      return this;
    }

    /**
     * How long a new sandbox may be idle (as for {@link #autoSuspendTimeout}) before it is
     * destroyed (Modal's {@code idle_timeout}); zero, the default, never. A paused or stopped
     * sandbox is idle.
     */
    public Builder idleTimeout(Duration idle) {
      this.idleTimeout = Timers.checkIdle(idle, "idleTimeout");
      this.timersSet = true;
      return this;
    }

    /** A point in time at which a new sandbox is destroyed, or null (the default) for none. */
    public Builder deleteAfter(Instant when) {
      this.deleteAfter = when;
      this.timersSet = this.timersSet || when != null;
      return this;
    }

    /** Where progress of long work (importing the default image) goes, a line at a time. */
    public Builder progress(Consumer<String> progress) {
      this.progress = Objects.requireNonNull(progress, "progress");
      return this;
    }

    /** Runs before each creation: a test seam, as {@code LocalSandbox.Builder.beforeCreate}. */
    Builder beforeCreate(Runnable hook) {
      this.beforeCreate = Objects.requireNonNull(hook, "beforeCreate");
      return this;
    }

    /**
     * Talks to the daemon through {@code provider}'s connection (its daemon, client and connection
     * pool) instead of opening one of its own: for many providers of one daemon, such as the one
     * per request shape a server makes, which would otherwise each keep a connection open for as
     * long as they are reachable, and some longer. Not with {@link #host}.
     */
    public Builder daemonOf(DockerSandbox provider) {
      this.daemonOf = Objects.requireNonNull(provider, "provider");
      return this;
    }

    /** The provider. */
    public DockerSandbox build() {
      if (network == DockerNetworking.Mode.NONE && !networks.isEmpty()) {
        throw new IllegalStateException(
            "noNetwork() (egress none) and network("
                + networks.getFirst()
                + ") cannot both be set:"
                + " a sandbox without a network cannot join one");
      }
      if (daemonOf != null && host != null) {
        throw new IllegalStateException(
            "daemonOf and host cannot both be set: the daemon is the other provider's");
      }
      if (snapshot != null && image != null) {
        throw new IllegalStateException(
            "snapshot and image cannot both be set: a sandbox from a snapshot has the snapshot's files");
      }
      return new DockerSandbox(this);
    }
  }
}
