package dev.sandbox4j.runtime.internal.oci;

import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Consumer;

/**
 * CRIU, which checkpoints and restores a sandbox's processes (see {@link Checkpoints}), and {@code
 * sandbox4j setup}'s step that builds it.
 *
 * <p>Debian bookworm's criu 3.17 fails {@code criu check} on current kernels (vDSO), and trixie's
 * binaries need a newer libc, so setup builds CRIU from Debian {@link DebianSource#SUITE}'s
 * upstream tarball (verified as {@link DebianSource} does), with one patch: Linux 6.16 answers
 * {@code getsockopt(SO_PASSCRED / SO_PASSSEC)} on an inet socket with EOPNOTSUPP, which makes CRIU
 * 4.1 fail on any process with a TCP socket (upstream 4.2 has the same fix). It installs, off PATH:
 * {@link #BINARY}, {@code lib/libcriu.so.2} (crun loads it with dlopen; setup's crun has that
 * directory as its RUNPATH) and the headers and {@code criu.pc} that crun's build needs. crun finds
 * the {@code criu} binary on PATH (libcriu runs {@code criu swrk}), so the engine puts {@link #DIR}
 * first on PATH when it checkpoints or restores.
 */
public final class Criu {
  /** Where setup installs CRIU: the directory of setup's crun. */
  public static final Path DIR = OciRuntime.FIXED_CRUN.getParent();

  static final Path BINARY = DIR.resolve("criu");
  static final Path LIB = DIR.resolve("lib");
  static final Path INCLUDE = DIR.resolve("include");

  /** CRIU 4.0 is the first that passes {@code criu check} on this kind of kernel. */
  static final int[] FIRST_WORKING = {4, 0};

  /**
   * Bookworm packages CRIU's build needs (libbsd and uuid are optional and required features; no
   * GnuTLS, nftables, libdrm or Python: the page server's TLS, nftables network locking, the AMD
   * GPU plugin and crit are not used), plus iproute2, whose {@code ip} CRIU runs to save and
   * restore a network namespace's addresses and routes.
   */
  static final List<String> BUILD_PACKAGES =
      List.of(
          "gcc",
          "make",
          "libc6-dev",
          "pkg-config",
          "libprotobuf-dev",
          "libprotobuf-c-dev",
          "protobuf-c-compiler",
          "libnl-3-dev",
          "libnet1-dev",
          "libcap-dev",
          "libbsd-dev",
          "uuid-dev",
          "iproute2");

  private static final String SOCKETS_C = "criu/sockets.c";
  private static final String PASS_HELPER =
      """
      /*
       * Linux 6.16 restricts SO_PASSCRED and SO_PASSSEC to AF_UNIX, AF_NETLINK and
       * AF_BLUETOOTH sockets: on any other socket getsockopt() fails with EOPNOTSUPP,
       * which means the option is off (patched by sandbox4j setup; upstream 4.2 has
       * the same fix).
       */
      static int dump_pass_opt(int sk, int name, int *val)
      {
      \tsocklen_t aux = sizeof(*val);

      \tif (getsockopt(sk, SOL_SOCKET, name, val, &aux) < 0) {
      \t\tif (errno == EOPNOTSUPP) {
      \t\t\t*val = 0;
      \t\t\treturn 0;
      \t\t}
      \t\tpr_perror("Can't get %d:%d opt", SOL_SOCKET, name);
      \t\treturn -1;
      \t}
      \treturn 0;
      }

      """;

  private Criu() {}

  /** Whether setup's CRIU is installed: the binary and the library crun loads. */
  public static boolean installed() {
    return Files.isExecutable(BINARY) && Files.isRegularFile(LIB.resolve("libcriu.so.2"));
  }

  /**
   * The doctor check: CRIU, and whether the engine's crun can use it. Informational (always ok):
   * without it a fork copies files only and hibernate is unavailable, but sandboxes work.
   */
  public static HostCheck check() {
    String name = "checkpoint/restore (CRIU)";
    String without =
        "; without it forks copy files only and sandboxes cannot hibernate (`sandbox4j setup`"
            + " builds CRIU from Debian "
            + DebianSource.SUITE
            + "'s source into "
            + DIR
            + " and crun with CRIU support, about two minutes, needs deb.debian.org)";
    if (!installed()) {
      return HostCheck.ok(
          name,
          "not installed (Debian bookworm's criu 3.17 fails `criu check` on current kernels)"
              + without);
    }
    String version = OciRuntime.versionLine(BINARY);
    HostCommand.Result check = HostCommand.run(List.of(BINARY.toString(), "check"));
    if (!check.ok()) {
      return HostCheck.ok(
          name,
          BINARY
              + " ("
              + version
              + "): `criu check` fails on this kernel: "
              + lastLine(check.output())
              + "; forks copy files only and sandboxes cannot hibernate");
    }
    var crun = OciRuntime.defaultCrun();
    if (crun.isEmpty() || !OciRuntime.supportsCheckpoint(crun.get())) {
      return HostCheck.ok(
          name,
          BINARY
              + " ("
              + version
              + ") passes `criu check`, but "
              + crun.map(Path::toString).orElse("no crun")
              + " is built without CRIU"
              + without);
    }
    return HostCheck.ok(
        name, BINARY + " (" + version + "), `criu check` passes; " + crun.get() + " has +CRIU");
  }

  /**
   * Builds and installs CRIU unless setup's CRIU is installed and passes {@code criu check}.
   *
   * @throws WorkspaceException saying which step failed and why
   */
  public static void install(Consumer<String> progress) {
    if (installed() && HostCommand.run(List.of(BINARY.toString(), "check")).ok()) {
      progress.accept(
          "criu: " + BINARY + " (" + OciRuntime.versionLine(BINARY) + ") passes `criu check`");
      return;
    }
    progress.accept(
        "criu: building CRIU from Debian "
            + DebianSource.SUITE
            + "'s source into "
            + DIR
            + " (live fork and hibernate need it; about a minute)");
    long start = System.nanoTime();
    DebianSource.inWorkDirectory(
        "criu",
        progress,
        work -> {
          DebianSource.Source source =
              DebianSource.fetch(
                  "criu",
                  work,
                  v -> OciRuntime.atLeast(v, FIRST_WORKING),
                  "4.0 or newer",
                  progress);
          DebianSource.installBuildPackages("criu", BUILD_PACKAGES, progress);
          Path log = work.resolve("build.log");
          progress.accept("criu: unpacking " + source.tarball().getFileName());
          Path dir = DebianSource.unpack("criu", source, work, log);
          patch(dir, progress);
          int jobs = Runtime.getRuntime().availableProcessors();
          progress.accept("criu: make -j" + jobs + " criu lib/c/libcriu.so (log: " + log + ")");
          List<String> make = List.of("make", "-j" + jobs, "NO_GNUTLS=1");
          DebianSource.logged("criu", DebianSource.concat(make, List.of("criu")), dir, log);
          DebianSource.logged(
              "criu", DebianSource.concat(make, List.of("lib/c/libcriu.so")), dir, log);
          HostCommand.Result check =
              HostCommand.run(List.of(dir.resolve("criu/criu").toString(), "check"));
          if (!check.ok()) {
            throw new DebianSource.BuildKept(
                "criu: the CRIU built in "
                    + work
                    + " fails `criu check` on this kernel: "
                    + lastLine(check.output()));
          }
          place(dir, source.upstreamVersion());
          progress.accept(
              "criu: installed "
                  + OciRuntime.versionLine(BINARY)
                  + " at "
                  + BINARY
                  + ", `criu check` passes, in "
                  + (System.nanoTime() - start) / 1_000_000_000
                  + " s");
        });
  }

  /** The SO_PASSCRED/SO_PASSSEC fix, unless the source has it already. */
  private static void patch(Path dir, Consumer<String> progress) {
    Path file = dir.resolve(SOCKETS_C);
    try {
      String c = Files.readString(file);
      String passcred = "ret |= dump_opt(sk, SOL_SOCKET, SO_PASSCRED, &val);";
      String passsec = "ret |= dump_opt(sk, SOL_SOCKET, SO_PASSSEC, &val);";
      String function = "int dump_socket_opts(int sk, SkOptsEntry *soe)\n";
      if (!c.contains(passcred) && !c.contains(passsec)) {
        progress.accept("criu: " + SOCKETS_C + " needs no SO_PASSCRED patch");
        return;
      }
      if (count(c, passcred) != 1 || count(c, passsec) != 1 || count(c, function) != 1) {
        throw new WorkspaceException(
            "criu: cannot apply the SO_PASSCRED/SO_PASSSEC patch to " + file + ": unexpected code");
      }
      c =
          c.replace(function, PASS_HELPER + function)
              .replace(passcred, "ret |= dump_pass_opt(sk, SO_PASSCRED, &val);")
              .replace(passsec, "ret |= dump_pass_opt(sk, SO_PASSSEC, &val);");
      Files.writeString(file, c);
      progress.accept(
          "criu: patched "
              + SOCKETS_C
              + ": SO_PASSCRED/SO_PASSSEC are off where Linux 6.16+ refuses them");
    } catch (IOException e) {
      throw new WorkspaceException("criu: cannot patch " + file + ": " + e.getMessage(), e);
    }
  }

  /** The binary, libcriu, and the headers and pkg-config file crun's build needs. */
  private static void place(Path dir, String version) {
    try {
      Path include = Files.createDirectories(INCLUDE.resolve("criu"));
      for (String header :
          List.of(
              "lib/c/criu.h", "images/rpc.proto", "images/rpc.pb-c.h", "criu/include/version.h")) {
        Path from = dir.resolve(header);
        DebianSource.place("criu", from, include.resolve(from.getFileName()), "rw-r--r--");
      }
      DebianSource.place(
          "criu", dir.resolve("lib/c/libcriu.so"), LIB.resolve("libcriu.so.2"), "rwxr-xr-x");
      Path pkgconfig = Files.createDirectories(LIB.resolve("pkgconfig"));
      Files.writeString(
          pkgconfig.resolve("criu.pc"),
          "libdir="
              + LIB
              + "\nincludedir="
              + INCLUDE
              + "\n\nName: CRIU\nDescription: RPC library for userspace checkpoint and restore\n"
              + "Version: "
              + version
              + "\nLibs: -L${libdir} -l:libcriu.so.2\nCflags: -I${includedir}\n");
      // last: installed() is true only once everything else is in place
      DebianSource.place("criu", dir.resolve("criu/criu"), BINARY, "rwxr-xr-x");
    } catch (IOException e) {
      throw new WorkspaceException("criu: cannot install into " + DIR + ": " + e.getMessage(), e);
    }
  }

  private static int count(String text, String what) {
    int n = 0;
    for (int i = text.indexOf(what); i >= 0; i = text.indexOf(what, i + 1)) {
      n++;
    }
    return n;
  }

  private static String lastLine(String output) {
    List<String> lines = output.strip().lines().toList();
    return lines.isEmpty() ? "(no output)" : lines.getLast();
  }
}
