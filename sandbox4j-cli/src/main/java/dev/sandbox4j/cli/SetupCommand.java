package dev.sandbox4j.cli;

import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.runtime.HostSetup;
import java.io.PrintStream;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code sandbox4j setup}: prepares this machine for local sandboxes. */
@Command(
    name = "setup",
    mixinStandardHelpOptions = true,
    description = {
      "Prepares this machine for local sandboxes, as root: installs crun, mmdebstrap and"
          + " catatonit with apt-get if missing; builds CRIU (checkpoint/restore, for live fork"
          + " and hibernate) and, if that crun is older than 1.9 (unsafe when a sandbox is at its"
          + " process limit) or lacks CRIU, crun from Debian trixie's source packages into"
          + " /usr/local/libexec/sandbox4j/ (about a minute each, needs deb.debian.org);"
          + " installs gVisor's runsc there from Debian trixie's binary package unless a runsc"
          + " is found (for gVisor isolation; a few seconds);"
          + " mounts what the kernel needs (on a hybrid cgroup v1 host, the hugetlb controller"
          + " crun 1.8 insists on) and creates the state directory."
          + " Each step goes to stderr as it happens; then the checks of 'sandbox4j doctor'.",
      "Idempotent: on a prepared machine it changes nothing. Mounts do not survive a reboot: run"
          + " it again after one. Exits 0 when everything needed is there, 70 otherwise."
    })
final class SetupCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;

  @Option(
      names = "--json",
      description =
          "Print the checks as 'doctor --json' does (a JSON array of {\"name\",\"ok\",\"detail\","
              + "\"fix\"}); the steps still go to stderr.")
  boolean json;

  @Override
  public Integer call() {
    PrintStream err = root.context().err();
    List<HostCheck> checks =
        HostSetup.setup(
            root.context().home(),
            line -> {
              err.println("setup: " + line);
              err.flush();
            });
    if (json) {
      root.context().out().println(Json.write(checks));
    } else {
      DoctorCommand.print(root.context().out(), checks);
    }
    return DoctorCommand.verdict(root, checks, "setup could not fix them; see the fixes above");
  }
}
