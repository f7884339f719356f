package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.runtime.HostSetup;
import java.io.PrintStream;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code sandbox4j doctor}: checks what local sandboxes need from this machine. */
@Command(
    name = "doctor",
    mixinStandardHelpOptions = true,
    description = {
      "Checks every host prerequisite of local sandboxes and prints each as 'ok' or 'MISSING',"
          + " with what was found and, when missing, the exact fix. Changes nothing.",
      "Exits 0 when everything needed is there, 70 otherwise; 'sandbox4j setup' makes the fixes."
    })
final class DoctorCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;

  @Option(
      names = "--json",
      description = "Print a JSON array of {\"name\",\"ok\",\"detail\",\"fix\"} objects instead.")
  boolean json;

  @Option(
      names = "--docker",
      description =
          "Check what docker sandboxes need instead: a Docker daemon found (DOCKER_HOST, the"
              + " docker context, the usual sockets), that it answers, and the default image.")
  boolean docker;

  @Override
  public Integer call() {
    List<HostCheck> checks =
        docker
            ? dev.sandbox4j.docker.DockerSandbox.checks()
            : HostSetup.check(root.context().home());
    if (json) {
      root.context().out().println(Json.write(checks));
    } else {
      print(root.context().out(), checks);
    }
    return verdict(
        root,
        checks,
        docker ? "see each fix above" : "run 'sandbox4j setup' (as root) to fix what it can");
  }

  /** {@code ok name: detail}, or {@code MISSING name: detail} and a fix line. */
  static void print(PrintStream out, List<HostCheck> checks) {
    for (HostCheck check : checks) {
      out.printf("%-8s %s: %s%n", check.ok() ? "ok" : "MISSING", check.name(), check.detail());
      if (!check.ok()) {
        out.printf("%-8s fix: %s%n", "", check.fix());
      }
    }
    out.flush();
  }

  /** 0 if every check is ok; otherwise a line naming what is missing on stderr, and 70. */
  static int verdict(SandboxCommand root, List<HostCheck> checks, String advice) {
    List<String> missing = checks.stream().filter(c -> !c.ok()).map(HostCheck::name).toList();
    if (missing.isEmpty()) {
      return ExitCodes.OK;
    }
    root.context()
        .err()
        .println("sandbox4j: missing: " + String.join(", ", missing) + "; " + advice);
    return ExitCodes.FAILURE;
  }
}
