package dev.sandbox4j.runtime.internal.image;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/** Builds the default root filesystem from Debian's archive with {@code mmdebstrap}. */
final class MmdebstrapBuilder implements RootfsBuilder {
  static final String SUITE = "bookworm";

  /** Added to minbase: what an agent expects on a machine, plus catatonit as PID 1. */
  static final List<String> PACKAGES =
      List.of(
          "git",
          "python3",
          "nodejs",
          "ripgrep",
          "sudo",
          "ca-certificates",
          "procps",
          "iproute2",
          "curl",
          "catatonit",
          "util-linux",
          "coreutils",
          "findutils");

  static final String DESCRIPTION =
      "Debian "
          + SUITE
          + " minbase with "
          + String.join(", ", PACKAGES)
          + "; user sandbox (1000) with passwordless sudo";

  static final String MIRROR_ENV = "SANDBOX4J_DEBIAN_MIRROR";

  static final String NOT_INSTALLED =
      "mmdebstrap is not installed: run `sandbox4j setup` or `apt-get install mmdebstrap`";

  private static final int TAIL_LINES = 20;

  /**
   * Each hook runs as {@code sh -c HOOK exec ROOTFS}, after all packages are installed; separate
   * hooks so that mmdebstrap's log names the step that failed.
   */
  private static final List<String> CUSTOMIZE_HOOKS =
      List.of(
          "chroot \"$1\" groupadd --gid 1000 sandbox",
          "chroot \"$1\" useradd --uid 1000 --gid 1000 --home-dir /home/sandbox --create-home"
              + " --shell /bin/bash sandbox",
          // useradd skips --create-home if the directory exists; make sure of both either way.
          "mkdir -p \"$1/home/sandbox\" && chown 1000:1000 \"$1/home/sandbox\"",
          "printf '%s\\n' 'sandbox ALL=(ALL) NOPASSWD:ALL' > \"$1/etc/sudoers.d/sandbox\""
              + " && chmod 0440 \"$1/etc/sudoers.d/sandbox\"",
          // A broken sudoers file would break sudo for everyone: fail the build instead.
          "chroot \"$1\" visudo -c -f /etc/sudoers.d/sandbox");

  private final String executable;
  private final Optional<String> mirror;

  /**
   * @param executable the program to run: a name looked up on PATH, or a path
   * @param mirror an extra mmdebstrap MIRROR argument; empty for mmdebstrap's default
   */
  MmdebstrapBuilder(String executable, Optional<String> mirror) {
    this.executable = executable;
    this.mirror = mirror;
  }

  /** The real builder: {@code mmdebstrap} from PATH, mirror from {@value #MIRROR_ENV}. */
  static MmdebstrapBuilder fromEnvironment() {
    return new MmdebstrapBuilder(
        "mmdebstrap",
        Optional.ofNullable(System.getenv(MIRROR_ENV))
            .map(String::strip)
            .filter(m -> !m.isEmpty()));
  }

  /** The full command line that builds into {@code target}. */
  List<String> command(Path program, Path target) {
    List<String> argv = new ArrayList<>();
    argv.add(program.toString());
    argv.add("--variant=minbase");
    // Explicit: "auto" would pick tar for a target whose name ends in .tar, for instance.
    argv.add("--format=directory");
    argv.add("--include=" + String.join(",", PACKAGES));
    for (String hook : CUSTOMIZE_HOOKS) {
      argv.add("--customize-hook=" + hook);
    }
    argv.add(SUITE);
    argv.add(target.toString());
    mirror.ifPresent(argv::add);
    return argv;
  }

  @Override
  public void build(Path target, Consumer<String> progress) throws IOException {
    Path program = locate().orElseThrow(() -> new ImageBuildException(NOT_INSTALLED));
    ProcessBuilder builder =
        new ProcessBuilder(command(program, target))
            .redirectErrorStream(true)
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
    Process process = builder.start();
    Deque<String> tail = new ArrayDeque<>();
    try (BufferedReader output = process.inputReader(StandardCharsets.UTF_8)) {
      String line;
      while ((line = output.readLine()) != null) {
        progress.accept(line);
        tail.addLast(line);
        if (tail.size() > TAIL_LINES) {
          tail.removeFirst();
        }
      }
      int exit = process.waitFor();
      if (exit != 0) {
        throw new ImageBuildException(
            "mmdebstrap failed (exit " + exit + "); its last output:\n" + String.join("\n", tail));
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ImageBuildException("interrupted while building an image with mmdebstrap", e);
    } finally {
      stop(process);
    }
  }

  /**
   * Ends an mmdebstrap we gave up on (progress consumer threw, interrupt): SIGTERM first, so that
   * it unmounts the /proc and /dev it mounted inside the target before the store deletes it.
   */
  private static void stop(Process process) {
    if (!process.isAlive()) {
      return;
    }
    process.destroy();
    try {
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly();
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }

  private Optional<Path> locate() {
    if (executable.contains("/")) {
      Path path = Path.of(executable);
      return Files.isExecutable(path) ? Optional.of(path) : Optional.empty();
    }
    String path = Optional.ofNullable(System.getenv("PATH")).orElse("/usr/bin:/bin");
    for (String dir : path.split(File.pathSeparator)) {
      if (dir.isEmpty()) {
        continue;
      }
      Path candidate = Path.of(dir, executable);
      if (Files.isRegularFile(candidate) && Files.isExecutable(candidate)) {
        return Optional.of(candidate);
      }
    }
    return Optional.empty();
  }
}
