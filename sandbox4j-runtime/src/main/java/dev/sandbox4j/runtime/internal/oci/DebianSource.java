package dev.sandbox4j.runtime.internal.oci;

import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.util.HostCommand;
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
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What {@code sandbox4j setup} needs to take a tool from Debian trixie: to build one from a source
 * package ({@link FixedCrun}'s crun, {@link Criu}'s CRIU), the verified upstream tarball, build
 * dependencies from the host's own release, and build steps whose output goes to a log; to take a
 * binary as Debian built it ({@link Gvisor}'s runsc), the verified .deb and one file out of it.
 *
 * <p>Sources and .debs are fetched with {@code apt-get source} and {@code apt-get download} through
 * a sources list, package lists and cache of their own, so the host's apt configuration and state
 * are untouched. apt checks the index against the archive's signed Release file and each downloaded
 * file against the index; this class checks the upstream tarball's or the .deb's SHA-256 against
 * the index once more itself, so a partial download (some mirrors serve only the upstream tarball,
 * not the Debian packaging) is caught.
 */
final class DebianSource {
  /** The Debian release whose source packages setup builds and whose binary packages it takes. */
  static final String SUITE = "trixie";

  static final String ARCHIVE = "http://deb.debian.org/debian";

  private static final Path KEYRING = Path.of("/usr/share/keyrings/debian-archive-keyring.gpg");
  private static final Pattern SAFE_FILE_NAME = Pattern.compile("[0-9A-Za-z._+~-]+");

  private DebianSource() {}

  /** The upstream tarball of a Debian source package, verified. */
  record Source(String version, Path tarball) {
    /** The upstream version: without epoch and Debian revision ({@code 1:4.1.1-1} → 4.1.1). */
    String upstreamVersion() {
      return version.replaceFirst("^\\d+:", "").replaceFirst("-[^-]*$", "");
    }
  }

  /** A fresh build directory; {@code label} names the tool in messages. */
  static Path workDirectory(String label) {
    try {
      return Files.createTempDirectory("sandbox4j-" + label + "-");
    } catch (IOException e) {
      throw new WorkspaceException(
          label + ": cannot create a build directory: " + e.getMessage(), e);
    }
  }

  /**
   * Fetches the upstream tarball of source package {@code pkg} from Debian {@link #SUITE} into
   * {@code work/src}, checked against the signed index.
   *
   * @param acceptable whether the index's version is one to build
   * @param wanted what {@code acceptable} wants, for the error message (e.g. "1.9 or newer")
   */
  static Source fetch(
      String pkg,
      Path work,
      Predicate<String> acceptable,
      String wanted,
      Consumer<String> progress) {
    List<String> apt = aptOptions(pkg, work, Index.SOURCES);
    update(pkg, work, apt, Index.SOURCES, progress);
    HostCommand.Result index =
        HostCommand.run(concat(List.of("apt-cache"), concat(apt, List.of("showsrc", pkg))));
    if (!index.ok()) {
      throw new WorkspaceException(
          pkg + ": Debian " + SUITE + " has no " + pkg + " source package: " + index.output());
    }
    IndexEntry entry =
        IndexEntry.parse(pkg, index.stdout())
            .orElseThrow(
                () ->
                    new WorkspaceException(
                        pkg
                            + ": cannot read the version and upstream tarball of "
                            + pkg
                            + " in Debian "
                            + SUITE
                            + "'s source index"));
    String version = entry.version();
    if (!acceptable.test(version)) {
      throw new WorkspaceException(
          pkg + ": Debian " + SUITE + " has " + pkg + " " + version + ", not " + wanted);
    }

    progress.accept(
        pkg + ": downloading the source of " + pkg + " " + version + " (apt-get source)");
    Path src = work.resolve("src");
    try {
      Files.createDirectories(src);
    } catch (IOException e) {
      throw new WorkspaceException(pkg + ": cannot create " + src + ": " + e.getMessage(), e);
    }
    int exit =
        HostCommand.stream(
            concat(
                List.of("apt-get", "source", "--download-only", "-q"),
                concat(apt, List.of(pkg + "=" + version))),
            src,
            progress);
    Path tarball = src.resolve(entry.file());
    if (!Files.isRegularFile(tarball)) {
      throw new WorkspaceException(
          pkg
              + ": cannot fetch the source of "
              + pkg
              + " "
              + version
              + " from Debian "
              + SUITE
              + " ("
              + entry.file()
              + "; apt-get source exited "
              + exit
              + ", see above)");
    }
    requireIndexedSha256(pkg, tarball, entry.sha256());
    progress.accept(
        pkg
            + ": "
            + entry.file()
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
    /**
     * The first stanza of {@code apt-cache showsrc pkg} output, if it names an upstream tarball.
     */
    static Optional<IndexEntry> parse(String pkg, String showsrc) {
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
      Pattern orig =
          Pattern.compile(
              "^ ([0-9a-f]{64}) \\d+ ("
                  + Pattern.quote(pkg)
                  + "_[0-9A-Za-z.+~]+\\.orig\\.tar\\.(?:gz|xz|bz2))$",
              Pattern.MULTILINE);
      Matcher m = orig.matcher(String.join("\n", lines));
      if (!m.find() || !SAFE_FILE_NAME.matcher(m.group(2)).matches()) {
        return Optional.empty();
      }
      return Optional.of(new IndexEntry(version, m.group(2), m.group(1)));
    }
  }

  /** A binary package (.deb) of Debian {@link #SUITE}, downloaded and verified. */
  record Binary(String version, Path deb) {}

  /**
   * Downloads binary package {@code pkg} of Debian {@link #SUITE}, for this machine's architecture,
   * into {@code work/deb}, checked against the signed index: apt checks the index against the
   * archive's signed Release file and the .deb against the index, and this method checks the .deb's
   * SHA-256 against the index once more itself. Unpack it with {@link #extract}.
   */
  static Binary binary(String pkg, Path work, Consumer<String> progress) {
    List<String> apt = aptOptions(pkg, work, Index.PACKAGES);
    update(pkg, work, apt, Index.PACKAGES, progress);
    // --no-all-versions: only the candidate, the one `apt-get download pkg` would take
    HostCommand.Result index =
        HostCommand.run(
            concat(List.of("apt-cache"), concat(apt, List.of("show", "--no-all-versions", pkg))));
    if (!index.ok()) {
      throw new WorkspaceException(
          pkg
              + ": Debian "
              + SUITE
              + " has no "
              + pkg
              + " package for this machine's architecture: "
              + index.output());
    }
    PackageEntry entry =
        PackageEntry.parse(pkg, index.stdout())
            .orElseThrow(
                () ->
                    new WorkspaceException(
                        pkg
                            + ": cannot read the version, file and SHA-256 of "
                            + pkg
                            + " in Debian "
                            + SUITE
                            + "'s package index"));

    progress.accept(pkg + ": downloading " + pkg + " " + entry.version() + " (apt-get download)");
    Path debs = work.resolve("deb");
    try {
      Files.createDirectories(debs);
    } catch (IOException e) {
      throw new WorkspaceException(pkg + ": cannot create " + debs + ": " + e.getMessage(), e);
    }
    int exit =
        HostCommand.stream(
            concat(
                List.of("apt-get", "download", "-q"),
                concat(apt, List.of(pkg + "=" + entry.version()))),
            debs,
            progress);
    // apt names the file after the package, version and architecture (an epoch's colon escaped):
    // the only .deb in a directory of its own is the one
    List<Path> downloaded;
    try (var files = Files.list(debs)) {
      downloaded = files.filter(f -> f.getFileName().toString().endsWith(".deb")).toList();
    } catch (IOException e) {
      downloaded = List.of();
    }
    if (exit != 0 || downloaded.size() != 1) {
      throw new WorkspaceException(
          pkg
              + ": cannot download "
              + pkg
              + " "
              + entry.version()
              + " from "
              + ARCHIVE
              + " (apt-get download exited "
              + exit
              + ", see above)");
    }
    Path deb = downloaded.getFirst();
    requireIndexedSha256(pkg, deb, entry.sha256());
    progress.accept(
        pkg
            + ": "
            + deb.getFileName()
            + " matches the SHA-256 in Debian "
            + SUITE
            + "'s signed index");
    return new Binary(entry.version(), deb);
  }

  /** Fails unless {@code file}'s SHA-256 is {@code expected}, the one the signed index gives. */
  private static void requireIndexedSha256(String pkg, Path file, String expected) {
    String actual = sha256(file);
    if (!actual.equals(expected)) {
      throw new WorkspaceException(
          pkg
              + ": "
              + file.getFileName()
              + " does not match Debian's signed index (SHA-256 "
              + actual
              + ", expected "
              + expected
              + ")");
    }
  }

  /**
   * A binary package's version, file in the archive and SHA-256, as {@code apt-cache show} prints
   * them from the (signed) index.
   */
  record PackageEntry(String version, String filename, String sha256) {
    private static final Pattern SHA256 = Pattern.compile("[0-9a-f]{64}");

    /** The first stanza of {@code apt-cache show} output that is package {@code pkg}'s. */
    static Optional<PackageEntry> parse(String pkg, String show) {
      for (String stanza : show.split("\n\n")) {
        if (!field(stanza, "Package").equals(pkg)) {
          continue;
        }
        String version = field(stanza, "Version");
        String filename = field(stanza, "Filename");
        String sha256 = field(stanza, "SHA256");
        String base = filename.substring(filename.lastIndexOf('/') + 1);
        if (version.isEmpty()
            || !SHA256.matcher(sha256).matches()
            || !base.endsWith(".deb")
            || !SAFE_FILE_NAME.matcher(base).matches()) {
          return Optional.empty();
        }
        return Optional.of(new PackageEntry(version, filename, sha256));
      }
      return Optional.empty();
    }
  }

  /**
   * Unpacks {@code deb} into {@code work/unpacked} with {@code dpkg-deb -x} (no maintainer scripts
   * run, nothing is registered with dpkg) and returns its regular file {@code member}, a relative
   * path such as {@code usr/bin/runsc}.
   */
  static Path extract(String label, Path deb, String member, Path work) {
    Path relative = Path.of(member).normalize();
    if (relative.isAbsolute() || relative.startsWith("..") || relative.toString().isEmpty()) {
      throw new IllegalArgumentException("not a relative path inside a package: " + member);
    }
    Path into = work.resolve("unpacked");
    HostCommand.Result unpacked =
        HostCommand.run(List.of("dpkg-deb", "-x", deb.toString(), into.toString()));
    if (!unpacked.ok()) {
      throw new WorkspaceException(
          label + ": cannot unpack " + deb.getFileName() + ": " + unpacked.output());
    }
    Path file = into.resolve(relative);
    if (!Files.isRegularFile(file, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      throw new WorkspaceException(
          label
              + ": "
              + deb.getFileName()
              + " has no file /"
              + relative
              + " (`dpkg-deb -c` lists what it has)");
    }
    return file;
  }

  /** The index a private apt configuration fetches: source packages, or binary packages. */
  enum Index {
    SOURCES("deb-src", "source index", "_source_Sources"),
    PACKAGES("deb", "package index", "_Packages");

    /** The sources.list line type. */
    private final String type;

    /** What messages call it. */
    private final String noun;

    /** What the file name of such an index in apt's lists directory contains. */
    private final String listName;

    Index(String type, String noun, String listName) {
      this.type = type;
      this.noun = noun;
      this.listName = listName;
    }
  }

  /**
   * {@code apt-get update} of the private lists in {@code work}; fails naming the archive unless
   * the index arrived.
   */
  private static void update(
      String pkg, Path work, List<String> apt, Index index, Consumer<String> progress) {
    progress.accept(
        pkg
            + ": fetching Debian "
            + SUITE
            + "'s "
            + index.noun
            + " (apt-get update, private lists)");
    // --error-on=any: a failed download is otherwise only a warning, and apt-get exits 0
    int exit =
        HostCommand.stream(
            concat(List.of("apt-get", "update", "-q", "--error-on=any"), apt), work, progress);
    if (exit != 0 || !hasIndex(work, index)) {
      throw new WorkspaceException(
          pkg
              + ": cannot fetch Debian "
              + SUITE
              + "'s "
              + index.noun
              + " from "
              + ARCHIVE
              + " (apt-get update exited "
              + exit
              + (exit == 127 ? ": is this Debian, with apt?" : ", see above")
              + "); "
              + pkg
              + " comes from that archive");
    }
  }

  /** Whether apt-get update left an index of that kind in the private lists. */
  private static boolean hasIndex(Path work, Index index) {
    try (var files = Files.list(work.resolve("apt/lists"))) {
      return files.anyMatch(f -> f.getFileName().toString().contains(index.listName));
    } catch (IOException e) {
      return false;
    }
  }

  /**
   * apt options that use {@code work} for sources, lists and cache instead of the host's, with
   * {@code index}'s line for Debian {@link #SUITE} as the only source.
   */
  private static List<String> aptOptions(String label, Path work, Index index) {
    Path lists = work.resolve("apt/lists");
    Path cache = work.resolve("apt/cache");
    Path sources = work.resolve("apt/sources.list");
    String signedBy = Files.isRegularFile(KEYRING) ? " [signed-by=" + KEYRING + "]" : "";
    try {
      Files.createDirectories(lists.resolve("partial"));
      Files.createDirectories(cache.resolve("archives/partial"));
      Files.writeString(sources, index.type + signedBy + " " + ARCHIVE + " " + SUITE + " main\n");
    } catch (IOException e) {
      throw new WorkspaceException(label + ": cannot prepare " + work + ": " + e.getMessage(), e);
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
        // the host's pins are about its own release: one that pins trixie down would leave the
        // private index without a candidate version
        "-o",
        "Dir::Etc::Preferences=/dev/null",
        "-o",
        "Dir::Etc::PreferencesParts=/dev/null",
        // only the index itself: no translations, and no AppStream metadata (a desktop host's
        // apt.conf.d asks for it with every binary index)
        "-o",
        "Acquire::Languages=none",
        "-o",
        "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
        // the downloads land in a root-only temporary directory that apt's _apt user cannot
        // write to; apt still verifies every file against the signed index
        "-o",
        "APT::Sandbox::User=root");
  }

  /** Installs those of {@code packages} (from the host's own release) that are missing. */
  static void installBuildPackages(String label, List<String> packages, Consumer<String> progress) {
    List<String> missing = new ArrayList<>();
    for (String p : packages) {
      HostCommand.Result r = HostCommand.run(List.of("dpkg-query", "-W", "-f=${Status}", p));
      if (!r.stdout().equals("install ok installed")) {
        missing.add(p);
      }
    }
    if (missing.isEmpty()) {
      progress.accept(label + ": build dependencies are installed");
      return;
    }
    progress.accept(label + ": installing build dependencies: " + String.join(" ", missing));
    List<String> install = HostCommand.aptInstall(missing);
    if (HostCommand.stream(install, null, progress) == 0) {
      return;
    }
    progress.accept(label + ": updating the package lists and trying again");
    HostCommand.stream(List.of("apt-get", "update", "-q"), null, progress);
    int exit = HostCommand.stream(install, null, progress);
    if (exit != 0) {
      throw new WorkspaceException(
          label
              + ": cannot install the build dependencies "
              + String.join(" ", missing)
              + " (apt-get install exited "
              + exit
              + ", see above)");
    }
  }

  /** Unpacks the tarball into {@code work/src}; returns {@code work/src/<pkg>-<upstream>}. */
  static Path unpack(String pkg, Source source, Path work, Path log) {
    Path src = work.resolve("src");
    Path dir = src.resolve(pkg + "-" + source.upstreamVersion());
    logged(pkg, List.of("tar", "-xf", source.tarball().toString(), "-C", src.toString()), src, log);
    if (!Files.isDirectory(dir)) {
      throw new BuildFailed(pkg + ": the tarball has no " + dir.getFileName() + "/", log);
    }
    return dir;
  }

  /**
   * Copies {@code built} to {@code target} atomically, with mode {@code mode} (e.g. rwxr-xr-x): the
   * target is the old file or the whole new one, and a failed copy leaves no temporary file.
   */
  static void place(String label, Path built, Path target, String mode) {
    Path tmp = target.resolveSibling("." + target.getFileName() + ".new");
    try {
      Files.createDirectories(target.getParent());
      Files.copy(built, tmp, StandardCopyOption.REPLACE_EXISTING);
      Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString(mode));
      Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException e) {
      try {
        Files.deleteIfExists(tmp);
      } catch (IOException cleanup) {
        e.addSuppressed(cleanup);
      }
      throw new WorkspaceException(label + ": cannot install " + target + ": " + e.getMessage(), e);
    }
  }

  /** Runs a build step with its output appended to {@code log}; a failure carries the log. */
  static void logged(String label, List<String> argv, Path dir, Path log) {
    logged(label, argv, dir, log, Map.of());
  }

  /** {@link #logged(String, List, Path, Path)} with extra environment variables. */
  static void logged(String label, List<String> argv, Path dir, Path log, Map<String, String> env) {
    ProcessBuilder builder =
        new ProcessBuilder(argv)
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
    builder.environment().put("LC_ALL", "C.UTF-8");
    builder.environment().putAll(env);
    try {
      int exit = builder.start().waitFor();
      if (exit != 0) {
        throw new BuildFailed(label + ": " + String.join(" ", argv) + " exited " + exit, log);
      }
    } catch (IOException e) {
      throw new BuildFailed(label + ": cannot run " + argv.getFirst() + ": " + e.getMessage(), log);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted while building " + label);
    }
  }

  /** Deletes a build directory, saying so if it cannot. */
  static void delete(String label, Path work, Consumer<String> progress) {
    try {
      Trees.delete(work);
    } catch (IOException e) {
      progress.accept(label + ": could not delete " + work + ": " + e.getMessage());
    }
  }

  /**
   * Runs {@code build} in a fresh work directory for {@code label}, deleted afterwards; when a
   * build step failed ({@link BuildFailed}) it is kept for a look, and the error names it.
   */
  static void inWorkDirectory(String label, Consumer<String> progress, Consumer<Path> build) {
    Path work = workDirectory(label);
    boolean keep = false;
    try {
      build.accept(work);
    } catch (BuildFailed e) {
      keep = true;
      throw new WorkspaceException(e.getMessage() + " (the build directory " + work + " is kept)");
    } catch (BuildKept e) {
      keep = true;
      throw e;
    } finally {
      if (!keep) {
        delete(label, work, progress);
      }
    }
  }

  /**
   * A build that ran but whose result is wrong: its directory is kept, and the message names it.
   */
  static final class BuildKept extends WorkspaceException {
    private static final long serialVersionUID = 1L;

    BuildKept(String message) {
      super(message);
    }
  }

  /** A failed build step, with the end of the build log in its message. */
  static final class BuildFailed extends RuntimeException {
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

  static String sha256(Path file) {
    try (InputStream in = Files.newInputStream(file)) {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      byte[] buffer = new byte[1 << 16];
      int n;
      while ((n = in.read(buffer)) > 0) {
        digest.update(buffer, 0, n);
      }
      return HexFormat.of().formatHex(digest.digest());
    } catch (IOException | NoSuchAlgorithmException e) {
      throw new WorkspaceException("cannot read " + file + ": " + e.getMessage(), e);
    }
  }

  static List<String> concat(List<String> a, List<String> b) {
    List<String> out = new ArrayList<>(a);
    out.addAll(b);
    return out;
  }
}
