package com.example.backend;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.SupportsCommands;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * A provider of its own (refs {@code audited:ID}) whose workspaces live in another provider's and
 * whose every command is written to an audit trail first. Its backends offer commands only: the
 * Workspace API builds the file operations from commands, so each of those is audited too.
 */
public final class AuditedProvider implements WorkspaceProvider {
  static final String NAME = "audited";

  private final WorkspaceProvider inner;
  private final Consumer<String> audit;

  /**
   * @param inner where the workspaces live (local sandboxes, a server's, host directories…)
   * @param audit gets one line per command before it runs, and one with its exit code
   */
  public AuditedProvider(WorkspaceProvider inner, Consumer<String> audit) {
    this.inner = Objects.requireNonNull(inner, "inner");
    this.audit = Objects.requireNonNull(audit, "audit");
  }

  @Override
  public String name() {
    return NAME;
  }

  @Override
  public WorkspaceBackend newBackend() {
    return audited(inner.newBackend());
  }

  /** A backend of {@code inner}'s, audited: for a test, or a backend built with options. */
  public WorkspaceBackend audited(WorkspaceBackend backend) {
    if (!(backend instanceof SupportsCommands)) {
      throw new IllegalArgumentException("the wrapped backend must run commands");
    }
    return new Backend(backend);
  }

  /** Another provider's ref is not ours to offer: empty, as the contract says. */
  @Override
  public Optional<WorkspaceBackend> backend(WorkspaceRef ref) {
    if (!ref.provider().equals(NAME)) {
      return Optional.empty();
    }
    return inner.backend(new WorkspaceRef(inner.name(), ref.id())).map(this::audited);
  }

  @Override
  public void destroy(WorkspaceRef ref) {
    if (!ref.provider().equals(NAME)) {
      throw new IllegalArgumentException("not an " + NAME + " workspace: " + ref);
    }
    inner.destroy(new WorkspaceRef(inner.name(), ref.id()));
  }

  /** The core (ref, working directory) and commands; nothing else, so files go through commands. */
  private final class Backend implements WorkspaceBackend, SupportsCommands {
    private final WorkspaceBackend backend;

    Backend(WorkspaceBackend backend) {
      this.backend = backend;
    }

    @Override
    public Optional<WorkspaceRef> ref() {
      return backend.ref().map(r -> new WorkspaceRef(NAME, r.id()));
    }

    @Override
    public String workingDirectory() {
      return backend.workingDirectory();
    }

    @Override
    public CommandResult run(Command command, RunOptions options) {
      audit.accept("run " + command);
      CommandResult result = ((SupportsCommands) backend).run(command, options);
      audit.accept("exit " + result.exitCode() + " " + command);
      return result;
    }
  }
}
