package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.linux.Cgroups;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.oci.OciConfig;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Starting a sandbox's container, for a create, a restart or a restore: mounts its root (the
 * image's layers under its writable layer, idmapped to its block of host ids) unless mounted,
 * writes its OCI bundle from its record while its network's rules are written, runs the container,
 * and gives it its network. The caller holds the sandbox's lock.
 */
final class ContainerStart {
  private final Engine engine;
  private final Path home;
  private final ImageStore images;
  private final Cgroups cgroups;
  private final Networks networks;

  ContainerStart(Engine engine) {
    this.engine = engine;
    this.home = engine.home();
    this.images = engine.images();
    this.cgroups = engine.cgroups();
    this.networks = engine.networks();
  }

  /** Mounts, writes the bundle, runs the container and attaches its network. */
  void start(Path dir, String id, Image image, OciConfig.Limits limits) throws IOException {
    Bundle bundle = prepareBundle(dir, id, image, limits);
    try {
      Overlay.whileStarting(
          dir.resolve("rootfs"),
          () -> {
            OciRuntime runtime = engine.runtimeOf(id);
            runtime.run(id, bundle.path());
            if (runtime.isGvisor()) {
              cgroups.joinUnified(id);
            }
            return null;
          });
      bundle.finishRules(); // written while the runtime started the container
    } catch (RuntimeException e) {
      bundle.rules().ifPresent(r -> r.exceptionally(ignored -> null).join());
      throw e;
    }
    attachNetwork(id, bundle.path());
  }

  /** Gives the running sandbox its veth, address and routes ({@link Networks#attach}). */
  void attachNetwork(String id, Path bundle) {
    Path dir = engine.dir(id);
    if (Networks.saved(dir).isEmpty()) {
      return;
    }
    long pid =
        OciRuntime.initPid(bundle)
            .orElseThrow(
                () -> new WorkspaceException("the runtime wrote no pid file for local:" + id));
    networks.attach(dir, id, pid);
  }

  /** A written bundle, and the rules that may still be being written for it. */
  private record Bundle(Path path, Optional<java.util.concurrent.CompletableFuture<Void>> rules) {
    void finishRules() {
      try {
        rules.ifPresent(java.util.concurrent.CompletableFuture::join);
      } catch (java.util.concurrent.CompletionException e) {
        if (e.getCause() instanceof RuntimeException r) {
          throw r;
        }
        throw e;
      }
    }
  }

  /** Mounts the sandbox's root unless mounted, and writes its OCI bundle; returns the bundle. */
  private Bundle prepareBundle(Path dir, String id, Image image, OciConfig.Limits limits)
      throws IOException {
    Optional<java.util.concurrent.CompletableFuture<Void>> rules = networks.rules(dir, id);
    Path rootfs = dir.resolve("rootfs");
    Optional<Path> hosts =
        Networks.networksOf(dir).isEmpty() ? Optional.empty() : Optional.of(dir.resolve("hosts"));
    int hostBase;
    Optional<Path> tmp;
    try {
      SandboxRecord record = SandboxRecord.read(dir.resolve("state.json"));
      hostBase = record.hostBase();
      IdBlocks.reclaim(home, id, record.idBase());
      if (!Overlay.isMounted(rootfs)) {
        Overlay.mount(
            image.layers(), SandboxDisk.upper(dir), SandboxDisk.work(dir), rootfs, hostBase);
      }
      // Every container start (create, start, restore) comes through here: no sandbox ever runs
      // under a parent without the limits of all sandboxes together.
      cgroups.ensureParent();
      if (hosts.isPresent() && !Files.exists(hosts.get())) {
        networks.writeHosts(dir, id);
      }
      tmp =
          record.isolation() == Isolation.GVISOR
              ? gvisorTmp(id, rootfs, hostBase)
              : Optional.empty();
    } catch (IOException | RuntimeException e) {
      rules.ifPresent(r -> r.exceptionally(ignored -> null).join());
      throw e;
    }
    OciConfig.write(
        dir.resolve("bundle"),
        OciConfig.build(
            id,
            rootfs,
            cgroups.pathOf(id),
            Engine.BASE_ENV,
            limits,
            engine.runtimeOf(id).compiledSeccomp(),
            hosts,
            tmp,
            hostBase));
    return new Bundle(dir.resolve("bundle"), rules);
  }

  /**
   * The directory a gVisor sandbox gets bind-mounted at {@code /tmp}: its root's own {@code /tmp}.
   * runsc mounts a tmpfs of its own at an empty {@code /tmp} unless the spec mounts something
   * there; commands would then write scratch files where the engine's file operations (which work
   * on the root on the host) never look, and the disk quota would not count them. A missing {@code
   * /tmp} is made (1777, the sandbox's root's). Anything but a directory is refused: a bind mount's
   * source is resolved on the host, so a symlink must never be bound, and runsc cannot start over
   * one either. No process of the sandbox runs while this is checked (its container is about to
   * start, under its lock), so the check holds until the mount.
   */
  private static Optional<Path> gvisorTmp(String id, Path rootfs, int hostBase) throws IOException {
    Path tmp = rootfs.resolve("tmp");
    if (!Files.exists(tmp, LinkOption.NOFOLLOW_LINKS)) {
      Files.createDirectory(tmp);
      // the sticky bit has no PosixFilePermission: chmod 1777 through the attribute view
      Files.setAttribute(tmp, "unix:mode", 01777);
      Files.setAttribute(tmp, "unix:uid", hostBase);
      Files.setAttribute(tmp, "unix:gid", hostBase);
    }
    if (!Files.isDirectory(tmp, LinkOption.NOFOLLOW_LINKS)) {
      throw new WorkspaceException(
          "a /tmp that is not a directory (here "
              + (Files.isSymbolicLink(tmp)
                  ? "a symbolic link to " + Files.readSymbolicLink(tmp)
                  : "a file")
              + ") is not supported with gVisor isolation (sandbox local:"
              + id
              + "): make /tmp a directory in the image, or use container isolation");
    }
    return Optional.of(tmp);
  }

  /**
   * Mounts the root of sandbox {@code id} unless mounted and writes its OCI bundle from its record,
   * without starting a container: for {@link Checkpoints#restore}, which starts it from a
   * checkpoint instead. The caller holds the sandbox's lock.
   */
  Path prepareBundle(String id) throws IOException {
    SandboxRecord record = engine.lockedRecord(id);
    Image image = images.layersFor(record.image(), record.layers());
    if (!image.layers().stream().allMatch(Files::isDirectory)) {
      throw Engine.unavailable(id, "the layers of its image '" + record.image() + "' are gone");
    }
    Bundle bundle =
        prepareBundle(
            engine.dir(id),
            id,
            image,
            new OciConfig.Limits(record.memoryBytes(), record.cpus(), record.pids()));
    bundle.finishRules();
    return bundle.path();
  }
}
