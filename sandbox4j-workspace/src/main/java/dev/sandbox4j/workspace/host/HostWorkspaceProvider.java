package dev.sandbox4j.workspace.host;

import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * Workspaces that are plain directories on the host, under one root directory: provider {@code
 * host}, refs {@code host:<id>} naming {@code <root>/<id>}.
 *
 * <p><b>This isolates nothing.</b> Commands run on the host as the JVM's user, with its rights, and
 * can read, write and reach whatever that user can; absolute paths are host paths. Use it for
 * development and tests with code you trust, never for an agent that runs untrusted commands.
 *
 * <p>What it does keep: each command runs in its own session; only {@code PATH}, {@code HOME},
 * {@code LANG} and {@code LC_*} are inherited from the JVM's environment; the deadline,
 * cancellation, the output limit and {@link #destroy} kill every process a command started, also
 * those that called {@code setsid} or daemonized (on Linux, found by a marker variable {@code
 * SANDBOX4J_HOST_RUN} that every command's processes inherit, as Jenkins finds a build's
 * processes).
 */
public final class HostWorkspaceProvider implements WorkspaceProvider {

  /** The provider name in refs. */
  public static final String NAME = "host";

  private final Path root;
  private final Map<String, String> env;

  private HostWorkspaceProvider(Builder b) {
    this.root = b.root.toAbsolutePath().normalize();
    this.env = Map.copyOf(b.env);
  }

  /** Workspaces under {@code root}, which is created on first use. */
  public static HostWorkspaceProvider create(Path root) {
    return builder().root(root).build();
  }

  /** A builder; {@code root} is required. */
  public static Builder builder() {
    return new Builder();
  }

  @Override
  public String name() {
    return NAME;
  }

  /** The directory holding every workspace of this provider. */
  public Path root() {
    return root;
  }

  @Override
  public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
    throw new UnsupportedOperationException("TODO");
  }

  @Override
  public WorkspaceBackend newBackend() {
    throw new UnsupportedOperationException("TODO");
  }

  @Override
  public void destroy(WorkspaceRef ref) {
    throw new UnsupportedOperationException("TODO");
  }

  /** The refs of every workspace under the root, sorted by id. */
  public List<WorkspaceRef> list() {
    throw new UnsupportedOperationException("TODO");
  }

  /** Builds a {@link HostWorkspaceProvider}. */
  public static final class Builder {
    private Path root;
    private final Map<String, String> env = new LinkedHashMap<>();

    private Builder() {}

    /** The directory under which workspaces are created. */
    public Builder root(Path root) {
      this.root = Objects.requireNonNull(root, "root");
      return this;
    }

    /** A variable every command of every workspace gets (a command's own env wins). */
    public Builder env(String name, String value) {
      env.put(Objects.requireNonNull(name, "env name"), Objects.requireNonNull(value, "env value"));
      return this;
    }

    /** Variables every command gets. */
    public Builder env(Map<String, String> vars) {
      vars.forEach(this::env);
      return this;
    }

    /** Returns the provider. */
    public HostWorkspaceProvider build() {
      if (root == null) {
        throw new IllegalStateException("HostWorkspaceProvider needs a root directory");
      }
      return new HostWorkspaceProvider(this);
    }
  }
}
