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
 * Builds and installs the exec helper ({@code sandbox4j-execd}, the C program in {@code
 * src/main/c}): {@code gcc -static -O2} on this host, into {@link OciConfig#HOST_EXEC_HELPER}, with
 * the SHA-256 of the source it was built from beside it, so that setup rebuilds it when the source
 * changes. Static: it runs in any image, whatever its libc.
 */
public final class ExecHelperBuild {
  private static final String SOURCE = "/dev/sandbox4j/runtime/c/sandbox4j-execd.c";
  private static final Path STAMP =
      OciConfig.HOST_EXEC_HELPER.resolveSibling("sandbox4j-execd.source-sha256");

  private ExecHelperBuild() {}

  /** doctor's line: the helper is installed and built from this version's source. */
  public static HostCheck check() {
    if (!OciConfig.hasExecHelper()) {
      return HostCheck.missing(
          "exec helper",
          OciConfig.HOST_EXEC_HELPER
              + " is missing: every command runs through a crun exec of its own (about 10 ms"
              + " instead of 1-2)",
          "sandbox4j setup (builds it with gcc -static)");
    }
    if (!current()) {
      return HostCheck.missing(
          "exec helper",
          OciConfig.HOST_EXEC_HELPER + " was built from another version's source",
          "sandbox4j setup (rebuilds it)");
    }
    return HostCheck.ok(
        "exec helper", OciConfig.HOST_EXEC_HELPER + " (forks commands inside each sandbox)");
  }

  private static boolean current() {
    try {
      return Files.readString(STAMP).strip().equals(sha256(source()));
    } catch (IOException e) {
      return false;
    }
  }

  /** Builds and installs the helper unless the installed one is current. */
  public static void install(Consumer<String> progress) {
    if (OciConfig.hasExecHelper() && current()) {
      return;
    }
    try {
      byte[] source = source();
      if (!HostCommand.onPath("gcc")) {
        progress.accept("installing gcc and libc6-dev (the exec helper is built from source)");
        HostCommand.stream(HostCommand.aptInstall(List.of("gcc", "libc6-dev")), null, progress);
      }
      Path dir = Files.createTempDirectory("sandbox4j-execd");
      try {
        Path c = dir.resolve("sandbox4j-execd.c");
        Files.write(c, source);
        Path out = dir.resolve("sandbox4j-execd");
        progress.accept("exec helper: gcc -static -O2 sandbox4j-execd.c");
        int exit =
            HostCommand.stream(
                List.of("gcc", "-static", "-O2", "-Wall", "-o", out.toString(), c.toString()),
                dir,
                progress);
        if (exit != 0 || !OciConfig.isStaticElf(out)) {
          throw new WorkspaceException("building the exec helper failed (gcc exited " + exit + ")");
        }
        Files.createDirectories(OciConfig.HOST_EXEC_HELPER.getParent());
        Path staged = OciConfig.HOST_EXEC_HELPER.resolveSibling(".sandbox4j-execd.new");
        Files.copy(out, staged, StandardCopyOption.REPLACE_EXISTING);
        Files.setPosixFilePermissions(staged, PosixFilePermissions.fromString("rwxr-xr-x"));
        // a rename: sandboxes that bind-mounted the old file keep it (a mount pins the inode)
        Files.move(staged, OciConfig.HOST_EXEC_HELPER, StandardCopyOption.ATOMIC_MOVE);
        Files.writeString(STAMP, sha256(source) + "\n");
        progress.accept("exec helper: installed " + OciConfig.HOST_EXEC_HELPER);
      } finally {
        dev.sandbox4j.runtime.internal.linux.Trees.delete(dir);
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot install the exec helper: " + e, e);
    }
  }

  private static byte[] source() throws IOException {
    try (InputStream in = ExecHelperBuild.class.getResourceAsStream(SOURCE)) {
      if (in == null) {
        throw new IOException("the helper's source " + SOURCE + " is not in this build");
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
