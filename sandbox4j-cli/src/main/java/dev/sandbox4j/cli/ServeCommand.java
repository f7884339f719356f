package dev.sandbox4j.cli;

import dev.sandbox4j.boxd.BoxdSandbox;
import dev.sandbox4j.docker.DockerSandbox;
import dev.sandbox4j.kubernetes.KubernetesSandbox;
import dev.sandbox4j.modal.ModalSandbox;
import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.server.SandboxServer;
import dev.sandbox4j.server.ServerEngine;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/**
 * {@code sandbox4j serve}: the local engine, or a Docker daemon ({@code --provider docker}), as a
 * multi-tenant HTTP service.
 */
@Command(
    name = "serve",
    mixinStandardHelpOptions = true,
    description = {
      "Serves this machine's sandboxes over HTTP (the API of docs/server-api.md, also at"
          + " /v1/openapi.json) until interrupted. Every /v1 request needs an API key: create one"
          + " with 'sandbox4j keys create --org NAME'.",
      "One JSON line per request goes to stderr; Prometheus metrics are at /metrics. Sandboxes"
          + " keep running when the server stops; a new server on the same --data sees them.",
      "MCP clients reach the Coder tools at /mcp (streamable HTTP, same keys): each session in"
          + " /mcp?sandbox=ID, or in a sandbox created on its first tool call.",
      "Organizations start sandboxes only from their own snapshots and the images published"
          + " with 'sandbox4j image publish' ('default' is); no sandbox may ask for more than"
          + " --max-cpus, --max-memory, --max-pids, --max-disk and --max-disk-inodes.",
      "--provider docker serves containers of the Docker daemon instead (found as the docker CLI"
          + " finds it), from the default image and the organizations' snapshots, with no network;"
          + " hibernate, egress rules, timers, diskInodes and gVisor isolation answer 501"
          + " not_supported there. A data"
          + " directory serves one provider: give a docker server its own --data and keys.",
      "--provider boxd serves machines of one boxd account (BOXD_API_KEY or BOXD_TOKEN, and"
          + " BOXD_BASE_URL): memory, pids, disk and inode quotas, labels, idle timeouts,"
          + " delete-after, hibernate, fork, egress rules and gVisor answer 501 there;"
          + " --provider modal serves one Modal account's sandboxes likewise.",
      "--provider k8s serves workspaces on the Kubernetes cluster of KUBECONFIG (else"
          + " ~/.kube/config, else the pod's service account), in --namespace: agent-sandbox"
          + " Sandboxes where the cluster has them, else pods; pids, disk and inode quotas,"
          + " snapshots, idle and auto-suspend timers and delete-after answer 501 there."
    })
final class ServeCommand implements Callable<Integer> {
  /** {@code --max-image-size}'s default: a large image (CUDA, a desktop) fits, a bomb does not. */
  static final long DEFAULT_MAX_IMAGE_SIZE = 10L << 30;

  @ParentCommand SandboxCommand root;

  @Option(
      names = "--provider",
      paramLabel = "NAME",
      description =
          "Whose sandboxes to serve: local (this machine's engine), docker (a Docker daemon's"
              + " containers), boxd (machines of the boxd account of BOXD_API_KEY or"
              + " BOXD_TOKEN) or modal (sandboxes of the Modal account of MODAL_TOKEN_ID or"
              + " ~/.modal.toml) or k8s (workspaces on the Kubernetes cluster of KUBECONFIG)."
              + " Default: ${DEFAULT-VALUE}.",
      defaultValue = "local")
  String provider;

  @Option(
      names = "--namespace",
      paramLabel = "NAME",
      description =
          "With --provider k8s: the namespace of every sandbox. Default: the kubeconfig's"
              + " (in a pod, the pod's own).")
  String namespace;

  @Option(
      names = "--bind",
      paramLabel = "ADDRESS",
      description = "The address to listen on. Default: ${DEFAULT-VALUE} (this machine only).",
      defaultValue = "127.0.0.1")
  String bind;

  @Option(
      names = "--port",
      paramLabel = "PORT",
      description = "The port; 0 picks a free one. Default: ${DEFAULT-VALUE}.",
      defaultValue = "7070")
  int port;

  @Option(
      names = "--data",
      paramLabel = "DIR",
      description = "The server's database directory. Default: $SANDBOX4J_HOME/server.")
  Path data;

  @Option(
      names = "--max-cpus",
      paramLabel = "N",
      description =
          "The most CPUs one sandbox may ask for; more is a 400 naming 'cpus'. Default: this"
              + " machine's CPUs.")
  Integer maxCpus;

  @Option(
      names = "--max-memory",
      paramLabel = "SIZE",
      converter = ByteSizeConverter.class,
      description =
          "The most memory one sandbox may ask for, e.g. 8G; more is a 400 naming 'memoryBytes'."
              + " Default: this machine's memory less an eighth (at least 1G) for the host.")
  Long maxMemory;

  @Option(
      names = "--max-pids",
      paramLabel = "N",
      description =
          "The most processes one sandbox may ask for; more is a 400 naming 'pids'. Default: a"
              + " quarter of kernel.pid_max, at most 32768.")
  Integer maxPids;

  @Option(
      names = "--max-disk",
      paramLabel = "SIZE",
      converter = ByteSizeConverter.class,
      description =
          "The largest disk one sandbox may ask for, e.g. 50G; more is a 400 naming 'diskBytes'."
              + " Default: a quarter of the file system that holds the engine's home (with docker:"
              + " the data directory; at least 1G, at most 16T).")
  Long maxDisk;

  @Option(
      names = "--max-disk-inodes",
      paramLabel = "N",
      description =
          "The most inodes (files) one sandbox's disk may ask for; more is a 400 naming"
              + " 'diskInodes'. Default: 1000000, the engine's default.")
  Long maxDiskInodes;

  @Option(
      names = "--disk-overcommit",
      paramLabel = "FACTOR",
      description =
          "How far the sandboxes' disks may promise the free space above the reserve: a create or"
              + " fork is a 503 'insufficient_disk' when its disk plus what every disk may still"
              + " write exceeds FACTOR times that space. 1 guarantees the sandboxes never take the"
              + " host below the reserve; more admits more mostly idle sandboxes. Default: 4.")
  Double diskOvercommit;

  @Option(
      names = "--allow-registry",
      paramLabel = "HOST[/PATH]",
      description =
          "Let creates name images by registry reference from this registry or repository prefix"
              + " (docker.io, docker.io/library, ghcr.io/acme), pulled on first use with this"
              + " server's credentials (~/.docker/config.json): every organization may use them."
              + " Repeatable. Local engine only. Default: none, creates name published images.")
  List<String> allowRegistries = List.of();

  @Option(
      names = "--max-image-size",
      paramLabel = "SIZE",
      converter = ByteSizeConverter.class,
      description =
          "The largest image the server pulls for --allow-registry, e.g. 20G: compressed as"
              + " downloaded and extracted (a layer of a few KiB can expand to terabytes); a"
              + " larger one is a 400 naming 'image' and nothing of it is kept. A pull never takes"
              + " the disk below the engine's reserve. Default: 10G.")
  Long maxImageSize;

  @Option(
      names = "--default-isolation",
      paramLabel = "container|gvisor",
      converter = IsolationOption.Parse.class,
      description =
          "The isolation of a sandbox whose create asks for none (its 'isolation' field); a create"
              + " may still ask for the other. Default: container.")
  Isolation defaultIsolation;

  @Option(
      names = "--force-isolation",
      paramLabel = "container|gvisor",
      converter = IsolationOption.Parse.class,
      description =
          "Give every new sandbox of every organization this isolation: a create that asks for"
              + " none gets it, one that asks for another is a 400 naming 'isolation'. gvisor keeps"
              + " all tenants' code off this machine's kernel. Sandboxes made before keep theirs.")
  Isolation forceIsolation;

  @Option(
      names = "--warm-pool",
      paramLabel = "N",
      description =
          "Keep N sandboxes created ahead of need (0 to 64), so that a create asking for the"
              + " defaults (no image, snapshot, size, working directory or network of its own; the"
              + " default isolation) only finishes one: any organization's labels and timers are set"
              + " when it is taken, and nothing ran in it before. They count against the host like"
              + " other sandboxes and are destroyed when the server stops. Default: 0.")
  int warmPool;

  @Override
  public Integer call() {
    CountDownLatch stopped = new CountDownLatch(1);
    ServerEngine engine;
    try {
      engine = engine();
    } catch (IllegalArgumentException e) {
      root.context().err().println("sandbox4j: " + e.getMessage());
      return ExitCodes.USAGE;
    }
    if (provider.equals(DockerSandbox.NAME) && !DockerSandbox.isDaemonConfigured()) {
      // no connection is made: a daemon that is configured but down is each request's 503
      root.context()
          .err()
          .println(
              "sandbox4j: --provider docker: no Docker daemon here (no DOCKER_HOST, docker"
                  + " context or known socket such as /var/run/docker.sock)");
      return ExitCodes.UNAVAILABLE;
    }
    SandboxServer.Builder builder =
        SandboxServer.builder()
            .engine(engine)
            .dataDirectory(data != null ? data : KeysCommand.dataDirectory(root))
            .bind(bind, port)
            .requestLog(
                line -> {
                  root.context().err().println(line);
                  root.context().err().flush();
                });
    try {
      if (maxCpus != null) {
        builder.maxCpusPerSandbox(maxCpus);
      }
      if (maxMemory != null) {
        builder.maxMemoryPerSandbox(maxMemory);
      }
      if (maxPids != null) {
        builder.maxPidsPerSandbox(maxPids);
      }
      if (maxDisk != null) {
        builder.maxDiskPerSandbox(maxDisk);
      }
      if (maxDiskInodes != null) {
        builder.maxDiskInodesPerSandbox(maxDiskInodes);
      }
      allowRegistries.forEach(builder::allowRegistry);
      if (forceIsolation != null) {
        builder.forceIsolation(forceIsolation);
      } else if (defaultIsolation != null) {
        builder.defaultIsolation(defaultIsolation);
      }
    } catch (IllegalArgumentException e) {
      root.context().err().println("sandbox4j: " + e.getMessage());
      return ExitCodes.USAGE;
    }
    SandboxServer server;
    try {
      server = builder.build();
    } catch (IllegalArgumentException e) {
      // a data directory of another provider's server
      root.context()
          .err()
          .println(
              "sandbox4j: "
                  + (data != null ? data : KeysCommand.dataDirectory(root))
                  + ": "
                  + e.getMessage());
      return ExitCodes.USAGE;
    }
    Thread hook =
        new Thread(
            () -> {
              server.close();
              stopped.countDown();
            },
            "sandbox4j-serve-stop");
    Runtime.getRuntime().addShutdownHook(hook);
    try {
      server.start();
      root.context().err().println("sandbox4j: serving on " + server.uri());
      // where E2B's SDKs find the server's E2B-compatible API (docs/e2b.md)
      root.context()
          .err()
          .println(
              "sandbox4j: for E2B's SDKs: E2B_API_URL="
                  + server.uri()
                  + "/e2b E2B_SANDBOX_URL="
                  + server.uri()
                  + "/e2b/envd (E2B_API_KEY: a key of this server)");
      root.context().err().flush();
      stopped.await();
    } catch (InterruptedException e) {
      // Ctrl-C or SIGTERM: the CLI interrupts its main thread, and stopping is how serve ends.
      // The flag stays clear: closing must still kill the commands the server started.
    } finally {
      server.close();
      try {
        Runtime.getRuntime().removeShutdownHook(hook);
      } catch (IllegalStateException e) {
        // the JVM is shutting down: the hook is running or ran
      }
    }
    return ExitCodes.OK;
  }

  /** The options only the local engine takes, as the command line names them. */
  private List<String> localOnlyOptions() {
    List<String> set = new ArrayList<>();
    if (diskOvercommit != null) {
      set.add("--disk-overcommit");
    }
    if (maxDiskInodes != null) {
      set.add("--max-disk-inodes");
    }
    if (defaultIsolation == Isolation.GVISOR) {
      set.add("--default-isolation gvisor");
    }
    if (forceIsolation == Isolation.GVISOR) {
      set.add("--force-isolation gvisor");
    }
    if (warmPool != 0) {
      set.add("--warm-pool");
    }
    if (!allowRegistries.isEmpty()) {
      set.add("--allow-registry");
    }
    if (maxImageSize != null) {
      set.add("--max-image-size");
    }
    return set;
  }

  /**
   * The engine of {@code --provider}, shaped by the options.
   *
   * @throws IllegalArgumentException for an unknown provider, an option the provider does not take
   *     (named), or a bad value
   */
  private ServerEngine engine() {
    if (forceIsolation != null && defaultIsolation != null && forceIsolation != defaultIsolation) {
      throw new IllegalArgumentException(
          "--default-isolation "
              + defaultIsolation
              + " contradicts --force-isolation "
              + forceIsolation
              + ", which is every sandbox's isolation: leave --default-isolation out");
    }
    if (warmPool < 0 || warmPool > 64) {
      throw new IllegalArgumentException("--warm-pool must be between 0 and 64, not " + warmPool);
    }
    if (namespace != null && !provider.equals(KubernetesSandbox.NAME)) {
      throw new IllegalArgumentException(
          "--namespace is for --provider k8s only, not --provider " + provider);
    }
    switch (provider) {
      case LocalSandbox.NAME -> {
        for (Isolation wanted : java.util.Arrays.asList(forceIsolation, defaultIsolation)) {
          if (wanted != null && LocalSandbox.unavailable(wanted).isPresent()) {
            // every create (forced) or most (default) would fail: say so now, not per request
            throw new IllegalArgumentException(
                (wanted == forceIsolation ? "--force-isolation " : "--default-isolation ")
                    + wanted
                    + ": "
                    + LocalSandbox.unavailable(wanted).get());
          }
        }
        if (maxImageSize != null && allowRegistries.isEmpty()) {
          throw new IllegalArgumentException(
              "--max-image-size bounds the images pulled for --allow-registry: allow a registry,"
                  + " or leave it out");
        }
        Isolation poolIsolation = forceIsolation != null ? forceIsolation : defaultIsolation;
        LocalSandbox engine =
            root.providers()
                .local(
                    b -> {
                      if (diskOvercommit != null) {
                        b.diskOvercommit(diskOvercommit);
                      }
                      if (warmPool != 0) {
                        b.isolation(poolIsolation != null ? poolIsolation : Isolation.CONTAINER)
                            .warmPool(warmPool);
                      }
                      b.maxImageSize(maxImageSize != null ? maxImageSize : DEFAULT_MAX_IMAGE_SIZE);
                    });
        return ServerEngine.local(engine);
      }
      case DockerSandbox.NAME -> {
        refuseLocalOnlyOptions();
        return new DockerServerEngine(
            line -> {
              root.context().err().println(line);
              root.context().err().flush();
            });
      }
      case BoxdSandbox.NAME -> {
        refuseLocalOnlyOptions();
        return new BoxdServerEngine(root.context().env());
      }
      case ModalSandbox.NAME -> {
        refuseLocalOnlyOptions();
        return new ModalServerEngine(root.context().env());
      }
      case KubernetesSandbox.NAME -> {
        refuseLocalOnlyOptions();
        return new KubernetesServerEngine(root.context().env(), namespace);
      }
      default ->
          throw new IllegalArgumentException(
              "--provider: a server serves local, docker, boxd, modal or k8s sandboxes, not '"
                  + provider
                  + "'");
    }
  }

  /** Refuses the options only the local engine takes, naming them and {@code --provider}. */
  private void refuseLocalOnlyOptions() {
    List<String> refused = localOnlyOptions();
    if (!refused.isEmpty()) {
      throw new IllegalArgumentException(
          String.join(", ", refused)
              + (refused.size() == 1 ? " is" : " are")
              + " for the local engine only, not --provider "
              + provider);
    }
  }
}
