package dev.sandbox4j.runtime.internal.oci;

import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * gVisor's {@code runsc}, the OCI runtime that puts a kernel of its own (gVisor's Sentry) under a
 * sandbox, and {@code sandbox4j setup}'s step that installs it. Optional: crun stays the default
 * runtime, and without runsc only gVisor isolation is unavailable.
 *
 * <p>Setup installs Debian {@link DebianSource#SUITE}'s {@code runsc} binary package as Debian
 * built it (no build: it is one static Go binary, so it runs on an older release such as bookworm),
 * fetched and verified by {@link DebianSource#binary}, at {@link #BINARY}, off PATH next to setup's
 * crun. Nothing is registered with dpkg and no other file of the package is installed.
 */
public final class Gvisor {
  /** Where setup installs runsc: next to setup's crun, off PATH. */
  static final Path BINARY = OciRuntime.FIXED_CRUN.resolveSibling("runsc");

  /** The Debian binary package, and its file that is the runtime. */
  static final String PACKAGE = "runsc";

  static final String FILE_IN_PACKAGE = "usr/bin/runsc";

  private static final String CHECK_NAME = "gVisor (runsc)";

  private static final String HOW_TO_INSTALL =
      "`sudo sandbox4j setup` installs Debian "
          + DebianSource.SUITE
          + "'s runsc into "
          + BINARY
          + " (about 20 MB from deb.debian.org, a few seconds)";

  /**
   * The {@code --version} line of each runsc binary that answered, by {@link #identity}: the engine
   * asks {@link #unavailable} per gVisor sandbox, and a replaced binary (setup places a new file
   * and renames it over the old one) has a new identity, so is asked again.
   */
  private static final Map<String, String> VERSIONS = new ConcurrentHashMap<>();

  private Gvisor() {}

  /**
   * The runsc the engine runs: setup's {@link #BINARY} if installed, else {@code runsc} on PATH.
   */
  public static Optional<Path> find() {
    return find(BINARY);
  }

  /** {@code preferred} if it is an executable file, else {@code runsc} on PATH. */
  static Optional<Path> find(Path preferred) {
    if (Files.isRegularFile(preferred) && Files.isExecutable(preferred)) {
      return Optional.of(preferred);
    }
    return OciRuntime.find("runsc").filter(Files::isRegularFile);
  }

  /**
   * Why gVisor isolation cannot be used on this host, in one line that names the fix; empty when a
   * runsc is found and answers {@code runsc --version}. Asks a binary once per JVM.
   */
  public static Optional<String> unavailable() {
    return unavailable(find());
  }

  /** {@link #unavailable()} with {@code runsc} as the runsc found, if any. */
  static Optional<String> unavailable(Optional<Path> runsc) {
    if (runsc.isEmpty()) {
      return Optional.of(
          "gVisor isolation needs gVisor's runsc, which is not installed: " + HOW_TO_INSTALL);
    }
    if (isVersionLine(version(runsc.get()))) {
      return Optional.empty();
    }
    return Optional.of(
        "gVisor isolation needs gVisor's runsc, and "
            + runsc.get()
            + " does not answer `runsc --version` ("
            + said(runsc.get())
            + "): "
            + HOW_TO_INSTALL);
  }

  /**
   * The doctor check: which runsc gVisor isolation runs, and its version. Informational (always ok,
   * as the {@link HostCheck} contract has it): without runsc sandboxes run under crun, the default,
   * and only gVisor isolation is unavailable; the detail says so and how to install it.
   */
  public static HostCheck check() {
    return check(find());
  }

  /** {@link #check()} with {@code runsc} as the runsc found, if any. */
  static HostCheck check(Optional<Path> runsc) {
    if (runsc.isEmpty()) {
      return HostCheck.ok(
          CHECK_NAME,
          "not installed: gVisor isolation (a kernel of its own under each sandbox) is"
              + " unavailable, sandboxes run under crun (the default); "
              + HOW_TO_INSTALL);
    }
    String version = version(runsc.get());
    if (!isVersionLine(version)) {
      return HostCheck.ok(
          CHECK_NAME,
          runsc.get()
              + " does not answer `runsc --version` ("
              + said(runsc.get())
              + "): gVisor isolation is unavailable, sandboxes run under crun (the default); "
              + HOW_TO_INSTALL);
    }
    return HostCheck.ok(
        CHECK_NAME,
        runsc.get()
            + " ("
            + version
            + ")"
            + (runsc.get().equals(BINARY)
                ? ", where sandbox4j setup installs Debian " + DebianSource.SUITE + "'s runsc"
                : "")
            + "; sandboxes with gVisor isolation run under it");
  }

  /**
   * Installs Debian {@link DebianSource#SUITE}'s runsc at {@link #BINARY} unless a runsc is found
   * ({@link #find}) and answers {@code runsc --version}. Idempotent: then it changes nothing.
   *
   * @throws WorkspaceException saying which step failed and why (the archive cannot be reached, apt
   *     fails, the package is missing or does not verify, the binary is not static or does not
   *     run); {@link #BINARY} is then as it was
   */
  public static void install(Consumer<String> progress) {
    install(BINARY, progress);
  }

  /** {@link #install(Consumer)} at {@code target} instead of {@link #BINARY}. */
  static void install(Path target, Consumer<String> progress) {
    Optional<Path> found = find(target);
    if (found.isPresent()) {
      String version = version(found.get());
      if (isVersionLine(version)) {
        progress.accept(
            "runsc: " + found.get() + " (" + version + ") is installed; nothing to install");
        return;
      }
      progress.accept(
          "runsc: "
              + found.get()
              + " does not answer `runsc --version` ("
              + said(found.get())
              + ")");
    }
    progress.accept(
        "runsc: installing gVisor's runsc (for gVisor isolation) from Debian "
            + DebianSource.SUITE
            + "'s "
            + PACKAGE
            + " package into "
            + target);
    long start = System.nanoTime();
    DebianSource.inWorkDirectory(
        "runsc",
        progress,
        work -> {
          Path runsc = fetch(work, progress);
          DebianSource.place("runsc", runsc, target, "rwxr-xr-x");
          progress.accept(
              "runsc: installed "
                  + version(target)
                  + " at "
                  + target
                  + " in "
                  + (System.nanoTime() - start) / 1_000_000
                  + " ms");
        });
  }

  /**
   * Downloads and verifies Debian's runsc package into {@code work}, unpacks its binary and checks
   * that it can run here: a static ELF (trixie's libraries are not on an older host) that answers
   * {@code runsc --version}. Returns the binary, inside {@code work}.
   */
  static Path fetch(Path work, Consumer<String> progress) {
    DebianSource.Binary pkg = DebianSource.binary(PACKAGE, work, progress);
    Path runsc = DebianSource.extract(PACKAGE, pkg.deb(), FILE_IN_PACKAGE, work);
    String from = "/" + FILE_IN_PACKAGE + " of " + pkg.deb().getFileName();
    if (!OciConfig.isStaticElf(runsc)) {
      throw new WorkspaceException(
          "runsc: "
              + from
              + " is not a static 64-bit ELF executable: it would need Debian "
              + DebianSource.SUITE
              + "'s libraries, which this host may not have; not installed");
    }
    String version = OciRuntime.versionLine(runsc);
    if (!isVersionLine(version)) {
      throw new WorkspaceException(
          "runsc: "
              + from
              + " does not answer `runsc --version` on this host ("
              + said(runsc)
              + "); not installed");
    }
    progress.accept("runsc: " + from + " is a static executable and answers: " + version);
    return runsc;
  }

  /** Whether a {@code --version} line is runsc's, e.g. {@code runsc version 0.0~20240729.0}. */
  static boolean isVersionLine(String line) {
    return line.startsWith("runsc version ") && line.length() > "runsc version ".length();
  }

  /** The first line of {@code runsc --version}, or empty; kept once it answered (see VERSIONS). */
  static String version(Path runsc) {
    Optional<String> identity = identity(runsc);
    String known = identity.map(VERSIONS::get).orElse(null);
    if (known != null) {
      return known;
    }
    String version = OciRuntime.versionLine(runsc);
    if (isVersionLine(version) && identity.isPresent()) {
      VERSIONS.put(identity.get(), version);
    }
    return version;
  }

  /** A file's path, inode, size and modification time: another file is another identity. */
  private static Optional<String> identity(Path file) {
    try {
      BasicFileAttributes attributes = Files.readAttributes(file, BasicFileAttributes.class);
      return Optional.of(
          file.toAbsolutePath()
              + "|"
              + attributes.fileKey()
              + "|"
              + attributes.size()
              + "|"
              + attributes.lastModifiedTime().toMillis());
    } catch (IOException e) {
      return Optional.empty();
    }
  }

  /** What {@code runsc --version} said, in one line, for an error message. */
  private static String said(Path runsc) {
    try {
      HostCommand.Result r = HostCommand.run(List.of(runsc.toString(), "--version"));
      List<String> lines = r.output().lines().toList();
      return "exit " + r.exitCode() + (lines.isEmpty() ? ", no output" : ": " + lines.getLast());
    } catch (RuntimeException e) {
      return e.getMessage();
    }
  }
}
