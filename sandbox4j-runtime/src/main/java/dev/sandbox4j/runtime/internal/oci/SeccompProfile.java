package dev.sandbox4j.runtime.internal.oci;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The default seccomp filter: everything a development machine needs is allowed; what reaches into
 * the kernel or the host is refused with EPERM (ENOSYS for clone3, so that libc falls back to
 * clone, whose namespace flags can be checked).
 *
 * <p>Refused: loading kernel code (modules, kexec, BPF), the keyring, mounting and pivoting
 * filesystems (also through the new mount API), opening files by handle (the "shocker" escape),
 * creating or joining namespaces, tracing the whole system (perf), swap, reboot, the clock,
 * accounting, quotas, raw I/O ports, the kernel log, userfaultfd, io_uring (its operations bypass
 * seccomp, and it is a large kernel attack surface: Docker and containerd refuse it too), and
 * {@code AF_VSOCK} sockets (vsock has no network namespaces: a sandbox could reach the hypervisor
 * and share the host's vsock ports; Docker refuses them too). Non-goal: a minimal allowlist; a
 * denylist keeps unknown tools working, and the user namespace, capabilities and cgroups stand
 * behind it.
 */
final class SeccompProfile {
  private static final int EPERM = 1;
  private static final int ENOSYS = 38;

  private static final List<String> DENIED =
      List.of(
          "init_module",
          "finit_module",
          "delete_module",
          "create_module",
          "kexec_load",
          "kexec_file_load",
          "bpf",
          "add_key",
          "request_key",
          "keyctl",
          "mount",
          "umount",
          "umount2",
          "pivot_root",
          "move_mount",
          "open_tree",
          "fsopen",
          "fsconfig",
          "fsmount",
          "fspick",
          "mount_setattr",
          "open_by_handle_at",
          "name_to_handle_at",
          "setns",
          "unshare",
          "perf_event_open",
          "lookup_dcookie",
          "swapon",
          "swapoff",
          "reboot",
          "settimeofday",
          "clock_settime",
          "clock_settime64",
          "clock_adjtime",
          "clock_adjtime64",
          "adjtimex",
          "stime",
          "acct",
          "quotactl",
          "quotactl_fd",
          "iopl",
          "ioperm",
          "syslog",
          "vhangup",
          "nfsservctl",
          "get_kernel_syms",
          "query_module",
          "uselib",
          "_sysctl",
          "userfaultfd",
          "io_uring_setup",
          "io_uring_enter",
          "io_uring_register");

  /** socket(2)'s address family of VM sockets, which no namespace isolates. */
  private static final long AF_VSOCK = 40;

  /** The namespace flags of clone(2): a new namespace inside the sandbox is refused. */
  private static final long[] CLONE_NAMESPACE_FLAGS = {
    0x00020000L, // CLONE_NEWNS
    0x02000000L, // CLONE_NEWCGROUP
    0x04000000L, // CLONE_NEWUTS
    0x08000000L, // CLONE_NEWIPC
    0x10000000L, // CLONE_NEWUSER
    0x20000000L, // CLONE_NEWPID
    0x40000000L, // CLONE_NEWNET
  };

  static final Map<String, Object> DEFAULT = build();

  private SeccompProfile() {}

  private static Map<String, Object> build() {
    List<Map<String, Object>> rules = new ArrayList<>();
    rules.add(rule(DENIED, "SCMP_ACT_ERRNO", EPERM, List.of()));
    rules.add(rule(List.of("clone3"), "SCMP_ACT_ERRNO", ENOSYS, List.of()));
    // On 32-bit x86, libseccomp cannot read socketcall(2)'s arguments (they are in memory): there
    // the rule refuses every socket made through socketcall (as i386 glibc does), while the
    // direct socket(2) call is filtered by family. 64-bit programs are filtered by family only.
    rules.add(
        rule(
            List.of("socket"),
            "SCMP_ACT_ERRNO",
            EPERM,
            List.of(Map.of("index", 0, "value", AF_VSOCK, "op", "SCMP_CMP_EQ"))));
    for (long flag : CLONE_NAMESPACE_FLAGS) {
      // clone(flags, ...): refused when (flags & flag) == flag
      rules.add(
          rule(
              List.of("clone"),
              "SCMP_ACT_ERRNO",
              EPERM,
              List.of(
                  Map.of(
                      "index", 0, "value", flag, "valueTwo", flag, "op", "SCMP_CMP_MASKED_EQ"))));
    }
    Map<String, Object> profile = new LinkedHashMap<>();
    profile.put("defaultAction", "SCMP_ACT_ALLOW");
    profile.put("architectures", architectures());
    profile.put("syscalls", rules);
    return profile;
  }

  /** The native architecture and its compat ones, so that 32-bit calls are filtered too. */
  private static List<String> architectures() {
    return switch (System.getProperty("os.arch")) {
      case "aarch64" -> List.of("SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM");
      default -> List.of("SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32");
    };
  }

  private static Map<String, Object> rule(
      List<String> names, String action, int errno, List<Map<String, Object>> args) {
    Map<String, Object> rule = new LinkedHashMap<>();
    rule.put("names", names);
    rule.put("action", action);
    rule.put("errnoRet", errno);
    if (!args.isEmpty()) {
      rule.put("args", args);
    }
    return rule;
  }
}
