package dev.sandbox4j.runtime.internal.oci;

import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.workspace.WorkspaceException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * The crun the engine runs by default, and {@code sandbox4j setup}'s step that builds one when the
 * installed crun is older than 1.9 (see {@link OciRuntime#unsafeWhenForkFails}) or, with setup's
 * {@link Criu} installed, has no CRIU support.
 *
 * <p>The source is Debian trixie's {@code crun} source package, fetched and verified by {@link
 * DebianSource}. It builds the upstream source with what crun needs and nothing more (no systemd,
 * yajl embedded, libcrun linked in; CRIU support against setup's libcriu when that is installed)
 * and installs the binary at {@link OciRuntime#FIXED_CRUN}, off PATH: {@code /usr/bin/crun} stays
 * Debian's.
 */
public final class FixedCrun {
  /** The Debian release whose crun (1.21) is built. */
  static final String SUITE = DebianSource.SUITE;

  /** Bookworm packages the build needs: a C toolchain, pkg-config, python3 (configure), libs. */
  static final List<String> BUILD_PACKAGES =
      List.of("gcc", "make", "libc6-dev", "pkg-config", "python3", "libcap-dev", "libseccomp-dev");

  private FixedCrun() {}

  /** The doctor check: which crun the engine uses, and whether it is safe. */
  public static HostCheck check() {
    Optional<Path> crun = OciRuntime.defaultCrun();
    if (crun.isEmpty()) {
      return HostCheck.missing(
          "crun",
          "not installed; it is the OCI runtime that runs sandboxes",
          "sandbox4j setup (installs Debian's crun, and builds crun "
              + versionText(OciRuntime.FIRST_SAFE_CRUN)
              + " or newer if Debian's is older)");
    }
    String version = OciRuntime.versionLine(crun.get());
    String found = crun.get() + (version.isEmpty() ? "" : " (" + version + ")");
    if (OciRuntime.atLeast(version, OciRuntime.FIRST_SAFE_CRUN)) {
      return HostCheck.ok(
          "crun",
          found
              + (crun.get().equals(OciRuntime.FIXED_CRUN)
                  ? ", built by sandbox4j setup from Debian " + SUITE + "'s source"
                  : ""));
    }
    return HostCheck.missing(
        "crun",
        found
            + " is older than "
            + versionText(OciRuntime.FIRST_SAFE_CRUN)
            + ": when `crun exec` cannot fork because code in the sandbox holds every pid, it"
            + " carries on in the host's namespaces (chowning the command's stdio to a host uid);"
            + " until a fixed crun is installed, the engine refuses to exec into a sandbox with"
            + " fewer than 4 pids left, which a racing fork can still beat",
        "sandbox4j setup (builds crun from Debian "
            + SUITE
            + "'s source package into "
            + OciRuntime.FIXED_CRUN
            + ", about a minute; needs deb.debian.org)");
  }

  /**
   * Builds and installs crun unless the engine's default crun is 1.9 or newer already and, when
   * setup's CRIU is installed, has CRIU support.
   *
   * @throws WorkspaceException saying which step failed and why: the source cannot be fetched or
   *     does not verify, build dependencies cannot be installed, or the build fails
   */
  public static void install(Consumer<String> progress) {
    Optional<Path> current = OciRuntime.defaultCrun();
    String currentVersion = current.map(OciRuntime::versionLine).orElse("");
    boolean safe =
        current.isPresent() && OciRuntime.atLeast(currentVersion, OciRuntime.FIRST_SAFE_CRUN);
    boolean wantsCriu = Criu.installed();
    boolean hasCriu = current.isPresent() && OciRuntime.supportsCheckpoint(current.get());
    if (safe && (hasCriu || !wantsCriu)) {
      progress.accept(
          "crun: "
              + current.get()
              + " ("
              + currentVersion
              + (hasCriu ? ", +CRIU" : "")
              + ") needs no rebuild");
      return;
    }
    String why =
        safe
            ? " has no CRIU support, which live fork and hibernate need"
            : " is older than "
                + versionText(OciRuntime.FIRST_SAFE_CRUN)
                + ", whose exec is unsafe in a sandbox at its process limit";
    progress.accept(
        "crun: "
            + current.map(p -> p + " (" + currentVersion + ")").orElse("no crun")
            + why
            + "; building crun from Debian "
            + SUITE
            + "'s source into "
            + OciRuntime.FIXED_CRUN
            + (wantsCriu ? " with CRIU support" : "")
            + " (about a minute)");
    long start = System.nanoTime();
    DebianSource.inWorkDirectory(
        "crun",
        progress,
        work -> {
          DebianSource.Source source =
              DebianSource.fetch(
                  "crun",
                  work,
                  v -> OciRuntime.atLeast(v, OciRuntime.FIRST_SAFE_CRUN),
                  "1.9 or newer",
                  progress);
          DebianSource.installBuildPackages("crun", BUILD_PACKAGES, progress);
          Path built = build(work, source, progress);
          String version = OciRuntime.versionLine(built);
          if (!OciRuntime.atLeast(version, OciRuntime.FIRST_SAFE_CRUN)) {
            throw new DebianSource.BuildKept(
                "crun: the binary built in "
                    + work
                    + " reports '"
                    + version
                    + "', not 1.9 or newer");
          }
          if (wantsCriu && !OciRuntime.supportsCheckpoint(built)) {
            throw new DebianSource.BuildKept(
                "crun: the binary built in " + work + " has no CRIU support (`crun --version`)");
          }
          DebianSource.place("crun", built, OciRuntime.FIXED_CRUN, "rwxr-xr-x");
          progress.accept(
              "crun: installed "
                  + version
                  + (wantsCriu ? " +CRIU" : "")
                  + " at "
                  + OciRuntime.FIXED_CRUN
                  + " in "
                  + (System.nanoTime() - start) / 1_000_000_000
                  + " s");
        });
  }

  /** Unpacks, configures (with CRIU when setup's CRIU is installed) and compiles crun. */
  private static Path build(Path work, DebianSource.Source source, Consumer<String> progress) {
    Path log = work.resolve("build.log");
    progress.accept("crun: unpacking " + source.tarball().getFileName());
    Path dir = DebianSource.unpack("crun", source, work, log);
    if (!Files.isRegularFile(dir.resolve("configure"))) {
      throw new DebianSource.BuildFailed(
          "crun: the tarball has no " + dir.getFileName() + "/configure", log);
    }
    boolean criu = Criu.installed();
    List<String> options = configureOptions(criu);
    progress.accept("crun: ./configure " + String.join(" ", options));
    DebianSource.logged(
        "crun",
        DebianSource.concat(List.of("./configure"), options),
        dir,
        log,
        criu ? Map.of("PKG_CONFIG_PATH", Criu.LIB.resolve("pkgconfig").toString()) : Map.of());
    int jobs = Runtime.getRuntime().availableProcessors();
    progress.accept("crun: make -j" + jobs + " (log: " + log + ")");
    DebianSource.logged("crun", List.of("make", "-j" + jobs), dir, log);
    Path binary = dir.resolve("crun");
    if (!Files.isExecutable(binary)) {
      throw new DebianSource.BuildFailed("crun: make produced no crun binary", log);
    }
    return binary;
  }

  /**
   * crun's configure options: no systemd, yajl embedded, libcrun linked in; CRIU support against
   * setup's libcriu when {@code criu}, else none. crun loads libcriu with dlopen, so the binary
   * gets {@link Criu#LIB} as its RUNPATH.
   */
  static List<String> configureOptions(boolean criu) {
    if (!criu) {
      return List.of(
          "--disable-systemd", "--disable-criu", "--enable-embedded-yajl", "--disable-shared");
    }
    return List.of(
        "--disable-systemd",
        "--enable-criu",
        "--enable-embedded-yajl",
        "--disable-shared",
        "CPPFLAGS=-I" + Criu.INCLUDE,
        "LDFLAGS=-Wl,-rpath," + Criu.LIB);
  }

  private static String versionText(int[] majorMinor) {
    return majorMinor[0] + "." + majorMinor[1];
  }
}
