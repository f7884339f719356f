package dev.sandbox4j.agent;

import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;

/** What the agent's tests on real local sandboxes need of the host. */
public final class LocalEngine {
  private LocalEngine() {}

  /** Root on Linux with a crun; skips without, except under {@code CI=true}, where it fails. */
  public static void require() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Stream<Path> onPath =
        Stream.of(System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":"))
            .filter(dir -> !dir.isEmpty())
            .map(dir -> Path.of(dir, "crun"));
    boolean crun =
        Stream.concat(Stream.of(Path.of("/usr/local/libexec/sandbox4j/crun")), onPath)
            .anyMatch(Files::isExecutable);
    Prerequisites.require(crun, "crun (sandbox4j setup)");
  }
}
