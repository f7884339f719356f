package dev.sandbox4j.runtime.internal.oci;

import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.function.Consumer;

/**
 * Builds and installs the engine's two small static C programs from their source in {@code
 * src/main/c}: {@code gcc -static -O2} on this host, into {@code /usr/local/libexec/sandbox4j/},
 * each with the SHA-256 of the source it was built from beside it, so that setup rebuilds one when
 * its source changes. Static: the exec helper runs in any image, whatever its libc.
 *
 * <ul>
 *   <li>{@link #EXEC_HELPER}, {@code sandbox4j-execd}: forks commands inside each sandbox (see the
 *       engine's {@code ExecHelper}, and {@code GvisorHelper} for gVisor sandboxes, where it runs
 *       as {@code sandbox4j-execd --framed}).
 *   <li>{@link #REAPER}, {@code sandbox4j-reaper}: the parent of a gVisor sandbox's Sentry and
 *       gofer, reaping them the moment they die ({@link OciRuntime#run}).
 * </ul>
 */
public final class HelperBuilds {
  /**
   * One program: its file name (source {@code NAME.c}), its name in doctor's report, where it is
   * installed, its job, and what a host without it loses.
   */
  public record Helper(String name, String title, Path installed, String job, String without) {
    Path stamp() {
      return installed.resolveSibling(name + ".source-sha256");
    }

    /** Installed, executable and static. */
    public boolean present() {
      return Files.isRegularFile(installed)
          && Files.isExecutable(installed)
          && OciConfig.isStaticElf(installed);
    }

    private boolean current() {
      try {
        return Files.readString(stamp()).strip().equals(sha256(source(name)));
      } catch (IOException e) {
        return false;
      }
    }

    /** doctor's line: installed and built from this version's source. */
    public HostCheck check() {
      String what = title;
      if (!present()) {
        return HostCheck.missing(
            what,
            installed + " is missing: " + without,
            "sandbox4j setup (builds it with gcc -static)");
      }
      if (!current()) {
        return HostCheck.missing(
            what,
            installed + " was built from another version's source",
            "sandbox4j setup (rebuilds it)");
      }
      return HostCheck.ok(what, installed + " (" + job + ")");
    }
  }

  public static final Helper EXEC_HELPER =
      new Helper(
          "sandbox4j-execd",
          "exec helper",
          OciConfig.HOST_EXEC_HELPER,
          "forks commands inside each sandbox",
          "every command runs through a crun exec (about 10 ms instead of 1-2) or runsc exec of its own");

  public static final Helper REAPER =
      new Helper(
          "sandbox4j-reaper",
          "gVisor reaper",
          OciConfig.HOST_EXEC_HELPER.resolveSibling("sandbox4j-reaper"),
          "reaps a gVisor sandbox's Sentry the moment it dies",
          "destroying a gVisor sandbox waits until the host's init reaps its Sentry");

  private static final List<Helper> ALL = List.of(EXEC_HELPER, REAPER);

  private HelperBuilds() {}

  /** doctor's lines, one per program. */
  public static List<HostCheck> checks() {
    return ALL.stream().map(Helper::check).toList();
  }

  /** Builds and installs each program unless the installed one is current. */
  public static void install(Consumer<String> progress) {
    for (Helper helper : ALL) {
      if (!helper.present() || !helper.current()) {
        install(helper, progress);
      }
    }
  }

  private static void install(Helper helper, Consumer<String> progress) {
    String name = helper.name();
    try {
      byte[] source = source(name);
      if (!HostCommand.onPath("gcc")) {
        progress.accept("installing gcc and libc6-dev (" + name + " is built from source)");
        HostCommand.stream(HostCommand.aptInstall(List.of("gcc", "libc6-dev")), null, progress);
      }
      Path dir = Files.createTempDirectory(name);
      try {
        Path c = dir.resolve(name + ".c");
        Files.write(c, source);
        Path out = dir.resolve(name);
        progress.accept(name + ": gcc -static -O2 " + name + ".c");
        int exit =
            HostCommand.stream(
                List.of("gcc", "-static", "-O2", "-Wall", "-o", out.toString(), c.toString()),
                dir,
                progress);
        if (exit != 0 || !OciConfig.isStaticElf(out)) {
          throw new WorkspaceException("building " + name + " failed (gcc exited " + exit + ")");
        }
        Files.createDirectories(helper.installed().getParent());
        Path staged = helper.installed().resolveSibling("." + name + ".new");
        Files.copy(out, staged, StandardCopyOption.REPLACE_EXISTING);
        Files.setPosixFilePermissions(staged, PosixFilePermissions.fromString("rwxr-xr-x"));
        // a rename: sandboxes that bind-mounted the old file keep it (a mount pins the inode)
        Files.move(staged, helper.installed(), StandardCopyOption.ATOMIC_MOVE);
        Files.writeString(helper.stamp(), sha256(source) + "\n");
        progress.accept(name + ": installed " + helper.installed());
      } finally {
        dev.sandbox4j.runtime.internal.linux.Trees.delete(dir);
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot install " + name + ": " + e, e);
    }
  }

  private static byte[] source(String name) throws IOException {
    String resource = "/dev/sandbox4j/runtime/c/" + name + ".c";
    try (InputStream in = HelperBuilds.class.getResourceAsStream(resource)) {
      if (in == null) {
        throw new IOException("the source " + resource + " is not in this build");
      }
      return in.readAllBytes();
    }
  }

  private static String sha256(byte[] data) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
