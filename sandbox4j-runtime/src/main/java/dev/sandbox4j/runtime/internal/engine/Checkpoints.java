package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.Freezer;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.oci.Criu;
import dev.sandbox4j.runtime.internal.oci.CriuUserns;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;

/**
 * Checkpoint and restore of a sandbox's processes with CRIU, through {@code crun checkpoint} and
 * {@code crun restore}: the engine pieces of live fork (processes copied into a new sandbox) and
 * hibernate (processes saved to disk, memory freed, restored later).
 *
 * <p>What is carried: the whole process tree under the sandbox's init ({@code catatonit}), with
 * memory, open files (paths in the sandbox's root, which for a fork is a copy), pipes, unix and TCP
 * sockets inside the sandbox (listening ones, tested; established ones on loopback with both ends
 * in the tree are dumped with {@code --tcp-established}, untested), the namespaces (pid, ipc, uts,
 * mount, network with its loopback, user 0→the sandbox's block:65536), the seccomp filter of every
 * process, and the cgroups the engine made per command (CRIU creates them under the new sandbox's
 * cgroup: {@code --manage-cgroups-mode soft}). crun adds the bind mounts of the bundle ({@code
 * /dev/catatonit}) as external mounts; the device nodes crun bind-mounts from the host into a user
 * namespace's {@code /dev} are mapped through a CRIU config file ({@code ext-mount-map}).
 *
 * <p>What is not: a process whose parent is outside the sandbox (a command the engine is still
 * running, with its stdio on pipes to this JVM, and its descendants), which CRIU does not see as
 * part of the tree: {@link Dump#notCarried} lists them. Connections to anything outside the sandbox
 * (its veth, whose peer is on the host, is removed before the dump, since CRIU cannot dump it, and
 * {@link Networks#attach} adds it again or anew after), and anything that holds host fds.
 *
 * <p>The seccomp filter of commands exec'd later: {@code crun exec} does not take it from the
 * config but from {@code seccomp.bpf} in the container's state directory, which {@code crun run}
 * writes and {@code crun restore} does not; without it every later command ran unfiltered (with
 * {@code unshare -Ur} then giving a nested root with full capabilities). So a dump saves that file
 * with the images ({@link #SECCOMP_FILTER}) and a restore writes it back before anything can exec
 * ({@link OciRuntime#restore}); {@link OciRuntime#requireExecFilter} refuses any exec into a
 * container without it.
 *
 * <p>CRIU's environment: {@link Criu#DIR} first on PATH (libcriu runs {@code criu swrk} from PATH),
 * {@code CRIU_CONFIG_FILE} with the device mappings, and {@code CR_IPTABLES=true}: CRIU saves and
 * restores a network namespace's iptables rules with {@code iptables-save/-restore}, which this
 * host does not need (a sandbox has no CAP_NET_ADMIN, so it has no rules to save). No network lock
 * ({@code --network-lock skip}): the frozen tree cannot send, and nothing outside talks to it.
 */
public final class Checkpoints {
  /** The devices crun bind-mounts from the host's {@code /dev} into a sandbox. */
  static final List<String> DEVICES = List.of("null", "zero", "full", "tty", "random", "urandom");

  private Checkpoints() {}

  /** Why a gVisor sandbox's processes are not checkpointed. */
  /** How a reason of this host's (not of the sandbox's isolation) starts. */
  private static final String ON_THIS_HOST = "checkpoint/restore is unavailable on this host: ";

  public static final String GVISOR =
      "checkpoint/restore is not supported with gVisor isolation: the engine dumps processes with"
          + " CRIU, which cannot dump gVisor's kernel, and runsc's own checkpoint refuses a sandbox"
          + " on host networking, which gVisor sandboxes use to keep the engine's network rules";

  /** Why {@code runtime} cannot checkpoint, in a sentence of its own, or empty if it can. */
  public static Optional<String> unavailable(OciRuntime runtime) {
    if (runtime.isGvisor()) {
      return Optional.of(GVISOR);
    }
    if (!Criu.installed()) {
      return Optional.of(ON_THIS_HOST + "CRIU is not installed: run `sandbox4j setup`");
    }
    if (!runtime.binary().getFileName().toString().startsWith("crun")
        || !OciRuntime.supportsCheckpoint(runtime.binary())) {
      return Optional.of(
          ON_THIS_HOST
              + runtime.binary()
              + " has no checkpoint/restore support: `sandbox4j setup` builds a crun with CRIU");
    }
    return Optional.empty();
  }

  /**
   * A checkpoint on disk.
   *
   * @param images CRIU's image directory
   * @param bytes the size of the images
   * @param took how long the dump took (for a fork, without the copy made while frozen)
   * @param notCarried the processes left out (pid on the host and command line): those whose parent
   *     is outside the sandbox
   */
  public record Dump(Path images, long bytes, Duration took, List<String> notCarried) {}

  /** A live fork's timings. */
  public record Fork(Dump dump, Duration frozen, Duration restore, Duration total) {}

  /**
   * Dumps the processes of sandbox {@code id} into the new directory {@code images}, leaving them
   * running. The sandbox is frozen from before the dump until after {@code whileFrozen} has run
   * (for a fork: copying its upper layer, so that files and processes match). The caller holds the
   * sandbox's lock.
   */
  static Dump dumpLeavingRunning(Engine engine, String id, Path images, Runnable whileFrozen) {
    require(engine, id);
    List<String> notCarried = notCarried(engine, id);
    prepare(images);
    // Frozen by the engine, as for hibernate: its bounded freeze finishes where a single write to
    // the v1 freezer can stay FREEZING (Freezer)
    Freezer.freeze(engine.cgroups(), id);
    long start = System.nanoTime();
    Duration took;
    try {
      outOfVfork(
          engine,
          id,
          () -> Freezer.thaw(engine.cgroups(), id),
          () -> Freezer.freeze(engine.cgroups(), id));
      engine.networks().detach(engine.dir(id), id); // CRIU cannot dump a veth leading outside
      try {
        checkpoint(engine.runtimeOf(id), id, images, true);
      } finally {
        engine.attachNetwork(id, engine.dir(id).resolve("bundle"));
      }
      took = Duration.ofNanos(System.nanoTime() - start);
      whileFrozen.run();
    } finally {
      Freezer.thaw(engine.cgroups(), id);
    }
    return new Dump(images, size(images), took, notCarried);
  }

  /**
   * Dumps the processes of sandbox {@code id} into the new directory {@code images} and stops them
   * (hibernate): the container is deleted, its memory freed; the root stays mounted, its files as
   * they are. {@link #restore} with the same id resumes it. The caller holds the sandbox's lock.
   */
  public static Dump dumpAndStop(Engine engine, String id, Path images) {
    require(engine, id);
    List<String> notCarried = notCarried(engine, id);
    prepare(images);
    long start = System.nanoTime();
    // Frozen by the engine, not by CRIU: so that no process is inside vfork when CRIU seizes them
    // (outOfVfork), and a freeze that does not finish fails on its own bounded wait.
    Freezer.freeze(engine.cgroups(), id);
    try {
      outOfVfork(
          engine,
          id,
          () -> Freezer.thaw(engine.cgroups(), id),
          () -> Freezer.freeze(engine.cgroups(), id));
    } catch (RuntimeException e) {
      Freezer.thaw(engine.cgroups(), id);
      throw e;
    }
    engine.networks().detach(engine.dir(id), id); // CRIU cannot dump a veth leading outside
    try {
      checkpoint(engine.runtimeOf(id), id, images, false);
    } catch (RuntimeException e) {
      Freezer.thaw(engine.cgroups(), id);
      engine.attachNetwork(id, engine.dir(id).resolve("bundle")); // it goes on running
      throw e;
    }
    Duration took = Duration.ofNanos(System.nanoTime() - start);
    engine.runtimeOf(id).delete(id); // and with it whatever CRIU did not carry
    engine.stopExecHelper(id); // gone with it: the first command after the restore starts one
    return new Dump(images, size(images), took, notCarried);
  }

  /** How many times {@link #outOfVfork} thaws a sandbox for its vforked children to exec. */
  private static final int VFORK_THAWS = 100;

  /**
   * Returns once no process of frozen sandbox {@code id} is waiting inside {@code vfork}, thawing
   * it for a moment ({@code thaw}, then {@code freeze}) while one is. CRIU cannot dump such a
   * parent: it waits uninterruptibly until its child execs or exits, CRIU stops that child before
   * it can, and the dump fails after CRIU's 10 s timeout ("Unseizable non-zombie ... state D").
   * Debian's {@code sh} (dash) starts commands with vfork, so a shell loop is often in that window.
   * The sandbox is frozen on entry and on return.
   *
   * @throws WorkspaceException if a process is still inside vfork after {@value #VFORK_THAWS} thaws
   *     (a vforked child that never execs: the dump could not succeed)
   */
  static void outOfVfork(Engine engine, String id, Runnable thaw, Runnable freeze) {
    for (int attempt = 0; ; attempt++) {
      Optional<Long> inVfork = inVfork(engine.cgroups().pids(id));
      if (inVfork.isEmpty()) {
        if (attempt > 0) {
          System.getLogger(Checkpoints.class.getName())
              .log(
                  System.Logger.Level.INFO,
                  "local sandbox {0}: thawed {1} time(s) before its checkpoint, for a process"
                      + " inside vfork",
                  id,
                  attempt);
        }
        return;
      }
      if (attempt == VFORK_THAWS) {
        throw new WorkspaceException(
            "cannot checkpoint sandbox local:"
                + id
                + ": process "
                + inVfork.get()
                + " stays inside vfork (its child never runs a program or exits), which"
                + " checkpoint/restore cannot carry");
      }
      thaw.run();
      try {
        Thread.sleep(2);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        freeze.run();
        throw new WorkspaceException("interrupted while checkpointing local:" + id, e);
      }
      freeze.run();
    }
  }

  /** The first of {@code pids} with a thread waiting for its vfork child, if any. */
  static Optional<Long> inVfork(List<Long> pids) {
    for (long pid : pids) {
      try (Stream<Path> tasks = Files.list(Path.of("/proc", Long.toString(pid), "task"))) {
        for (Path task : tasks.toList()) {
          // wait_for_vfork_done is inlined into kernel_clone: a thread blocked there waits for
          // its vfork child (clone with CLONE_VFORK, vfork, posix_spawn)
          if (Files.readString(task.resolve("wchan")).strip().equals("kernel_clone")) {
            return Optional.of(pid);
          }
        }
      } catch (IOException | java.io.UncheckedIOException e) {
        // it ended meanwhile
      }
    }
    return Optional.empty();
  }

  /**
   * Starts the container of sandbox {@code id} from the checkpoint in {@code images} instead of
   * afresh: the same sandbox after {@link #dumpAndStop}, or a new one whose upper layer is a copy
   * of the dumped sandbox's (a fork). Its bundle is written for {@code id} (its own root, cgroups
   * and limits); after the restore its hostname is set to {@code id} (CRIU restores the UTS
   * namespace with the dumped sandbox's name) and its loopback is brought up. The caller holds the
   * sandbox's lock; its container must not be running.
   */
  public static void restore(Engine engine, String id, Path images) {
    require(engine, id);
    OciRuntime runtime = engine.runtimeOf(id);
    if (runtime.status(id).filter("running"::equals).isPresent()) {
      throw new WorkspaceException("cannot restore into sandbox local:" + id + ": it is running");
    }
    runtime.delete(id); // a stopped container of that id
    Path bundle;
    Path work = engine.dir(id).resolve("restore");
    try {
      bundle = engine.prepareBundle(id);
      Trees.delete(work);
      PrivateFiles.createPrivateDirectories(work);
      int hostBase = engine.lockedRecord(id).hostBase();
      // Its own block: a fork's images name its parent's (see CriuUserns).
      CriuUserns.moveTo(images, hostBase);
      StateDirectory.shareWithSandbox(images, hostBase);
      Files.deleteIfExists(bundle.resolve("init.pid"));
    } catch (IOException e) {
      throw new WorkspaceException("cannot prepare the restore of local:" + id + ": " + e, e);
    }
    byte[] filter = savedFilter(runtime, id, images);
    try {
      Overlay.whileStarting(
          engine.dir(id).resolve("rootfs"),
          () -> {
            runtime.restore(id, bundle, images, work, environment(work), filter);
            return null;
          });
    } catch (WorkspaceException e) {
      throw new WorkspaceException(
          "cannot restore sandbox local:"
              + id
              + " from "
              + images
              + ": "
              + errors(work, "restore.log", e),
          e);
    }
    long pid =
        OciRuntime.initPid(bundle)
            .orElseThrow(
                () -> new WorkspaceException("crun restore of local:" + id + " wrote no pid file"));
    nsenter(pid, "--uts", List.of("hostname", id));
    nsenter(pid, "--net", List.of("ip", "link", "set", "lo", "up"));
    engine.networks().attach(engine.dir(id), id, pid); // a new namespace: its veth anew
  }

  /**
   * Live fork: the processes and files of running sandbox {@code parent} into sandbox {@code
   * child}, whose directory and record exist and whose container may be discarded (its upper layer
   * is replaced). The parent is frozen while CRIU dumps it and its upper layer is copied, then goes
   * on; the child is restored from {@code images}. Both locks are the caller's.
   */
  public static Fork fork(Engine engine, String parent, String child, Path images) {
    long start = System.nanoTime();
    Path childDir = engine.dir(child);
    engine.runtimeOf(child).delete(child);
    engine.cgroups().removeSandbox(child);
    Overlay.unmount(childDir.resolve("rootfs"));
    try {
      Trees.delete(SandboxDisk.upper(childDir));
      Trees.delete(SandboxDisk.work(childDir));
      Files.createDirectories(SandboxDisk.work(childDir));
    } catch (IOException e) {
      throw new WorkspaceException("cannot prepare the fork local:" + child + ": " + e, e);
    }
    long[] frozen = new long[2];
    // The copy is owned by the child's own block of host ids (IdBlocks), as restore maps it.
    int parentBase = engine.lockedRecord(parent).hostBase();
    int childBase = engine.lockedRecord(child).hostBase();
    Dump dump =
        dumpLeavingRunning(
            engine,
            parent,
            images,
            () -> {
              frozen[0] = System.nanoTime();
              Lifecycle.copyTree(
                  SandboxDisk.upper(engine.dir(parent)),
                  SandboxDisk.upper(childDir),
                  parentBase,
                  childBase);
              frozen[1] = System.nanoTime();
            });
    try {
      Lifecycle.renameHost(SandboxDisk.upper(childDir), parent, child);
    } catch (IOException e) {
      throw new WorkspaceException("cannot name the fork local:" + child + ": " + e, e);
    }
    long restoreStart = System.nanoTime();
    restore(engine, child, images);
    long end = System.nanoTime();
    return new Fork(
        dump,
        dump.took().plusNanos(frozen[1] - frozen[0]),
        Duration.ofNanos(end - restoreStart),
        Duration.ofNanos(end - start));
  }

  // ---- helpers ----------------------------------------------------------------------------

  private static void require(Engine engine, String id) {
    unavailable(engine.runtimeOf(id))
        .ifPresent(
            why -> {
              throw new WorkspaceException(why);
            });
  }

  private static void prepare(Path images) {
    try {
      PrivateFiles.createPrivateDirectories(images);
      try (Stream<Path> files = Files.list(images)) {
        if (files.findAny().isPresent()) {
          throw new WorkspaceException("the checkpoint directory " + images + " is not empty");
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot create the checkpoint directory " + images + ": " + e, e);
    }
  }

  /**
   * Dumps container {@code id} into {@code images}, and with it the compiled seccomp filter its
   * commands get ({@value #SECCOMP_FILTER}): {@link #restore} gives it back to the runtime.
   */
  private static void checkpoint(OciRuntime runtime, String id, Path images, boolean leaveRunning) {
    byte[] filter =
        runtime
            .seccompFilter(id)
            .or(runtime::compiledSeccompBytes)
            .orElseThrow(
                () ->
                    new WorkspaceException(
                        "cannot checkpoint sandbox local:"
                            + id
                            + ": the runtime has no seccomp filter for its commands ("
                            + runtime.seccompFile(id)
                            + "); stop and start it first"));
    try {
      runtime.checkpoint(id, images, images, leaveRunning, environment(images));
    } catch (WorkspaceException e) {
      throw new WorkspaceException(
          "cannot checkpoint sandbox local:" + id + ": " + errors(images, "dump.log", e), e);
    }
    try {
      Files.deleteIfExists(images.resolve(SECCOMP_FILTER));
      PrivateFiles.writeNew(images.resolve(SECCOMP_FILTER), filter); // 0600, as CRIU's images
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot checkpoint sandbox local:" + id + ": cannot save its seccomp filter: " + e, e);
    }
  }

  /**
   * The compiled seccomp filter of the dumped sandbox's commands, in a checkpoint's directory (it
   * travels with the images: a hibernated sandbox's, a fork's copy). An older checkpoint without
   * one is restored with the filter this runtime compiled in this JVM, if any; else not at all.
   */
  static final String SECCOMP_FILTER = "sandbox4j-seccomp.bpf";

  private static byte[] savedFilter(OciRuntime runtime, String id, Path images) {
    try {
      return Files.readAllBytes(images.resolve(SECCOMP_FILTER));
    } catch (IOException e) {
      return runtime
          .compiledSeccompBytes()
          .orElseThrow(
              () ->
                  new WorkspaceException(
                      "cannot restore sandbox local:"
                          + id
                          + " from "
                          + images
                          + ": the checkpoint has no seccomp filter for its commands ("
                          + SECCOMP_FILTER
                          + "), and a command must never run without one"));
    }
  }

  /**
   * CRIU's {@code FI_NO_BREAKPOINTS}: it takes its parasite out of a process by tracing it syscall
   * by syscall instead of with a hardware breakpoint. In a VM whose debug registers do not work (a
   * Firecracker/PVM guest, this kind of host) the breakpoint never fires and every dump and restore
   * hangs in {@code wait4}, even of a plain {@code sleep}; CRIU 4.2 detects that itself ("kerndat:
   * check that hardware breakpoints work"), the 4.1 that setup builds does not. The
   * syscall-by-syscall way works everywhere and costs a few traced syscalls per process.
   */
  private static final String NO_BREAKPOINTS = "130";

  /** CRIU's environment, with its config file written into {@code dir}. */
  private static Map<String, String> environment(Path dir) {
    StringBuilder config = new StringBuilder();
    for (String device : DEVICES) {
      // the same key on dump (mount point → key) and restore (key → host path)
      config
          .append("ext-mount-map /dev/")
          .append(device)
          .append(":/dev/")
          .append(device)
          .append('\n');
    }
    Path file = dir.resolve("criu.conf");
    try {
      Files.deleteIfExists(file);
      PrivateFiles.writeNew(file, config.toString().getBytes(StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new WorkspaceException("cannot write " + file + ": " + e, e);
    }
    return Map.of(
        "PATH",
        Criu.DIR + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "CRIU_CONFIG_FILE",
        file.toString(),
        "CR_IPTABLES",
        "true",
        "CRIU_FAULT",
        NO_BREAKPOINTS);
  }

  /** The runtime's message and the error lines of CRIU's log, for an exception. */
  private static String errors(Path dir, String log, WorkspaceException e) {
    List<String> lines = new ArrayList<>();
    try {
      for (String line : Files.readAllLines(dir.resolve(log), StandardCharsets.UTF_8)) {
        // CRIU reports its own rlimit as an error here (no CAP_SYS_RESOURCE) and carries on
        if (line.contains("Error") && !line.contains("RLIMIT_NOFILE for self")) {
          lines.add(line.strip());
        }
      }
    } catch (IOException ignored) {
      // no log: the runtime's message says why
    }
    return e.getMessage()
        + (lines.isEmpty()
            ? ""
            : "; " + log + ": " + String.join(" | ", lines.subList(0, Math.min(lines.size(), 8))));
  }

  /**
   * The processes of the sandbox that are not descendants of its init: commands whose parent is the
   * host-side {@code crun exec}, and their descendants. CRIU dumps the init's tree only.
   */
  static List<String> notCarried(Engine engine, String id) {
    Optional<Long> init = OciRuntime.initPid(engine.dir(id).resolve("bundle"));
    List<Long> pids = new ArrayList<>(engine.cgroups().pids(id));
    // The exec helper is the engine's, not the sandbox's: not carried (its parent is outside, like
    // a crun exec's), and the fork or the restored sandbox starts one of its own on its first
    // command. The commands it runs are listed, like those of a crun exec. So are the helpers of
    // other engines on this home (another JVM's, the resident CLI's): each is the helper program
    // with a parent outside the sandbox, which only an engine's crun exec makes; and their idle
    // processes (a spare keeper kept for the next command, a keeper not yet told to go): the
    // helper program with no child.
    engine.execHelperPid(id).ifPresent(pids::remove);
    Set<Long> inside = new HashSet<>(pids);
    Set<Long> parents = new HashSet<>();
    for (long pid : pids) {
      parents.add(ppid(pid));
    }
    pids.removeIf(
        pid -> isExecHelper(pid) && (!inside.contains(ppid(pid)) || !parents.contains(pid)));
    Map<Long, Long> parent = new HashMap<>();
    for (long pid : pids) {
      parent.put(pid, ppid(pid));
    }
    Set<Long> carried = new HashSet<>();
    init.ifPresent(carried::add);
    List<String> out = new ArrayList<>();
    for (long pid : pids) {
      List<Long> chain = new ArrayList<>();
      long p = pid;
      boolean ok = false;
      while (parent.containsKey(p) && chain.size() < pids.size() + 1) {
        if (carried.contains(p)) {
          ok = true;
          break;
        }
        chain.add(p);
        p = parent.get(p);
      }
      ok = ok || carried.contains(p);
      if (ok) {
        carried.addAll(chain);
      } else {
        out.add(pid + " (" + cmdline(pid) + ")");
      }
    }
    return out;
  }

  /** Whether process {@code pid} runs the exec helper program (as its sandbox sees the path). */
  private static boolean isExecHelper(long pid) {
    try {
      return Files.readSymbolicLink(Path.of("/proc", Long.toString(pid), "exe"))
          .toString()
          .equals(ExecHelper.IN_SANDBOX);
    } catch (IOException | RuntimeException gone) {
      return false;
    }
  }

  private static long ppid(long pid) {
    try {
      String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
      String[] after = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      return Long.parseLong(after[1]);
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  private static String cmdline(long pid) {
    try {
      byte[] raw = Files.readAllBytes(Path.of("/proc", Long.toString(pid), "cmdline"));
      return new String(raw, StandardCharsets.UTF_8).replace('\0', ' ').strip();
    } catch (IOException e) {
      return "exited";
    }
  }

  /** Runs {@code argv} from the host in namespace {@code ns} of process {@code pid}. */
  private static void nsenter(long pid, String ns, List<String> argv) {
    List<String> cmd =
        new ArrayList<>(List.of("nsenter", "--target", Long.toString(pid), ns, "--"));
    cmd.addAll(argv);
    HostCommand.check(cmd);
  }

  private static long size(Path dir) {
    try (Stream<Path> files = Files.walk(dir)) {
      return files
          .filter(Files::isRegularFile)
          .mapToLong(
              p -> {
                try {
                  return Files.size(p);
                } catch (IOException e) {
                  return 0;
                }
              })
          .sum();
    } catch (IOException e) {
      return 0;
    }
  }
}
