package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Exec;
import dev.sandbox4j.runtime.internal.engine.IdBlocks;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.linux.Cgroups;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.oci.OciConfig;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What a local sandbox must keep out, tried from inside: the host's processes, files, loopback
 * servers, devices, kernel and sysctls; other sandboxes; and the host's memory and process table.
 *
 * <p>One sandbox with default settings is shared by the tests that only look (and clean up what
 * they make); tests that need their own limits or a second sandbox create them and destroy them
 * after each test. Every assertion message names the isolation rule it checks.
 */
class IsolationTest {

  private static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(60);

  /** Docker's default capability set, written out independently of {@link OciConfig}. */
  private static final Set<String> DOCKER_DEFAULT_CAPS =
      Set.of(
          "CAP_CHOWN",
          "CAP_DAC_OVERRIDE",
          "CAP_FSETID",
          "CAP_FOWNER",
          "CAP_MKNOD",
          "CAP_NET_RAW",
          "CAP_SETGID",
          "CAP_SETUID",
          "CAP_SETFCAP",
          "CAP_SETPCAP",
          "CAP_NET_BIND_SERVICE",
          "CAP_SYS_CHROOT",
          "CAP_KILL",
          "CAP_AUDIT_WRITE");

  /** Capability numbers from linux/capability.h, index = bit. */
  private static final List<String> CAP_NAMES =
      List.of(
          "CAP_CHOWN",
          "CAP_DAC_OVERRIDE",
          "CAP_DAC_READ_SEARCH",
          "CAP_FOWNER",
          "CAP_FSETID",
          "CAP_KILL",
          "CAP_SETGID",
          "CAP_SETUID",
          "CAP_SETPCAP",
          "CAP_LINUX_IMMUTABLE",
          "CAP_NET_BIND_SERVICE",
          "CAP_NET_BROADCAST",
          "CAP_NET_ADMIN",
          "CAP_NET_RAW",
          "CAP_IPC_LOCK",
          "CAP_IPC_OWNER",
          "CAP_SYS_MODULE",
          "CAP_SYS_RAWIO",
          "CAP_SYS_CHROOT",
          "CAP_SYS_PTRACE",
          "CAP_SYS_PACCT",
          "CAP_SYS_ADMIN",
          "CAP_SYS_BOOT",
          "CAP_SYS_NICE",
          "CAP_SYS_RESOURCE",
          "CAP_SYS_TIME",
          "CAP_SYS_TTY_CONFIG",
          "CAP_MKNOD",
          "CAP_LEASE",
          "CAP_AUDIT_WRITE",
          "CAP_AUDIT_CONTROL",
          "CAP_SETFCAP",
          "CAP_MAC_OVERRIDE",
          "CAP_MAC_ADMIN",
          "CAP_SYSLOG",
          "CAP_WAKE_ALARM",
          "CAP_BLOCK_SUSPEND",
          "CAP_AUDIT_READ",
          "CAP_PERFMON",
          "CAP_BPF",
          "CAP_CHECKPOINT_RESTORE");

  private static final ExecutorService THREADS = Executors.newVirtualThreadPerTaskExecutor();

  private static final LocalSandbox SANDBOXES = new LocalSandbox();

  /** The sandbox the read-only tests share; destroyed after all tests. */
  private static Workspace shared;

  /** Sandboxes a single test made; destroyed after it. */
  private final List<WorkspaceRef> own = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void createSharedSandbox() {
    Prerequisites.requireLocalEngine();
    shared = Workspace.of(SANDBOXES.newBackend());
    shared.open();
  }

  @AfterAll
  static void destroySharedSandbox() {
    if (shared != null && shared.ref().isPresent()) {
      SANDBOXES.destroy(shared.ref().get());
    }
  }

  @AfterEach
  void destroyOwnSandboxes() {
    for (WorkspaceRef ref : own) {
      SANDBOXES.destroy(ref);
    }
    own.clear();
  }

  // ---- 1. processes -----------------------------------------------------------------------

  @Test
  void hostProcessesAreInvisibleAndUnreachableFromInside() throws Exception {
    Process hostSleep = new ProcessBuilder("sleep", "300").start();
    try {
      long hostPid = hostSleep.pid();
      long jvmPid = ProcessHandle.current().pid();

      String ps = ok(shared, "ps -eo pid=,args=");
      // the engine's exec helper and this command's keeper (FastExec) are the engine's, not host's
      List<String> lines =
          ps.lines()
              .map(String::strip)
              .filter(l -> !l.isEmpty() && !l.contains(" /dev/sandbox4j-execd"))
              .toList();
      assertThat(lines)
          .as("pid namespace: PID 1 inside is the sandbox's own init (catatonit), not the host's")
          .anySatisfy(l -> assertThat(l).startsWith("1 ").contains("catatonit"));
      assertThat(lines)
          .as(
              "pid namespace: only the sandbox's init and this command's processes are visible,"
                  + " not the host's %d processes",
              ProcessHandle.allProcesses().count())
          .hasSizeLessThanOrEqualTo(5);
      assertThat(ps)
          .as("pid namespace: the host JVM and a host 'sleep 300' are not in the sandbox's ps")
          .doesNotContain("java")
          .doesNotContain("surefire")
          .doesNotContain("sleep 300");
      List<Long> pids = lines.stream().map(l -> Long.parseLong(l.split("\\s+")[0])).toList();
      assertThat(pids)
          .as("pid namespace: no host pid (JVM %d, sleep %d) is visible inside", jvmPid, hostPid)
          .doesNotContain(jvmPid, hostPid);

      String procPids = ok(shared, "ls /proc | grep -c '^[0-9][0-9]*$'").strip();
      assertThat(Integer.parseInt(procPids))
          .as(
              "pid namespace: /proc inside lists only the sandbox's few processes (and the"
                  + " engine's exec helper and this command's keeper)")
          .isLessThanOrEqualTo(5 + 2);

      CommandResult signal =
          run(
              shared,
              "kill -0 "
                  + hostPid
                  + "; echo user=$?; sudo kill -0 "
                  + hostPid
                  + "; echo root=$?; sudo kill -9 "
                  + hostPid
                  + " "
                  + jvmPid
                  + "; echo kill=$?; cat /proc/"
                  + jvmPid
                  + "/cmdline; echo cmdline=$?");
      assertThat(signal.stdoutText())
          .as(
              "pid namespace: a host pid cannot be signalled from inside, not even by root"
                  + " (sudo)")
          .contains("user=1")
          .contains("root=1")
          .contains("kill=1")
          .contains("cmdline=1");
      assertThat(hostSleep.isAlive())
          .as("pid namespace: the host process survives 'sudo kill -9' of its pid from inside")
          .isTrue();
      assertThat(ok(shared, "cat /proc/1/cmdline | tr '\\0' ' '"))
          .as("pid namespace: /proc/1 inside is the sandbox's init, not the host's")
          .contains("catatonit");
    } finally {
      hostSleep.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
  }

  // ---- 2. host files ----------------------------------------------------------------------

  @Test
  void hostMarkerFilesCannotBeReadByAnyPathOrSymlinkTrick() throws Exception {
    String tag = UUID.randomUUID().toString().replace("-", "");
    String secret = "host-secret-" + UUID.randomUUID();
    Path tmpMarker = Path.of("/tmp/sandbox4j-isolation-" + tag + ".txt");
    Path rootMarker = Path.of("/root/sandbox4j-isolation-" + tag + ".txt");
    Path hostDir = Path.of("/tmp/sandbox4j-isolation-dir-" + tag);
    String listedName = "listed-only-on-the-host-" + tag;
    try {
      Files.writeString(tmpMarker, secret + " tmp\n");
      Files.writeString(rootMarker, secret + " root\n");
      Files.createDirectories(hostDir);
      Files.writeString(hostDir.resolve(listedName), secret + " dir\n");

      StringBuilder script = new StringBuilder("cd /tmp\n");
      int n = 0;
      for (Path marker : List.of(tmpMarker, rootMarker)) {
        String p = marker.toString();
        for (String path :
            List.of(
                p,
                "/../../../.." + p,
                "/tmp/../../../.." + p,
                "/home/sandbox/../../../../.." + p,
                "../../../../../.." + p,
                "/proc/1/root" + p,
                "/proc/self/root" + p,
                "/proc/self/cwd/../../../.." + p,
                "/proc/1/cwd/../../../.." + p,
                "/proc/self/root/proc/1/root" + p,
                "/dev/fd/../../../.." + p)) {
          script.append(attempt("cat '" + path + "'"));
          script.append(attempt("sudo cat '" + path + "'"));
        }
        n++;
        script.append(attempt("ln -s '" + p + "' /tmp/link" + n + " && cat /tmp/link" + n));
        script.append(attempt("sudo cat /tmp/link" + n));
        script.append("ln -s '/proc/1/root" + p + "' /tmp/plink" + n + "\n");
        script.append(attempt("sudo cat /tmp/plink" + n));
        script.append(attempt("ln '" + p + "' /tmp/hard" + n + " && cat /tmp/hard" + n));
        script.append(
            attempt("sudo ln '" + p + "' /tmp/shard" + n + " && sudo cat /tmp/shard" + n));
        script.append(attempt("for d in /proc/[0-9]*; do sudo cat \"$d/root" + p + "\"; done"));
        script.append(attempt("sudo sh -c 'cd / && cd .. && cd .. && cat ." + p + "'"));
        script.append(attempt("sudo chroot / cat '" + p + "'"));
      }
      script.append(attempt("ls -a '" + hostDir + "'"));
      script.append(attempt("sudo ls -a '" + hostDir + "' /proc/1/root" + hostDir));
      script.append(attempt("cat '" + hostDir + "/" + listedName + "'"));
      script.append("echo ATTEMPTS-DONE\n");
      script.append("sudo ls -a /root /tmp\n");
      CommandResult tricks = run(shared, script.toString());
      assertThat(tricks.stdoutText() + tricks.stderrText())
          .as(
              "mount namespace + overlay root: no absolute path, '..' chain, /proc/*/root or cwd,"
                  + " symlink, hard link, chroot or sudo reaches host files under /tmp or /root")
          .doesNotContain(secret)
          .doesNotContain(listedName)
          .doesNotContain(rootMarker.getFileName().toString() + "\n")
          .doesNotContain(tmpMarker.getFileName().toString() + "\n");
      assertThat(tricks.stdoutText())
          .as("every read attempt of a host file fails (the control line shows the script ran)")
          .doesNotContain("READ-OK")
          .contains("ATTEMPTS-DONE");

      String found =
          ok(
              shared,
              "sudo find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -name '*"
                  + tag
                  + "*' -print 2>/dev/null; "
                  + searchContent("NEEDLE")
                  + " || true",
              Map.of("NEEDLE", secret));
      assertThat(found)
          .as("overlay root: no file anywhere in the sandbox has the host marker's name or content")
          .isBlank();

      for (Path marker : List.of(tmpMarker, rootMarker)) {
        for (String path :
            List.of(
                marker.toString(),
                "/../../.." + marker,
                "/proc/1/root" + marker,
                "/proc/self/root" + marker,
                "../../../../.." + marker)) {
          assertReadDoesNotLeak(shared, path, secret);
        }
      }
      ok(shared, "ln -sfn '" + tmpMarker + "' /tmp/api-link && ln -sfn /root /tmp/api-root-link");
      assertReadDoesNotLeak(shared, "/tmp/api-link", secret);
      assertReadDoesNotLeak(shared, "/tmp/api-root-link/" + rootMarker.getFileName(), secret);
      assertThat(shared.exists(tmpMarker.toString()))
          .as("files API: the host's /tmp marker does not exist in the sandbox")
          .isFalse();
      assertThatThrownBy(() -> shared.list(hostDir.toString()))
          .as("files API: a host directory cannot be listed from the sandbox")
          .isInstanceOf(WorkspaceException.class);
      assertThat(shared.list("/tmp").stream().map(DirectoryEntry::name).toList())
          .as("files API: the sandbox's /tmp is its own, without the host's entries")
          .doesNotContain(tmpMarker.getFileName().toString(), hostDir.getFileName().toString());
    } finally {
      Files.deleteIfExists(tmpMarker);
      Files.deleteIfExists(rootMarker);
      Files.deleteIfExists(hostDir.resolve(listedName));
      Files.deleteIfExists(hostDir);
      run(shared, "sudo rm -f /tmp/link* /tmp/plink* /tmp/hard* /tmp/shard* /tmp/api-*");
    }
  }

  // ---- 3. network -------------------------------------------------------------------------

  @Test
  void hostServersCannotBeReachedAndOnlyLoopbackAndTheVethExist() throws Exception {
    try (ServerSocket loopback = new ServerSocket();
        ServerSocket wildcard = new ServerSocket()) {
      loopback.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
      wildcard.bind(new InetSocketAddress(0));
      AtomicInteger accepted = new AtomicInteger();
      CompletableFuture<Void> loopbackAccepts = acceptAll(loopback, accepted);
      CompletableFuture<Void> wildcardAccepts = acceptAll(wildcard, accepted);

      List<String> targets = new ArrayList<>();
      targets.add("127.0.0.1 " + loopback.getLocalPort());
      targets.add("127.0.0.1 " + wildcard.getLocalPort());
      for (String address : hostAddresses()) {
        targets.add(address + " " + wildcard.getLocalPort());
      }
      StringBuilder script = new StringBuilder();
      for (String target : targets) {
        String[] hp = target.split(" ");
        String url = "http://" + (hp[0].contains(":") ? "[" + hp[0] + "]" : hp[0]) + ":" + hp[1];
        script
            .append("curl -sS --max-time 3 -o /dev/null ")
            .append(url)
            .append(" && echo 'CONNECTED curl ")
            .append(target)
            .append("'\n");
        script
            .append("timeout 3 bash -c 'exec 3<>/dev/tcp/")
            .append(hp[0])
            .append('/')
            .append(hp[1])
            .append("' && echo 'CONNECTED bash ")
            .append(target)
            .append("'\n");
        script
            .append("sudo timeout 3 bash -c 'exec 3<>/dev/tcp/")
            .append(hp[0])
            .append('/')
            .append(hp[1])
            .append("' && echo 'CONNECTED sudo ")
            .append(target)
            .append("'\n");
      }
      script.append("echo DONE\n");
      CommandResult tries = run(shared, script.toString());
      assertThat(tries.stdoutText())
          .as(
              "network namespace: no connection from inside reaches the host's servers on %s",
              targets)
          .doesNotContain("CONNECTED")
          .contains("DONE");

      // the control: the same tools do connect to a server inside the sandbox
      int port = loopback.getLocalPort();
      String inside =
          ok(
              shared,
              "python3 -m http.server "
                  + port
                  + " --bind 127.0.0.1 >/dev/null 2>&1 & s=$!; for i in $(seq 50); do curl -s -o"
                  + " /dev/null http://127.0.0.1:"
                  + port
                  + "/ && break; sleep 0.1; done; curl -sS -o /dev/null -w '%{http_code}'"
                  + " http://127.0.0.1:"
                  + port
                  + "/; kill $s");
      assertThat(inside)
          .as("control: loopback inside works, so the failures above are isolation, not tools")
          .isEqualTo("200");

      Thread.sleep(300);
      assertThat(accepted.get())
          .as("network namespace: the host's servers saw no connection from the sandbox")
          .isZero();
      loopback.close();
      wildcard.close();
      loopbackAccepts.get(5, TimeUnit.SECONDS);
      wildcardAccepts.get(5, TimeUnit.SECONDS);

      assertThat(ok(shared, "ip -br link | awk '{print $1}' | cut -d@ -f1").strip())
          .as(
              "network namespace: the interfaces inside are loopback and the sandbox's own veth"
                  + " (its only way out, filtered on the host: see NetworkingTest)")
          .isEqualTo("lo\neth0");
      assertThat(ok(shared, "ls /sys/class/net").strip().split("\\s+"))
          .as("network namespace: /sys/class/net lists loopback and the veth only")
          .containsExactlyInAnyOrder("lo", "eth0");
      CommandResult vsock =
          run(
              shared,
              "sudo python3 -c 'import socket; socket.socket(socket.AF_VSOCK,"
                  + " socket.SOCK_STREAM); print(\"VSOCK-OPEN\")'");
      assertThat(vsock.stdoutText())
          .as(
              "seccomp: AF_VSOCK sockets are refused, since vsock has no network namespace and"
                  + " would reach the hypervisor and the host's vsock ports")
          .doesNotContain("VSOCK-OPEN");
      assertThat(vsock.stderrText()).contains("PermissionError");
    }
  }

  // ---- 4. root inside ---------------------------------------------------------------------

  @Test
  void sudoCannotMountDevicesLoadModulesOrWriteSysctlsAndIsNotHostRoot() throws Exception {
    String rootDevice = hostRootDevice();
    String[] majorMinor = rootDevice.split(" ")[0].split(":");
    String devName = rootDevice.split(" ")[1];

    String script =
        String.join(
            "\n",
            "test -e /dev/" + devName + " && echo DEVICE-NODE-EXISTS",
            "sudo mknod /tmp/hostdisk b "
                + majorMinor[0]
                + " "
                + majorMinor[1]
                + " && echo MKNOD-OK",
            "sudo mount /tmp/hostdisk /mnt && echo MOUNT-OK",
            "sudo mount /dev/" + devName + " /mnt && echo MOUNT-DEV-OK",
            "sudo mount -t tmpfs none /mnt && echo MOUNT-TMPFS-OK",
            "sudo mount --bind / /mnt && echo MOUNT-BIND-OK",
            "sudo mount -o remount,rw /proc/sys && echo REMOUNT-OK",
            "sudo unshare -U true && echo UNSHARE-USER-OK",
            "sudo unshare -m true && echo UNSHARE-MOUNT-OK",
            "sudo unshare -n true && echo UNSHARE-NET-OK",
            "sudo sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward' && echo SYSCTL-FORWARD-OK",
            "sudo sh -c 'echo /tmp/evil > /proc/sys/kernel/modprobe' && echo SYSCTL-MODPROBE-OK",
            "sudo sh -c 'echo \"|/tmp/evil\" > /proc/sys/kernel/core_pattern' && echo SYSCTL-CORE-OK",
            "sudo sysctl -w vm.drop_caches=1 && echo SYSCTL-DROP-OK",
            "sudo sh -c 'echo h > /proc/sysrq-trigger' && echo SYSRQ-OK",
            "sudo python3 -c '"
                + "import ctypes, os, platform\n"
                + "nr = {\"x86_64\": (175, 313), \"aarch64\": (105, 273)}[platform.machine()]\n"
                + "libc = ctypes.CDLL(None, use_errno=True)\n"
                + "r1 = libc.syscall(nr[0], b\"\\0\" * 64, 64, b\"\")\n"
                + "e1 = ctypes.get_errno()\n"
                + "fd = os.open(\"/etc/hostname\", os.O_RDONLY)\n"
                + "r2 = libc.syscall(nr[1], fd, b\"\", 0)\n"
                + "e2 = ctypes.get_errno()\n"
                + "print(\"init_module\", r1, e1, \"finit_module\", r2, e2)'",
            "echo DONE");
    Map<String, String> before = hostSysctls();
    CommandResult r = run(shared, script);
    assertThat(r.stdoutText())
        .as("the host's root disk has no device node in the sandbox's /dev")
        .doesNotContain("DEVICE-NODE-EXISTS")
        .contains("DONE");
    assertThat(r.stdoutText())
        .as(
            "user namespace + seccomp: root inside cannot create a block device node, mount"
                + " (device, tmpfs, bind, remount) or create namespaces")
        .doesNotContain("MKNOD-OK")
        .doesNotContain("MOUNT-OK")
        .doesNotContain("MOUNT-DEV-OK")
        .doesNotContain("MOUNT-TMPFS-OK")
        .doesNotContain("MOUNT-BIND-OK")
        .doesNotContain("REMOUNT-OK")
        .doesNotContain("UNSHARE-");
    assertThat(r.stdoutText())
        .as("read-only /proc/sys + user namespace: root inside cannot write sysctls or sysrq")
        .doesNotContain("SYSCTL-")
        .doesNotContain("SYSRQ-OK");
    assertThat(r.stdoutText())
        .as("seccomp: init_module and finit_module fail with EPERM (errno 1) for root inside")
        .contains("init_module -1 1 finit_module -1 1");
    assertThat(hostSysctls())
        .as("the host's sysctls are unchanged after root inside tried to write them")
        .isEqualTo(before);
    int base = SANDBOXES.engine().record(shared.open().id()).hostBase();
    assertThat((long) base)
        .as("user namespace: the sandbox has a block of host ids of its own, not the canonical one")
        .matches(IdBlocks::isBlock);
    assertThat(ok(shared, "cat /proc/self/uid_map").strip().split("\\s+"))
        .as("user namespace: ids 0..65535 inside are host ids %d.. (root is not host root)", base)
        .containsExactly("0", Integer.toString(base), "65536");

    String name = "owned-by-" + UUID.randomUUID();
    ok(shared, "sudo touch /" + name + " && touch /home/sandbox/" + name);
    try {
      Path upper =
          SandboxDisk.upper(SANDBOXES.home().resolve("sandboxes").resolve(shared.open().id()));
      Path rootFile = upper.resolve(name);
      Path userFile = upper.resolve("home/sandbox").resolve(name);
      assertThat(Files.getAttribute(rootFile, "unix:uid", LinkOption.NOFOLLOW_LINKS))
          .as("user namespace: a file root inside creates is owned by its block's first id, not 0")
          .isEqualTo(base);
      assertThat(Files.getAttribute(rootFile, "unix:gid", LinkOption.NOFOLLOW_LINKS))
          .as("user namespace: its group is its block's first gid, not 0")
          .isEqualTo(base);
      assertThat(Files.getAttribute(userFile, "unix:uid", LinkOption.NOFOLLOW_LINKS))
          .as("user namespace: the sandbox user (1000 inside) is host uid base + 1000")
          .isEqualTo(base + 1000);
    } finally {
      run(shared, "sudo rm -f /" + name + " /home/sandbox/" + name);
    }
  }

  // ---- 5. memory --------------------------------------------------------------------------

  @Test
  void allocationBeyondTheMemoryLimitIsOomKilledInsideOnly() throws Exception {
    Workspace other = create(new LocalSandbox());
    Workspace limited = create(LocalSandbox.builder().memory(512L << 20).build());

    assertThat(
            ok(limited, "python3 -c 'b = bytearray(b\"\\x01\") * (200 << 20); print(len(b))'")
                .strip())
        .as("control: 200 MiB fit under the 512 MiB limit")
        .isEqualTo(Long.toString(200L << 20));

    CommandResult hog =
        run(limited, "python3 -c 'b = bytearray(b\"\\x01\") * (2 << 30); print(\"ALLOCATED\")'");
    assertThat(hog.exitCode())
        .as(
            "memory cgroup (memory = memory+swap = 512 MiB): a 2 GiB allocation is killed"
                + " (137) or refused (MemoryError); got %s",
            hog)
        .isNotZero();
    assertThat(hog.exitCode() == 137 || hog.stderrText().contains("MemoryError"))
        .as("memory cgroup: the failure is the OOM kill or a MemoryError, got %s", hog)
        .isTrue();
    assertThat(hog.stdoutText())
        .as("memory cgroup: the 2 GiB were never fully allocated")
        .doesNotContain("ALLOCATED");
    assertThat(ok(limited, "cat /sys/fs/cgroup/memory/memory.limit_in_bytes").strip())
        .as("memory cgroup: the sandbox sees its own 512 MiB limit")
        .isEqualTo(Long.toString(512L << 20));
    assertThat(status(ok(limited, "cat /sys/fs/cgroup/memory/memory.oom_control | tr ' ' :")))
        .as("memory cgroup: the kernel counted an OOM kill in the sandbox's own cgroup")
        .hasEntrySatisfying("oom_kill", v -> assertThat(Integer.parseInt(v)).isPositive());

    assertThat(ok(limited, "echo still-alive").strip())
        .as("the OOM kill ended the command, not the sandbox: it still runs commands")
        .isEqualTo("still-alive");
    assertThat(ok(other, "echo other-alive").strip())
        .as("another sandbox carries on after a neighbour's OOM kill")
        .isEqualTo("other-alive");
    byte[] hostAllocation = new byte[64 << 20];
    hostAllocation[hostAllocation.length - 1] = 1;
    assertThat(hostAllocation[hostAllocation.length - 1])
        .as("the host JVM carries on and can still allocate after the sandbox's OOM kill")
        .isEqualTo((byte) 1);
    Process hostTrue = new ProcessBuilder("true").start();
    assertThat(hostTrue.waitFor(10, TimeUnit.SECONDS) && hostTrue.exitValue() == 0)
        .as("the host still starts processes after the sandbox's OOM kill")
        .isTrue();
  }

  // ---- 6. processes limit -----------------------------------------------------------------

  @Test
  void processLimitStopsForksAtThePidsLimit() throws Exception {
    Workspace ws = create(LocalSandbox.builder().pids(256).build());
    String out =
        ok(
            ws,
            "python3 -c '"
                + "import os, signal, time\n"
                + "children, failure = [], None\n"
                + "for i in range(400):\n"
                + "    try:\n"
                + "        pid = os.fork()\n"
                + "    except OSError as e:\n"
                + "        failure = e.errno\n"
                + "        break\n"
                + "    if pid == 0:\n"
                + "        time.sleep(60)\n"
                + "        os._exit(0)\n"
                + "    children.append(pid)\n"
                + "print(len(children), failure)\n"
                + "for pid in children:\n"
                + "    os.kill(pid, signal.SIGKILL)\n"
                + "for pid in children:\n"
                + "    os.waitpid(pid, 0)'");
    String[] counts = out.strip().split(" ");
    int forked = Integer.parseInt(counts[0]);
    assertThat(forked)
        .as("pids cgroup: of 400 forks, fewer than the limit of 256 succeed")
        .isLessThan(256)
        .isGreaterThan(200);
    assertThat(counts[1])
        .as("pids cgroup: the refused fork fails with EAGAIN (11)")
        .isEqualTo("11");
    assertThat(ok(ws, "echo alive").strip())
        .as("the sandbox runs commands after its processes hit the limit")
        .isEqualTo("alive");
  }

  @Test
  void forkBombIsContainedByThePidsLimitAndTheTimeoutCleansItUp() throws Exception {
    Workspace ws = create(LocalSandbox.builder().pids(256).build());
    String id = ws.open().id();
    Path pidsCurrent = hostPidsFile(id, "pids.current");

    CompletableFuture<CommandResult> bomb =
        CompletableFuture.supplyAsync(
            () ->
                ws.run(
                    // exec: once the bomb holds every pid, a fork for sleep would fail
                    Command.shell("bash -c ':(){ :|:& };:' 2>/dev/null; exec sleep 120"),
                    RunOptions.withTimeout(Duration.ofSeconds(7))),
            THREADS);
    long peak = 0;
    // a bomb fills its pids in well under a second; the host is tried while it still runs
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(4);
    while (System.nanoTime() < deadline && !bomb.isDone()) {
      peak = Math.max(peak, Long.parseLong(Files.readString(pidsCurrent).strip()));
      Thread.sleep(100);
    }
    assertThat(peak)
        .as("pids cgroup: the bomb's processes reach but never exceed the limit of 256")
        .isGreaterThan(200)
        .isLessThanOrEqualTo(256);
    Process hostTrue = new ProcessBuilder("true").start();
    assertThat(hostTrue.waitFor(10, TimeUnit.SECONDS) && hostTrue.exitValue() == 0)
        .as("the host still starts processes while the bomb runs in the sandbox")
        .isTrue();

    assertThatThrownBy(() -> getCause(bomb))
        .as("the bomb's command ends at its 7 s timeout")
        .isInstanceOf(WorkspaceTimeoutException.class);
    long left = Long.MAX_VALUE;
    // what is left: init, the engine's exec helper and its spare keeper (for the next command)
    for (int i = 0; i < 100 && left > 3; i++) { // killed processes are reaped by init
      Thread.sleep(50);
      left = Long.parseLong(Files.readString(pidsCurrent).strip());
    }
    assertThat(left)
        .as("the timeout killed every process of the bomb (the command's cgroup), seen from host")
        .isLessThanOrEqualTo(3);
    // not counted: the engine's exec helper and this command's keeper (FastExec)
    String count = ok(ws, "ps -eo args --no-headers | grep -vc '^/dev/sandbox4j-execd'").strip();
    assertThat(Integer.parseInt(count))
        .as("after the timeout, only init and this command's processes are left inside")
        .isLessThanOrEqualTo(4);
    assertThat(ok(ws, "echo alive").strip())
        .as("the sandbox runs commands after the bomb was killed")
        .isEqualTo("alive");
  }

  /**
   * crun 1.8.1 (Debian bookworm) forks after joining the sandbox's pids cgroup; when that fork
   * fails because code in the sandbox holds every pid, it carries on in its own process, which is
   * still in the host's namespaces: it chdirs and resolves the program on the host's file system,
   * chowns its stdio to the sandbox user's uid as a host uid, and setuids to it, before its sync
   * pipe kills it. Whatever the runtime, a command exec'd into a full sandbox must fail with a
   * clear error and leave no trace on the host, with 0, 1 or 2 pids left (crun needs 3 to start a
   * command).
   */
  @Test
  void execIntoASandboxAtItsProcessLimitFailsCleanlyAndNeverTouchesTheHost() throws Exception {
    LocalSandbox sandboxes = LocalSandbox.builder().pids(64).build();
    Workspace ws = create(sandboxes);
    String id = ws.open().id();
    Path pidsMax = hostPidsFile(id, "pids.max");
    Path pidsCurrent = hostPidsFile(id, "pids.current");
    Path hostDir = Files.createTempDirectory("sandbox4j-at-limit-");
    try {
      // Hostile code takes every pid, and keeps taking those that its launcher frees on exit.
      ok(
          ws,
          "nohup python3 -c '"
              + "import os, time\n"
              + "kids, refused = 0, 0\n"
              + "while refused < 100:\n"
              + "    try:\n"
              + "        pid = os.fork()\n"
              + "    except OSError:\n"
              + "        refused += 1\n"
              + "        time.sleep(0.02)\n"
              + "        continue\n"
              + "    if pid == 0:\n"
              + "        time.sleep(3600)\n"
              + "        os._exit(0)\n"
              + "    kids, refused = kids + 1, 0\n"
              + "open(\"/tmp/full\", \"w\").write(str(kids))\n"
              + "time.sleep(3600)' >/dev/null 2>&1 &");
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (!ws.exists("/tmp/full") && System.nanoTime() < deadline) {
        Thread.sleep(100);
      }
      assertThat(ws.exists("/tmp/full")).as("control: the filler took every pid").isTrue();
      long full = Long.parseLong(Files.readString(pidsCurrent).strip());
      assertThat(full).as("control: the sandbox is at its limit of 64").isEqualTo(64);

      for (int left = 0; left <= 2; left++) {
        Files.writeString(pidsMax, Long.toString(full + left));
        Path marker = hostDir.resolve("ran-" + left);

        // Through the public API: a clear error, nothing run on the host.
        Object outcome;
        try {
          outcome = ws.run(Command.argv("touch", marker.toString()));
        } catch (WorkspaceException e) {
          outcome = e;
        }
        assertThat(outcome)
            .as("with %d pids left, the command fails with an exception: %s", left, outcome)
            .isInstanceOf(WorkspaceException.class);
        assertThat(((WorkspaceException) outcome).getMessage())
            .as("with %d pids left, the error tells the model why the command did not start", left)
            .contains("process limit");
        assertThat(marker)
            .as("with %d pids left, the command did not run on the host", left)
            .doesNotExist();

        // The engine's own host command with stdio on root-owned host files: crun 1.8.1 chowns
        // them to uid 1000 of the host while it sets the command up in the host's namespaces.
        Path out = Files.createFile(hostDir.resolve("stdout-" + left));
        Path err = Files.createFile(hostDir.resolve("stderr-" + left));
        String group = sandboxes.engine().cgroups().newCommandGroup(id);
        try {
          Process crun =
              Exec.hostProcess(
                      sandboxes.engine(),
                      id,
                      group,
                      Engine.USER,
                      "/",
                      Engine.BASE_ENV,
                      List.of("/bin/sh", "-c", "touch \"$1\"", "sh", marker.toString()),
                      false)
                  .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                  .redirectOutput(out.toFile())
                  .redirectError(err.toFile())
                  .start();
          assertThat(crun.waitFor(30, TimeUnit.SECONDS)).as("crun exec returns").isTrue();
          assertThat(crun.exitValue())
              .as("with %d pids left, crun exec fails (stderr: %s)", left, Files.readString(err))
              .isNotZero();
        } finally {
          sandboxes.engine().cgroups().removeCommandGroup(id, group);
        }
        for (Path stdio : List.of(out, err)) {
          assertThat(Files.getAttribute(stdio, "unix:uid"))
              .as(
                  "with %d pids left, crun never set the command up in the host's namespaces:"
                      + " its host-side %s is still root's, not chowned to the sandbox user's uid",
                  left, stdio.getFileName())
              .isEqualTo(0);
        }
        assertThat(marker)
            .as("with %d pids left, the command did not run on the host", left)
            .doesNotExist();
      }

      Files.writeString(pidsMax, "max");
      assertThat(ok(ws, "echo alive").strip())
          .as("below its limit again, the sandbox runs commands")
          .isEqualTo("alive");
    } finally {
      Trees.delete(hostDir);
    }
  }

  // ---- 7. sandboxes -----------------------------------------------------------------------

  @Test
  void twoSandboxesCannotSeeEachOthersFilesOrProcesses() throws Exception {
    Workspace a = create(new LocalSandbox());
    Workspace b = create(new LocalSandbox());
    String idA = a.open().id();
    String secret = "sandbox-a-secret-" + UUID.randomUUID();
    String tag = UUID.randomUUID().toString().replace("-", "");
    String file = "/home/sandbox/a-" + tag + ".txt";
    a.writeText(file, secret);
    ok(a, "echo \"$S\" > /tmp/a-" + tag + ".txt", Map.of("S", secret));
    ok(a, "nohup sleep 1001 >/dev/null 2>&1 &");
    assertThat(ok(a, "ps -eo args"))
        .as("control: the marker process runs in sandbox A")
        .contains("sleep 1001");
    assertThat(a.readText(file)).as("control: A reads its own file").isEqualTo(secret);

    assertThat(b.exists(file))
        .as("mount namespace: A's file is not at the same path in B")
        .isFalse();
    assertThatThrownBy(() -> b.readText(file))
        .as("files API: B cannot read A's file by its path")
        .isInstanceOf(WorkspaceException.class);
    Path upperA = SandboxDisk.upper(SANDBOXES.home().resolve("sandboxes").resolve(idA));
    for (String path :
        List.of(
            file,
            "/tmp/a-" + tag + ".txt",
            "/proc/1/root" + file,
            upperA + file,
            "/proc/self/root" + upperA + file)) {
      assertReadDoesNotLeak(b, path, secret);
    }
    String search =
        ok(
            b,
            "for d in /proc/[0-9]*; do sudo cat \"$d/root"
                + file
                + "\" 2>/dev/null; done; sudo find / \\( -path /proc -o -path /sys -o -path /dev"
                + " \\) -prune -o -name '*"
                + tag
                + "*' -print 2>/dev/null; "
                + searchContent("S")
                + " || true; ls -a "
                + upperA.getParent()
                + " 2>/dev/null; true",
            Map.of("S", secret));
    assertThat(search)
        .as("mount namespaces: nothing in B, by any path or a full search, holds A's file")
        .doesNotContain(secret)
        .doesNotContain(tag)
        .isBlank();

    String psB = ok(b, "ps -eo args");
    assertThat(psB)
        .as("pid namespaces: A's 'sleep 1001' is not among B's processes")
        .doesNotContain("sleep 1001");
    try {
      run(b, "sudo pkill -9 -f 'sleep 100[1]'; sudo kill -9 -1; true");
    } catch (WorkspaceException e) {
      // kill -1 also killed B's exec helper, which ran this very command: it fails, saying so
      assertThat(e.getMessage()).contains("exec helper");
    }
    assertThat(ok(a, "ps -eo args"))
        .as("pid namespaces: B's root cannot kill A's processes (pkill, kill -1)")
        .contains("sleep 1001");
    assertThat(ok(b, "hostname").strip())
        .as("uts namespaces: each sandbox has its own hostname")
        .isEqualTo(b.open().id())
        .isNotEqualTo(idA);
  }

  // ---- 8. capabilities and seccomp --------------------------------------------------------

  @Test
  void capabilitiesAreDockersDefaultSetAndSeccompFiltersEveryProcess() {
    assertThat(Set.copyOf(OciConfig.CAPABILITIES))
        .as("the engine's capability set is Docker's default, nothing more")
        .isEqualTo(DOCKER_DEFAULT_CAPS);

    Map<String, String> user = status(ok(shared, "cat /proc/self/status"));
    Map<String, String> root = status(ok(shared, "sudo cat /proc/self/status"));
    Map<String, String> init = status(ok(shared, "cat /proc/1/status"));

    assertThat(decodeCaps(root.get("CapBnd")))
        .as("CapBnd of root inside (sudo) is exactly Docker's 14 default capabilities")
        .isEqualTo(new TreeSet<>(DOCKER_DEFAULT_CAPS));
    assertThat(decodeCaps(root.get("CapEff")))
        .as("root inside (sudo) has effectively Docker's default capabilities, no more")
        .isEqualTo(new TreeSet<>(DOCKER_DEFAULT_CAPS));
    assertThat(decodeCaps(user.get("CapBnd")))
        .as("the sandbox user's bounding set is Docker's default too")
        .isEqualTo(new TreeSet<>(DOCKER_DEFAULT_CAPS));
    assertThat(decodeCaps(user.get("CapEff")))
        .as("the sandbox user (uid 1000) has no effective capability")
        .isEmpty();
    assertThat(decodeCaps(init.get("CapBnd")))
        .as("PID 1's bounding set is Docker's default")
        .isEqualTo(new TreeSet<>(DOCKER_DEFAULT_CAPS));
    assertThat(List.of(user.get("Seccomp"), root.get("Seccomp"), init.get("Seccomp")))
        .as("seccomp is in filter mode (2) for commands, for root inside, and for PID 1")
        .containsOnly("2");
    assertThat(user.get("NoNewPrivs"))
        .as("no_new_privs stays off so that sudo works (the user namespace bounds it)")
        .isEqualTo("0");

    assertKernelReachingCallsAreRefused(shared, "the shared sandbox");

    // A later sandbox gets the filter crun compiled for an earlier one, precompiled: it must
    // refuse exactly as much.
    Workspace later = create(SANDBOXES);
    Path config =
        SANDBOXES
            .home()
            .resolve("sandboxes")
            .resolve(later.ref().orElseThrow().id())
            .resolve("bundle")
            .resolve("config.json");
    if (SANDBOXES.engine().runtime().binary().getFileName().toString().equals("crun")) {
      assertThat(config)
          .as("crun gets the filter it compiled before")
          .content()
          .contains(OciRuntime.SECCOMP_BPF_ANNOTATION);
    }
    assertThat(status(ok(later, "cat /proc/1/status")).get("Seccomp"))
        .as("PID 1 of a sandbox started with the precompiled filter")
        .isEqualTo("2");
    assertKernelReachingCallsAreRefused(later, "a sandbox started with the precompiled filter");
  }

  private static void assertKernelReachingCallsAreRefused(Workspace ws, String which) {
    String probe =
        ok(
            ws,
            "sudo python3 -c '"
                + "import ctypes, platform\n"
                + "x86 = platform.machine() == \"x86_64\"\n"
                + "calls = {\"io_uring_setup\": 425, \"bpf\": 321 if x86 else 280,"
                + " \"keyctl\": 250 if x86 else 219, \"add_key\": 248 if x86 else 217,"
                + " \"perf_event_open\": 298 if x86 else 241,"
                + " \"userfaultfd\": 323 if x86 else 282,"
                + " \"open_by_handle_at\": 304 if x86 else 265,"
                + " \"kexec_load\": 246 if x86 else 104, \"setns\": 308 if x86 else 268,"
                + " \"unshare\": 272 if x86 else 97, \"pivot_root\": 155 if x86 else 41,"
                + " \"fsopen\": 430}\n"
                + "libc = ctypes.CDLL(None, use_errno=True)\n"
                + "params = ctypes.create_string_buffer(256)\n"
                + "for name, nr in sorted(calls.items()):\n"
                + "    args = {\"io_uring_setup\": (4, params), \"unshare\": (0x10000000,),"
                + " \"fsopen\": (b\"tmpfs\", 0), \"userfaultfd\": (0,)}.get(name, (0, 0, 0, 0))\n"
                + "    r = libc.syscall(nr, *args)\n"
                + "    print(name, r, ctypes.get_errno() if r < 0 else 0)'");
    Map<String, String> results =
        probe
            .lines()
            .map(l -> l.split(" "))
            .collect(Collectors.toMap(f -> f[0], f -> f[1] + " " + f[2]));
    assertThat(results)
        .as(
            "seccomp: kernel-reaching syscalls fail with EPERM for root inside, including"
                + " io_uring (which would bypass seccomp) and userfaultfd ("
                + which
                + ")")
        .hasSize(12)
        .allSatisfy((name, result) -> assertThat(result).as(name).isEqualTo("-1 1"));
  }

  // ---- helpers ----------------------------------------------------------------------------

  /** Creates a sandbox of {@code provider} now and destroys it after the test. */
  private Workspace create(LocalSandbox provider) {
    Workspace ws = Workspace.of(provider.newBackend());
    try {
      own.add(ws.open());
    } catch (RuntimeException e) {
      ws.ref().ifPresent(own::add);
      throw e;
    }
    return ws;
  }

  private static CommandResult run(Workspace ws, String script) {
    return ws.run(Command.shell(script), RunOptions.withTimeout(COMMAND_TIMEOUT));
  }

  private static String ok(Workspace ws, String script) {
    return ok(ws, script, Map.of());
  }

  private static String ok(Workspace ws, String script, Map<String, String> env) {
    CommandResult r =
        ws.run(
            Command.shell(script), RunOptions.builder().timeout(COMMAND_TIMEOUT).env(env).build());
    assertThat(r.exitCode()).as("command must succeed: %s%n%s", script, r).isZero();
    return r.stdoutText();
  }

  /** A shell line that runs {@code command} and prints READ-OK only if it succeeded. */
  private static String attempt(String command) {
    return "( " + command + " ) 2>/dev/null && echo READ-OK\n";
  }

  /**
   * A shell line that prints, as root, every file outside /proc, /sys and /dev holding the value of
   * the environment variable {@code var}: a search of the whole sandbox.
   */
  private static String searchContent(String var) {
    return "sudo rg -uuu -l --no-messages -F -e \"$"
        + var
        + "\" $(ls -d /* | grep -vxE '/(proc|sys|dev)')";
  }

  private static void assertReadDoesNotLeak(Workspace ws, String path, String secret) {
    String text;
    try {
      text = ws.readText(path);
    } catch (WorkspaceException expected) {
      return; // no such file, or permission denied: nothing leaked
    }
    assertThat(text)
        .as("files API: reading %s in the sandbox does not return the host's content", path)
        .doesNotContain(secret);
  }

  /**
   * Accepts (and closes) every connection to {@code server} until it is closed, counting them in
   * {@code accepted}; also used by {@link HostileSandboxTest}.
   */
  static CompletableFuture<Void> acceptAll(ServerSocket server, AtomicInteger accepted) {
    return CompletableFuture.runAsync(
        () -> {
          while (!server.isClosed()) {
            try {
              server.setSoTimeout(200);
              try (Socket s = server.accept()) {
                accepted.incrementAndGet();
              }
            } catch (SocketTimeoutException timeout) {
              // poll again until the test closes the server
            } catch (IOException closed) {
              return;
            }
          }
        },
        THREADS);
  }

  /** The host's non-loopback addresses (IPv4 and global IPv6), e.g. eth0's. */
  private static List<String> hostAddresses() throws IOException {
    List<String> out = new ArrayList<>();
    for (NetworkInterface nic : Collections.list(NetworkInterface.getNetworkInterfaces())) {
      if (!nic.isUp() || nic.isLoopback()) {
        continue;
      }
      for (InetAddress address : Collections.list(nic.getInetAddresses())) {
        if (address instanceof Inet4Address
            || !(address.isLinkLocalAddress() || address.isLoopbackAddress())) {
          String text = address.getHostAddress();
          int zone = text.indexOf('%');
          out.add(zone < 0 ? text : text.substring(0, zone));
        }
      }
    }
    return out;
  }

  /** "major:minor name" of the block device holding the host's root filesystem. */
  private static String hostRootDevice() throws IOException {
    for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
      String[] f = line.split(" ");
      if (f[4].equals("/")) {
        String majorMinor = f[2];
        Path uevent = Path.of("/sys/dev/block", majorMinor, "uevent");
        String name =
            Files.exists(uevent)
                ? Files.readAllLines(uevent).stream()
                    .filter(l -> l.startsWith("DEVNAME="))
                    .map(l -> l.substring("DEVNAME=".length()))
                    .findFirst()
                    .orElse("vda")
                : "vda";
        return majorMinor + " " + name;
      }
    }
    return "254:0 vda";
  }

  private static Map<String, String> hostSysctls() throws IOException {
    Map<String, String> values = new java.util.TreeMap<>();
    for (String name :
        List.of(
            "net/ipv4/ip_forward", "kernel/modprobe", "kernel/core_pattern", "vm/drop_caches")) {
      Path p = Path.of("/proc/sys", name);
      if (Files.isReadable(p)) {
        try {
          values.put(name, Files.readString(p));
        } catch (IOException writeOnly) {
          values.put(name, "(unreadable)");
        }
      }
    }
    return values;
  }

  /** The sandbox's cgroup v1 pids file, or its cgroup v2 one on a unified host. */
  private static Path hostPidsFile(String id, String file) {
    // the parent cgroup depends on the state directory (SANDBOX4J_HOME)
    String parent = Cgroups.parentFor(new LocalSandbox().home());
    Path v1 = Path.of("/sys/fs/cgroup/pids", parent, id);
    if (Files.isDirectory(v1)) {
      return v1.resolve(file);
    }
    return Path.of("/sys/fs/cgroup", parent, id).resolve(file);
  }

  private static Map<String, String> status(String procStatus) {
    return procStatus
        .lines()
        .filter(l -> l.contains(":"))
        .collect(
            Collectors.toMap(
                l -> l.substring(0, l.indexOf(':')),
                l -> l.substring(l.indexOf(':') + 1).strip(),
                (x, y) -> x));
  }

  private static Set<String> decodeCaps(String hexMask) {
    long mask = Long.parseUnsignedLong(hexMask, 16);
    Set<String> caps = new TreeSet<>();
    for (int bit = 0; bit < 64; bit++) {
      if ((mask & (1L << bit)) != 0) {
        caps.add(bit < CAP_NAMES.size() ? CAP_NAMES.get(bit) : "CAP_" + bit);
      }
    }
    return caps;
  }

  private static <T> T getCause(CompletableFuture<T> future) throws Throwable {
    try {
      return future.get(60, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      throw e.getCause();
    }
  }
}
