package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.BiFunction;

/**
 * The one place that knows which workspace providers the CLI offers, where each keeps its state
 * under the sandbox4j home, and which of them isolate. A new engine is one more entry here.
 */
final class Providers {

  /** The provider of {@code --provider}'s default. */
  static final String DEFAULT = HostWorkspaceProvider.NAME;

  /** One provider the CLI offers. */
  private record Entry(
      String name,
      boolean isolates,
      boolean keepsEnv,
      BiFunction<Path, Map<String, String>, WorkspaceProvider> factory) {}

  private static final List<Entry> ENTRIES =
      List.of(
          new Entry(
              HostWorkspaceProvider.NAME,
              false,
              false,
              (home, env) ->
                  HostWorkspaceProvider.builder()
                      .root(home.resolve(HostWorkspaceProvider.NAME))
                      .env(env)
                      .build()));

  private final Path home;

  Providers(Path home) {
    this.home = Objects.requireNonNull(home, "home");
  }

  /** The names of every provider, in the order help text shows them. */
  List<String> names() {
    return ENTRIES.stream().map(Entry::name).toList();
  }

  /**
   * The provider called {@code name}, whose every command gets {@code env}. Does no I/O.
   *
   * @throws IllegalArgumentException if there is no such provider, naming the ones there are
   */
  WorkspaceProvider open(String name, Map<String, String> env) {
    return entry(name).factory().apply(home, env);
  }

  /** The provider that holds {@code ref}'s workspace. */
  WorkspaceProvider open(WorkspaceRef ref) {
    return open(ref.provider(), Map.of());
  }

  /** Whether the provider's workspaces are isolated from this machine. */
  boolean isolates(String name) {
    return entry(name).isolates();
  }

  /**
   * Whether a workspace keeps the env it was created with for every later command, also in later
   * runs of the CLI. A host workspace does not: its provider's env lives only as long as the
   * provider object.
   */
  boolean keepsEnv(String name) {
    return entry(name).keepsEnv();
  }

  /** The refs of every workspace {@code provider} holds. */
  List<WorkspaceRef> list(WorkspaceProvider provider) {
    return switch (provider) {
      case HostWorkspaceProvider host -> host.list();
      default ->
          throw new UnsupportedOperationException(
              "provider '" + provider.name() + "' cannot list its workspaces");
    };
  }

  private Entry entry(String name) {
    return ENTRIES.stream()
        .filter(e -> e.name().equals(name))
        .findFirst()
        .orElseThrow(
            () ->
                new IllegalArgumentException(
                    "unknown workspace provider '"
                        + name
                        + "' (known: "
                        + String.join(", ", names())
                        + ")"));
  }
}
