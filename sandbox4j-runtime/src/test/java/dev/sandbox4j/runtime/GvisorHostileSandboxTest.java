package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Exec;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.machine.ForkResult;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;

/**
 * The hostile-sandbox suite against gVisor sandboxes: the same attacks ({@code hostile.py} and the
 * nested namespaces) in every state a gVisor sandbox reaches, and the same rule for confinement: in
 * every state, what a command sees is what it saw at create.
 *
 * <p>What each check means under gVisor:
 *
 * <ul>
 *   <li>Root inside is reached through the engine ({@code runsc exec} as 0:0): gVisor implements no
 *       set-user-ID executables (google/gvisor#5299), so {@code sudo} fails.
 *   <li>Seccomp, capabilities and no_new_privs read inside are gVisor's kernel's view, compared to
 *       the same view at create. The boundary to the host kernel is the Sentry and gofer: their
 *       seccomp filter, no_new_privs, capabilities and host ids are read on the host, in every
 *       state, and compared to create ({@link #assertHostProcessesAsAtCreate}).
 *   <li>The limits are those of the Sentry's cgroups on the host: every process of the sandbox is a
 *       task of the Sentry.
 *   <li>The escapes must be refused as in a container, with two exceptions that gVisor's kernel
 *       serves itself ({@link #servedInsideItsKernel}), and a system call counts as refused by any
 *       error, since under gVisor no error comes from the host kernel.
 *   <li>Live fork and hibernate are not supported with gVisor: those states assert the refusal and
 *       attack the sandbox that refused.
 * </ul>
 */
class GvisorHostileSandboxTest extends HostileSandboxTest {
  private static final int CAP_SYS_ADMIN = 21;

  /** The release gVisor's kernel reports (the host's is a real Linux release). */
  static final String GVISOR_RELEASE = "4.4.0";

  /** The system calls {@code hostile.py} expects a container's seccomp profile to refuse. */
  private static final Set<String> SYSTEM_CALLS =
      Set.of(
          "init_module",
          "finit_module",
          "bpf",
          "keyctl",
          "add_key",
          "unshare",
          "open_by_handle_at");

  /** The status of the sandbox's host processes that confines them, as {@link #hostStatus}. */
  private static final Set<String> HOST_KEYS =
      Set.of(
          "Seccomp",
          "Seccomp_filters",
          "NoNewPrivs",
          "CapInh",
          "CapPrm",
          "CapEff",
          "CapBnd",
          "CapAmb");

  /** The reference sandbox's host processes at create: command name to {@link #HOST_KEYS}. */
  private Map<String, Set<Map<String, String>>> hostAtCreate;

  @BeforeAll
  void readTheReferencesHostProcesses() throws Exception {
    hostAtCreate = hostStatus(reference.id());
    assertThat(hostAtCreate)
        .as("a gVisor sandbox's host processes are its Sentry and its gofer")
        .containsKeys("runsc-sandbox", "runsc-gofer")
        .allSatisfy(
            (name, kinds) ->
                assertThat(kinds)
                    .as("%s is under gVisor's seccomp filter and cannot gain privileges", name)
                    .allSatisfy(
                        status ->
                            assertThat(status)
                                .containsEntry("Seccomp", "2")
                                .containsEntry("NoNewPrivs", "1")));
  }

  @Override
  void requirePrerequisites() {
    Prerequisites.requireGvisor();
  }

  @Override
  Isolation isolation() {
    return Isolation.GVISOR;
  }

  @Override
  String kernelRelease() {
    return GVISOR_RELEASE;
  }

  /** Root through the engine: {@code sudo} cannot work under gVisor. */
  @Override
  CommandResult asRoot(Target target, List<String> argv) {
    return Exec.run(
        sandboxes.engine(),
        target.id(),
        "0:0",
        "/",
        Engine.BASE_ENV,
        argv,
        RunOptions.withTimeout(TIMEOUT),
        System.nanoTime());
  }

  /** The Sentry: the sandbox's processes are its tasks, held by its cgroups. */
  @Override
  long hostProcessOf(Target target, String marker, CompletableFuture<?> run) {
    return OciRuntime.initPid(home.resolve("sandboxes").resolve(target.id()).resolve("bundle"))
        .orElseThrow(() -> new AssertionError("local:" + target.id() + " has no Sentry"));
  }

  /**
   * Within gVisor's kernel, a command holds no capability outside its bounding set, and that set
   * lacks CAP_SYS_ADMIN, so root inside mounts nothing. Its status reports {@code Seccomp: 0}:
   * runsc loads no OCI seccomp profile into the Sentry (that takes {@code --oci-seccomp}); the
   * filter between the sandbox and the host kernel is the Sentry's own, read on the host ({@link
   * #assertHostProcessesAsAtCreate}). Every state's view is compared to this one.
   */
  @Override
  void assertFreshCommandConfinement(View command) {
    long bounding = Long.parseUnsignedLong(command.status().get("CapBnd"), 16);
    for (String set : List.of("CapPrm", "CapEff")) {
      assertThat(Long.parseUnsignedLong(command.status().get(set), 16) & ~bounding)
          .as(
              "a fresh gVisor sandbox's command holds no capability outside its bounding set (%s)",
              set)
          .isZero();
    }
    assertThat(bounding & (1L << CAP_SYS_ADMIN))
        .as("a fresh gVisor sandbox's commands cannot have CAP_SYS_ADMIN")
        .isZero();
  }

  /**
   * gVisor's kernel has one user namespace of its own, with the identity map; its ids become the
   * sandbox's host block in the Sentry's and gofer's user namespace on the host ({@link
   * #assertHostProcessesAsAtCreate}, {@code assertInItsOwnIdBlock}).
   */
  @Override
  void assertIdsMappedAsAtCreate(String who, View now, View baseline) {
    assertThat(List.of(now.uidMap().strip(), now.gidMap().strip()))
        .as("%s: the user namespace inside gVisor's kernel is the one at create", who)
        .containsExactly(baseline.uidMap().strip(), baseline.gidMap().strip());
  }

  /**
   * The Sentry and gofer (and the Sentry's stub processes) are the sandbox on the host: each runs
   * as the root of the sandbox's own block of host ids, in a user namespace that maps that block
   * alone, under the same seccomp filter, no_new_privs and capabilities as at create; and no other
   * kind of process is in the sandbox's cgroups.
   */
  @Override
  void assertHostProcessesAsAtCreate(String where, Target target) throws Exception {
    long[] block = hostRange(target.id());
    String map = "0 " + block[0] + " " + block[1];
    List<Long> pids = hostPids(target.id());
    assertThat(pids).as("%s: the sandbox has host processes", where).isNotEmpty();
    for (long pid : pids) {
      Path proc = Path.of("/proc", Long.toString(pid));
      String uids;
      String idMaps;
      try {
        uids = field(Files.readString(proc.resolve("status")), "Uid");
        idMaps =
            String.join(" ", Files.readString(proc.resolve("uid_map")).strip().split("\\s+"))
                + "|"
                + String.join(" ", Files.readString(proc.resolve("gid_map")).strip().split("\\s+"));
      } catch (IOException ended) {
        continue;
      }
      assertThat(idMaps)
          .as("%s: host pid %d is in a user namespace of the sandbox's block alone", where, pid)
          .isEqualTo(map + "|" + map);
      assertThat(uids.split("\\s+"))
          .as("%s: host pid %d runs as the block's root, unprivileged on the host", where, pid)
          .containsOnly(Long.toString(block[0]));
    }
    assertThat(hostStatus(target.id()))
        .as(
            "%s: the sandbox's host processes are the kinds at create, each under the seccomp"
                + " filter, no_new_privs and capabilities it had at create",
            where)
        .containsKeys("runsc-sandbox", "runsc-gofer")
        .allSatisfy(
            (name, kinds) ->
                assertThat(hostAtCreate.getOrDefault(name, Set.of()))
                    .as("%s: %s", where, name)
                    .containsAll(kinds));
  }

  /**
   * A system call is refused by any error: gVisor's kernel answers it (add_key with EACCES,
   * open_by_handle_at with ENOTSUP), never the host's. The rest as in a container.
   */
  @Override
  boolean refused(String attack, Map<String, Object> result) {
    if (SYSTEM_CALLS.contains(attack)) {
      return String.valueOf(result.get("detail")).startsWith("returned -1 ");
    }
    return super.refused(attack, result);
  }

  /**
   * Not escapes: with no OCI seccomp profile in the Sentry (no {@code --oci-seccomp}), these reach
   * gVisor's kernel, which implements them itself; the host's never sees them.
   */
  @Override
  Map<String, String> servedInsideItsKernel() {
    return Map.of(
        "keyctl", "a session keyring of gVisor's kernel, kept in the Sentry",
        "unshare", "a user namespace of gVisor's kernel (CLONE_NEWUSER)");
  }

  /**
   * A nested user namespace of gVisor's kernel, and a tmpfs its root mounts in a mount namespace of
   * its own (as on any Linux that allows unprivileged user namespaces): inside the Sentry, not on
   * the host. A nested root still mounts nothing where the sandbox's own processes see it.
   */
  @Override
  List<String> nestedNamespacesItsKernelServes() {
    return List.of("NESTED-USERNS-OK", "NESTED-OWN-MOUNT-OK");
  }

  @Override
  List<Target> enter(State state) throws Exception {
    return switch (state) {
      case LIVE_FORK -> {
        Target parent = create("the parent of a live fork, which gVisor refuses");
        busy(parent);
        ForkResult fork = sandboxes.fork(parent.ref());
        own.add(fork.ref());
        assertThat(fork.processesCopied())
            .as("a gVisor sandbox's fork copies files only")
            .isFalse();
        assertThat(fork.reason()).contains("not supported with gVisor isolation");
        yield List.of(parent); // the fork itself is FILES_FORK's target
      }
      // A hibernate refused across a reboot is the same refusal: HOST_REBOOT_THEN_SETUP reboots a
      // running gVisor sandbox.
      case HIBERNATE_THEN_WAKE, HIBERNATED_ACROSS_A_HOST_REBOOT -> {
        Target t = create("a sandbox that refused to hibernate");
        busy(t);
        assertThatThrownBy(() -> sandboxes.hibernate(t.ref()))
            .isInstanceOf(WorkspaceException.class)
            .hasMessageContaining("not supported with gVisor isolation");
        assertThat(state(t.ref())).as("it runs on").isEqualTo("running");
        yield List.of(t);
      }
      default -> super.enter(state);
    };
  }

  /** crun's filter file: {@code runsc exec} reads none, a gVisor command is the Sentry's task. */
  @Override
  @Test
  @Disabled("crun's seccomp.bpf: runsc keeps no filter file; the Sentry's filter is read per state")
  void noCommandRunsUnfilteredWhenTheRuntimeStateLacksTheFilter() {}

  /**
   * The confining status of the host processes of sandbox {@code id}, by name: the distinct ones
   * (the Sentry's stub processes are of more than one kind).
   */
  private Map<String, Set<Map<String, String>>> hostStatus(String id) throws IOException {
    Map<String, Set<Map<String, String>>> out = new TreeMap<>();
    for (long pid : hostPids(id)) {
      String status;
      try {
        status = Files.readString(Path.of("/proc", Long.toString(pid), "status"));
      } catch (IOException ended) {
        continue;
      }
      Map<String, String> confining = new TreeMap<>();
      for (String key : HOST_KEYS) {
        confining.put(key, field(status, key));
      }
      // runsc re-executes itself: every comm is "exe"; the Sentry and gofer name themselves in
      // argv[0], the Sentry's stub processes have no command line (ps shows "[exe]")
      List<String> argv = cmdline(pid);
      String name = argv.isEmpty() ? "[" + field(status, "Name") + "]" : argv.getFirst();
      out.computeIfAbsent(name, k -> new LinkedHashSet<>()).add(confining);
    }
    return out;
  }

  private static String field(String status, String key) {
    return status
        .lines()
        .filter(l -> l.startsWith(key + ":"))
        .map(l -> l.substring(key.length() + 1).strip())
        .findFirst()
        .orElse("");
  }
}
