package dev.sandbox4j.bench;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Stream;

/**
 * A provider under measurement: the provider, the first command a new workspace runs, and what the
 * report says about it. Closing destroys every workspace of this run that is still there.
 */
interface Target extends AutoCloseable {

  /** The provider the scenarios drive. */
  WorkspaceProvider provider();

  /** What {@code create_first_command} runs in a new workspace. */
  Command firstCommand();

  /**
   * Whether each workspace is a sandbox with a memory cgroup of its own, so that {@code
   * idle_memory_per_sandbox} can measure it.
   */
  boolean sandboxed();

  /**
   * Scenarios only this provider has, run after the common ones (the local engine's lifecycle, the
   * server's overhead over the engine); closing them cleans up what they made.
   */
  default java.util.Optional<ExtraScenarios> extraScenarios() {
    return java.util.Optional.empty();
  }

  /** A provider's own scenarios and what they need set up. */
  interface ExtraScenarios extends AutoCloseable {
    java.util.List<WorkspaceBench.Scenario> scenarios(int iterations, int warmup);
  }

  /** The provider's settings, for the report's {@code provider_details}. */
  Map<String, Object> details();

  /**
   * Destroys what this run left (after a failure, or on Ctrl-C from the shutdown hook, while other
   * threads may still be creating). Safe to call more than once and concurrently.
   */
  @Override
  void close();

  /** Host directories under {@code scratch}: deleting {@code scratch} removes every workspace. */
  static Target host(Path scratch) {
    WorkspaceProvider provider = HostWorkspaceProvider.create(scratch);
    Command first = nodeOnPath() ? Command.argv("node", "-v") : Command.argv("true");
    return new Target() {
      @Override
      public WorkspaceProvider provider() {
        return provider;
      }

      @Override
      public Command firstCommand() {
        return first;
      }

      @Override
      public boolean sandboxed() {
        return false;
      }

      @Override
      public Map<String, Object> details() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("root", scratch.toString());
        return m;
      }

      @Override
      public void close() {
        // the bench deletes scratch
      }
    };
  }

  /** Whether {@code node} is on the host's PATH. */
  static boolean nodeOnPath() {
    String path = System.getenv().getOrDefault("PATH", "");
    return Stream.of(path.split(File.pathSeparator))
        .filter(dir -> !dir.isEmpty())
        .map(dir -> Path.of(dir, "node"))
        .anyMatch(p -> Files.isRegularFile(p) && Files.isExecutable(p));
  }
}
