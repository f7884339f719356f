package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * What every operation of {@link LocalSandbox} checks first: that a ref is the local engine's, that
 * an image or snapshot name is one the store can hold, and that this host can run sandboxes.
 */
final class LocalRefs {
  private static final Pattern IMAGE_NAME = Pattern.compile("[a-z0-9][a-z0-9._-]{0,62}");

  private LocalRefs() {}

  /** The sandbox id of a ref of the local engine. */
  static String localId(WorkspaceRef ref) {
    Objects.requireNonNull(ref, "ref");
    if (!ref.provider().equals(LocalSandbox.NAME)) {
      throw new IllegalArgumentException(
          ref + " belongs to provider '" + ref.provider() + "', not local");
    }
    SandboxHome.checkId(ref.id());
    return ref.id();
  }

  static boolean isImageName(String name) {
    return IMAGE_NAME.matcher(name).matches() && !name.equals("layers");
  }

  static void checkImageName(String name, String what) {
    if (name == null || !IMAGE_NAME.matcher(name).matches() || name.equals("layers")) {
      throw new IllegalArgumentException(
          "invalid "
              + what
              + " '"
              + name
              + "': 1 to 63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit");
    }
  }

  static void requireLinuxAndRoot() {
    if (!System.getProperty("os.name").equals("Linux")) {
      throw new WorkspaceException(
          "local sandboxes need Linux (this is " + System.getProperty("os.name") + ")");
    }
    if (!"root".equals(System.getProperty("user.name"))
        && !Files.isWritable(Path.of("/sys/fs/cgroup"))) {
      throw new WorkspaceException(
          "local sandboxes need root (mounts, cgroups, user namespaces): run as root");
    }
  }
}
