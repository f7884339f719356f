package dev.sandbox4j.runtime.internal.util;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/** Runs a host tool the engine needs (mount, crun, ...) and captures what it said. */
public final class HostCommand {
  private static final long TIMEOUT_SECONDS = 120;

  private HostCommand() {}

  /** The outcome of one host tool run. */
  public record Result(int exitCode, String stdout, String stderr) {
    public boolean ok() {
      return exitCode == 0;
    }

    /** stdout and stderr together, for messages. */
    public String output() {
      return (stdout + (stdout.isEmpty() || stderr.isEmpty() ? "" : "\n") + stderr).strip();
    }
  }

  /** Runs {@code argv} with stdin at EOF; stdout and stderr are kept apart. */
  public static Result run(List<String> argv) {
    ProcessBuilder builder = new ProcessBuilder(argv);
    builder.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
    try {
      Process p = builder.start();
      var stderr =
          java.util.concurrent.CompletableFuture.supplyAsync(
              () -> {
                try {
                  return p.getErrorStream().readAllBytes();
                } catch (IOException e) {
                  return new byte[0];
                }
              });
      byte[] out = p.getInputStream().readAllBytes();
      return new Result(
          awaitExit(p, argv),
          new String(out, StandardCharsets.UTF_8).strip(),
          new String(stderr.join(), StandardCharsets.UTF_8).strip());
    } catch (IOException e) {
      throw new WorkspaceException("cannot run " + argv.getFirst() + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted while running " + argv);
    }
  }

  /**
   * Runs {@code argv} with its output going to {@code log} instead of a pipe: for commands that
   * leave a daemon holding their stdout (a pipe would then never reach EOF). Fails with the log's
   * content unless it exits 0.
   */
  static void checkLogged(List<String> argv, java.nio.file.Path log) {
    try {
      PrivateFiles.createPrivateFile(log); // redirectOutput would make it 0644
    } catch (IOException e) {
      throw new WorkspaceException("cannot create " + log + ": " + e.getMessage(), e);
    }
    ProcessBuilder builder =
        new ProcessBuilder(argv)
            .redirectErrorStream(true)
            .redirectOutput(log.toFile())
            .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
    try {
      int exit = awaitExit(builder.start(), argv);
      if (exit != 0) {
        throw failed(argv, exit, java.nio.file.Files.readString(log).strip());
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot run " + argv.getFirst() + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted while running " + argv);
    }
  }

  /** Runs {@code argv} and fails with its output unless it exits 0. */
  public static String check(List<String> argv) {
    Result r = run(argv);
    if (!r.ok()) {
      throw failed(argv, r.exitCode(), r.output());
    }
    return r.output();
  }

  /**
   * Runs {@code argv} with {@code input} on its stdin and fails with its output unless it exits 0.
   */
  public static String checkWithInput(List<String> argv, String input) {
    try {
      Process p = new ProcessBuilder(argv).redirectErrorStream(true).start();
      try (var in = p.getOutputStream()) {
        in.write(input.getBytes(StandardCharsets.UTF_8));
      }
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
      int exit = awaitExit(p, argv);
      if (exit != 0) {
        throw failed(argv, exit, out);
      }
      return out;
    } catch (IOException e) {
      throw new WorkspaceException("cannot run " + argv.getFirst() + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted while running " + argv);
    }
  }

  /** Waits (bounded) for {@code p} to exit and returns its status; kills it past the bound. */
  private static int awaitExit(Process p, List<String> argv) throws InterruptedException {
    if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      throw new WorkspaceException(
          String.join(" ", argv) + " did not finish within " + TIMEOUT_SECONDS + " s");
    }
    return p.exitValue();
  }

  private static WorkspaceException failed(List<String> argv, int exit, String output) {
    return new WorkspaceException(
        String.join(" ", argv) + " failed (exit " + exit + "): " + output);
  }

  /** Whether {@code program} is an executable file on PATH. */
  public static boolean onPath(String program) {
    for (String d : System.getenv().getOrDefault("PATH", "/usr/sbin:/usr/bin").split(":")) {
      if (!d.isEmpty() && java.nio.file.Files.isExecutable(java.nio.file.Path.of(d, program))) {
        return true;
      }
    }
    return false;
  }

  /**
   * Runs {@code argv} in directory {@code dir} (null: this process's) with stdin at EOF and apt
   * non-interactive, each output line to {@code progress}; the exit code (127 if it cannot start).
   */
  public static int stream(List<String> argv, Path dir, Consumer<String> progress) {
    ProcessBuilder builder =
        new ProcessBuilder(argv)
            .directory(dir == null ? null : dir.toFile())
            .redirectErrorStream(true)
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
    builder.environment().put("DEBIAN_FRONTEND", "noninteractive");
    builder.environment().putIfAbsent("LC_ALL", "C.UTF-8");
    try {
      Process process = builder.start();
      try (BufferedReader out = process.inputReader(StandardCharsets.UTF_8)) {
        String line;
        while ((line = out.readLine()) != null) {
          progress.accept("  " + line);
        }
      }
      return process.waitFor();
    } catch (IOException e) {
      progress.accept("  cannot run " + argv.getFirst() + ": " + e.getMessage());
      return 127;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted while running " + argv);
    }
  }

  /** {@code apt-get install} of {@code packages}: quiet, no recommends, waiting for dpkg's lock. */
  public static List<String> aptInstall(List<String> packages) {
    List<String> argv =
        new ArrayList<>(
            List.of(
                "apt-get",
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "-o",
                "DPkg::Lock::Timeout=120"));
    argv.addAll(packages);
    return argv;
  }
}
