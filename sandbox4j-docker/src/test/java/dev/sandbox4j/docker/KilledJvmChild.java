package dev.sandbox4j.docker;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;

/**
 * The JVM {@link DockerSandboxTest} kills: creates a docker sandbox labelled with {@code args[0]},
 * writes a file, prints the ref, then runs a long command until it is killed.
 */
final class KilledJvmChild {
  private KilledJvmChild() {}

  public static void main(String[] args) {
    DockerSandbox sandboxes = DockerSandbox.builder().label("sandbox4j.test", args[0]).build();
    Workspace ws = Workspace.of(sandboxes.newBackend());
    ws.writeText("/home/sandbox/before-the-kill", "written");
    System.out.println(ws.open());
    System.out.flush();
    ws.run(
        Command.shell("echo running > /tmp/long; exec sleep 6017"),
        RunOptions.builder().noTimeout().build());
  }
}
