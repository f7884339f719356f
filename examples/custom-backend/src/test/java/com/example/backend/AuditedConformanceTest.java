package com.example.backend;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.SupportsCommands;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.conformance.SlowCreation;
import dev.sandbox4j.workspace.conformance.WorkspaceConformanceSuite;
import dev.sandbox4j.workspace.host.HostWorkspaceProvider;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.io.TempDir;

/**
 * The whole workspace contract against {@link AuditedProvider}. Here it wraps host directories,
 * which need no root and isolate nothing (so the suite skips its isolation rules); wrap local
 * sandboxes instead and drop {@link #isolatesFromHost} to run those too.
 */
class AuditedConformanceTest extends WorkspaceConformanceSuite {
  @TempDir Path root;
  final Queue<String> trail = new ConcurrentLinkedQueue<>();

  @Override
  protected WorkspaceProvider provider() {
    return new AuditedProvider(HostWorkspaceProvider.create(root), trail::add);
  }

  @Override
  protected WorkspaceBackend newBackendWithEnv(Map<String, String> env) {
    var hosts = HostWorkspaceProvider.builder().root(root).env(env).build();
    return new AuditedProvider(hosts, trail::add).newBackend();
  }

  @Override
  protected WorkspaceBackend newBackendSlowToCreate(Duration delay) {
    // a host workspace is created by its first command: make that one slow
    var slow = new SlowFirstCommand(HostWorkspaceProvider.create(root).newBackend(), delay);
    return new AuditedProvider(HostWorkspaceProvider.create(root), trail::add).audited(slow);
  }

  @Override
  protected boolean isolatesFromHost() {
    return false; // host directories isolate nothing
  }

  /** A backend whose first command (the one that creates the workspace) waits {@code delay}. */
  record SlowFirstCommand(WorkspaceBackend inner, Duration delay, AtomicBoolean first)
      implements WorkspaceBackend, SupportsCommands {
    SlowFirstCommand(WorkspaceBackend inner, Duration delay) {
      this(inner, delay, new AtomicBoolean(true));
    }

    @Override
    public Optional<WorkspaceRef> ref() {
      return inner.ref();
    }

    @Override
    public String workingDirectory() {
      return inner.workingDirectory();
    }

    @Override
    public CommandResult run(Command command, RunOptions options) {
      if (first.getAndSet(false)) {
        SlowCreation.sleep(delay);
      }
      return ((SupportsCommands) inner).run(command, options);
    }
  }
}
