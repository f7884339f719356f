package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The crun the engine runs by default, and {@code sandbox4j setup}'s step that builds one when the
 * installed crun is older than 1.9 (see {@link OciRuntime#unsafeWhenForkFails}).
 *
 * <p>The source is Debian trixie's {@code crun} source package, fetched with {@code apt-get source}
 * through a sources list, package lists and cache of its own, so the host's apt configuration and
 * state are untouched. apt checks the index against the archive's signed Release file and each
 * downloaded file against the index; this class checks the upstream tarball's SHA-256 against the
 * index once more itself, so a partial download (some mirrors serve only the upstream tarball, not
 * the Debian packaging) is caught. It builds the upstream source with what crun needs and nothing
 * more (no systemd, no CRIU, yajl embedded, libcrun linked in) and installs the binary at {@link
 * OciRuntime#FIXED_CRUN}, off PATH: {@code /usr/bin/crun} stays Debian's.
 */
final class FixedCrun {
  /** The Debian release whose crun (1.21) is built. */
  static final String SUITE = "trixie";

  static final String ARCHIVE = "http://deb.debian.org/debian";

  private static final Path KEYRING = Path.of("/usr/share/keyrings/debian-archive-keyring.gpg");

  /** Bookworm packages the build needs: a C toolchain, pkg-config, python3 (configure), libs. */
  static final List<String> BUILD_PACKAGES =
      List.of("gcc", "make", "libc6-dev", "pkg-config", "python3", "libcap-dev", "libseccomp-dev");

  static final List<String> CONFIGURE_OPTIONS =
      List.of("--disable-systemd", "--disable-criu", "--enable-embedded-yajl", "--disable-shared");

  private static final Pattern ORIG_TARBALL =
      Pattern.compile(
          "^ ([0-9a-f]{64}) \\d+ (crun_[0-9A-Za-z.+~]+\\.orig\\.tar\\.(?:gz|xz|bz2))$",
          Pattern.MULTILINE);
  private static final Pattern SAFE_FILE_NAME = Pattern.compile("[0-9A-Za-z._+~-]+");

  private FixedCrun() {}

  /** The doctor check: which crun the engine uses, and whether it is safe. */
  static HostCheck check() {
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
   * Builds and installs a fixed crun unless the engine's default crun is 1.9 or newer already.
   *
   * @throws WorkspaceException saying which step failed and why: the source cannot be fetched or
   *     does not verify, build dependencies cannot be installed, or the build fails
   */
  static void install(Consumer<String> progress) {
    Optional<Path> current = OciRuntime.defaultCrun();
    String currentVersion = current.map(OciRuntime::versionLine).orElse("");
    if (current.isPresent() && OciRuntime.atLeast(currentVersion, OciRuntime.FIRST_SAFE_CRUN)) {
      progress.accept("crun: " + current.get() + " (" + currentVersion + ") needs no rebuild");
      return;
    }
    progress.accept(
        "crun: "
            + current.map(p -> p + " (" + currentVersion + ")").orElse("no crun")
            + " is older than "
            + versionText(OciRuntime.FIRST_SAFE_CRUN)
            + ", whose exec is unsafe in a sandbox at its process limit; building crun from"
            + " Debian "
            + SUITE
            + "'s source into "
            + OciRuntime.FIXED_CRUN
            + " (about a minute)");
    long start = System.nanoTime();
    Path work;
    try {
      work = Files.createTempDirectory("sandbox4j-crun-");
    } catch (IOException e) {
      throw new WorkspaceException("crun: cannot create a build directory: " + e.getMessage(), e);
    }
    boolean keep = false;
    try {
      Source source = fetch(work, progress);
      installBuildPackages(progress);
      Path built = build(work, source, progress);
      String version = OciRuntime.versionLine(built);
      if (!OciRuntime.atLeast(version, OciRuntime.FIRST_SAFE_CRUN)) {
        keep = true;
        throw new WorkspaceException(
            "crun: the binary built in " + work + " reports '" + version + "', not 1.9 or newer");
      }
      place(built);
      progress.accept(
          "crun: installed "
              + version
              + " at "
              + OciRuntime.FIXED_CRUN
              + " in "
              + (System.nanoTime() - start) / 1_000_000_000
              + " s");
    } catch (BuildFailed e) {
      keep = true;
      throw new WorkspaceException(e.getMessage() + " (the build directory " + work + " is kept)");
    } finally {
      if (!keep) {
        try {
          Trees.delete(work);
        } catch (IOException e) {
          progress.accept("crun: could not delete " + work + ": " + e.getMessage());
        }
      }
    }
  }

  /** The upstream tarball of a Debian source package, verified. */
  private record Source(String version, Path tarball) {}

  private static Source fetch(Path work, Consumer<String> progress) {
    List<String> apt = aptOptions(work);
    progress.accept(
        "crun: fetching Debian " + SUITE + "'s source index (apt-get update, private lists)");
    // --error-on=any: a failed download is otherwise only a warning, and apt-get exits 0
    int exit =
        HostSetup.stream(
            concat(List.of("apt-get", "update", "-q", "--error-on=any"), apt), work, progress);
    if (exit != 0 || !hasSourceIndex(work)) {
      throw new WorkspaceException(
          "crun: cannot fetch Debian "
              + SUITE
              + "'s source index from "
              + ARCHIVE
              + " (apt-get update exited "
              + exit
              + ", see above); building a fixed crun needs that archive");
    }
    HostCommand.Result index =
        HostCommand.run(concat(List.of("apt-cache"), concat(apt, List.of("showsrc", "crun"))));
    if (!index.ok()) {
      throw new WorkspaceException(
          "crun: Debian " + SUITE + " has no crun source package: " + index.output());
    }
    IndexEntry entry =
        IndexEntry.parse(index.stdout())
            .orElseThrow(
                () ->
                    new WorkspaceException(
                        "crun: cannot read the version and upstream tarball of crun in Debian "
                            + SUITE
                            + "'s source index"));
    String version = entry.version();
    String file = entry.file();
    String sha256 = entry.sha256();
    if (!OciRuntime.atLeast(version, OciRuntime.FIRST_SAFE_CRUN)) {
      throw new WorkspaceException(
          "crun: Debian " + SUITE + " has crun " + version + ", not 1.9 or newer");
    }

    progress.accept("crun: downloading the source of crun " + version + " (apt-get source)");
    Path src = work.resolve("src");
    try {
      Files.createDirectories(src);
    } catch (IOException e) {
      throw new WorkspaceException("crun: cannot create " + src + ": " + e.getMessage(), e);
    }
    exit =
        HostSetup.stream(
            concat(
                List.of("apt-get", "source", "--download-only", "-q"),
                concat(apt, List.of("crun=" + version))),
            src,
            progress);
    Path tarball = src.resolve(file);
    if (!Files.isRegularFile(tarball)) {
      throw new WorkspaceException(
          "crun: cannot fetch the source of crun "
              + version
              + " from Debian "
              + SUITE
              + " ("
              + file
              + "; apt-get source exited "
              + exit
              + ", see above)");
    }
    String actual = sha256(tarball);
    if (!actual.equals(sha256)) {
      throw new WorkspaceException(
          "crun: "
              + file
              + " does not match Debian's signed index (SHA-256 "
              + actual
              + ", expected "
              + sha256
              + ")");
    }
    progress.accept(
        "crun: "
            + file
            + " matches the SHA-256 in Debian "
            + SUITE
            + "'s signed index"
            + (exit == 0 ? "" : " (only the upstream tarball was served; building that)"));
    return new Source(version, tarball);
  }

  /**
   * A source package's version and upstream tarball, with its SHA-256, as {@code apt-cache showsrc}
   * prints them from the (signed) index.
   */
  record IndexEntry(String version, String file, String sha256) {
    /** The first stanza of {@code apt-cache showsrc} output, if it names an upstream tarball. */
    static Optional<IndexEntry> parse(String showsrc) {
      String stanza = showsrc.split("\n\n", 2)[0];
      String version = field(stanza, "Version");
      int checksums = stanza.indexOf("Checksums-Sha256:");
      if (version.isEmpty() || checksums < 0) {
        return Optional.empty();
      }
      // only the lines of this field: it ends at the next line that does not start with a space
      List<String> lines = new ArrayList<>();
      for (String line : stanza.substring(checksums).lines().skip(1).toList()) {
        if (!line.startsWith(" ")) {
          break;
        }
        lines.add(line);
      }
      Matcher orig = ORIG_TARBALL.matcher(String.join("\n", lines));
      if (!orig.find() || !SAFE_FILE_NAME.matcher(orig.group(2)).matches()) {
        return Optional.empty();
      }
      return Optional.of(new IndexEntry(version, orig.group(2), orig.group(1)));
    }
  }

  /** Whether apt-get update left a Sources index in the private lists. */
  private static boolean hasSourceIndex(Path work) {
    try (var files = Files.list(work.resolve("apt/lists"))) {
      return files.anyMatch(f -> f.getFileName().toString().contains("_source_Sources"));
    } catch (IOException e) {
      return false;
    }
  }

  /** apt options that use {@code work} for sources, lists and cache instead of the host's. */
  private static List<String> aptOptions(Path work) {
    Path lists = work.resolve("apt/lists");
    Path cache = work.resolve("apt/cache");
    Path sources = work.resolve("apt/sources.list");
    String signedBy = Files.isRegularFile(KEYRING) ? " [signed-by=" + KEYRING + "]" : "";
    try {
      Files.createDirectories(lists.resolve("partial"));
      Files.createDirectories(cache.resolve("archives/partial"));
      Files.writeString(sources, "deb-src" + signedBy + " " + ARCHIVE + " " + SUITE + " main\n");
    } catch (IOException e) {
      throw new WorkspaceException("crun: cannot prepare " + work + ": " + e.getMessage(), e);
    }
    return List.of(
        "-o",
        "Dir::Etc::SourceList=" + sources,
        "-o",
        "Dir::Etc::SourceParts=/dev/null",
        "-o",
        "Dir::State::Lists=" + lists,
        "-o",
        "Dir::Cache=" + cache,
        // the downloads land in a root-only temporary directory that apt's _apt user cannot
        // write to; apt still verifies every file against the signed index
        "-o",
        "APT::Sandbox::User=root");
  }

  private static void installBuildPackages(Consumer<String> progress) {
    List<String> missing = new ArrayList<>();
    for (String p : BUILD_PACKAGES) {
      HostCommand.Result r = HostCommand.run(List.of("dpkg-query", "-W", "-f=${Status}", p));
      if (!r.stdout().equals("install ok installed")) {
        missing.add(p);
      }
    }
    if (missing.isEmpty()) {
      progress.accept("crun: build dependencies are installed");
      return;
    }
    progress.accept("crun: installing build dependencies: " + String.join(" ", missing));
    List<String> install =
        concat(
            List.of(
                "apt-get",
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "-o",
                "DPkg::Lock::Timeout=120"),
            missing);
    if (HostSetup.stream(install, null, progress) == 0) {
      return;
    }
    progress.accept("crun: updating the package lists and trying again");
    HostSetup.stream(List.of("apt-get", "update", "-q"), null, progress);
    int exit = HostSetup.stream(install, null, progress);
    if (exit != 0) {
      throw new WorkspaceException(
          "crun: cannot install the build dependencies "
              + String.join(" ", missing)
              + " (apt-get install exited "
              + exit
              + ", see above)");
    }
  }

  /** Unpacks, configures and compiles; returns the built binary. */
  private static Path build(Path work, Source source, Consumer<String> progress) {
    Path src = work.resolve("src");
    Path log = work.resolve("build.log");
    String upstream = source.version().replaceFirst("^\\d+:", "").replaceFirst("-[^-]*$", "");
    Path dir = src.resolve("crun-" + upstream);
    progress.accept("crun: unpacking " + source.tarball().getFileName());
    logged(List.of("tar", "-xf", source.tarball().toString(), "-C", src.toString()), src, log);
    if (!Files.isRegularFile(dir.resolve("configure"))) {
      throw new BuildFailed("crun: the tarball has no crun-" + upstream + "/configure", log);
    }
    progress.accept("crun: ./configure " + String.join(" ", CONFIGURE_OPTIONS));
    logged(concat(List.of("./configure"), CONFIGURE_OPTIONS), dir, log);
    int jobs = Runtime.getRuntime().availableProcessors();
    progress.accept("crun: make -j" + jobs + " (log: " + log + ")");
    logged(List.of("make", "-j" + jobs), dir, log);
    Path binary = dir.resolve("crun");
    if (!Files.isExecutable(binary)) {
      throw new BuildFailed("crun: make produced no crun binary", log);
    }
    return binary;
  }

  /** Copies {@code built} to {@link OciRuntime#FIXED_CRUN} atomically, mode 0755. */
  private static void place(Path built) {
    Path target = OciRuntime.FIXED_CRUN;
    try {
      Files.createDirectories(target.getParent());
      Path tmp = target.resolveSibling("." + target.getFileName() + ".new");
      Files.copy(built, tmp, StandardCopyOption.REPLACE_EXISTING);
      Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwxr-xr-x"));
      Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException e) {
      throw new WorkspaceException("crun: cannot install " + target + ": " + e.getMessage(), e);
    }
  }

  /** Runs a build step with its output appended to {@code log}; a failure carries the log. */
  private static void logged(List<String> argv, Path dir, Path log) {
    ProcessBuilder builder =
        new ProcessBuilder(argv)
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
    builder.environment().put("LC_ALL", "C.UTF-8");
    try {
      int exit = builder.start().waitFor();
      if (exit != 0) {
        throw new BuildFailed("crun: " + String.join(" ", argv) + " exited " + exit, log);
      }
    } catch (IOException e) {
      throw new BuildFailed("crun: cannot run " + argv.getFirst() + ": " + e.getMessage(), log);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted while building crun");
    }
  }

  /** A failed build step, with the end of the build log in its message. */
  private static final class BuildFailed extends RuntimeException {
    BuildFailed(String what, Path log) {
      super(what + tail(log));
    }

    private static String tail(Path log) {
      try {
        List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
        return "; the build log ends:\n  "
            + String.join("\n  ", lines.subList(Math.max(0, lines.size() - 20), lines.size()));
      } catch (IOException | RuntimeException e) {
        return "";
      }
    }
  }

  private static String field(String stanza, String name) {
    for (String line : stanza.lines().toList()) {
      if (line.startsWith(name + ":")) {
        return line.substring(name.length() + 1).strip();
      }
    }
    return "";
  }

  private static String sha256(Path file) {
    try (InputStream in = Files.newInputStream(file)) {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      byte[] buffer = new byte[1 << 16];
      int n;
      while ((n = in.read(buffer)) > 0) {
        digest.update(buffer, 0, n);
      }
      return HexFormat.of().formatHex(digest.digest());
    } catch (IOException | NoSuchAlgorithmException e) {
      throw new WorkspaceException("crun: cannot read " + file + ": " + e.getMessage(), e);
    }
  }

  private static String versionText(int[] majorMinor) {
    return majorMinor[0] + "." + majorMinor[1];
  }

  private static List<String> concat(List<String> a, List<String> b) {
    List<String> out = new ArrayList<>(a);
    out.addAll(b);
    return out;
  }
}
