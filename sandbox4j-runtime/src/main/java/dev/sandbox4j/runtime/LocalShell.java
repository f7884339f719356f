package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Exec;
import dev.sandbox4j.runtime.internal.engine.SandboxIdentity;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * An interactive login shell in a sandbox, on this process's terminal: {@link LocalSandbox#shell}
 * documents it.
 */
final class LocalShell {
  private LocalShell() {}

  static int run(LocalSandbox sandboxes, WorkspaceRef ref) {
    LocalSandboxBackend backend =
        (LocalSandboxBackend)
            sandboxes
                .backend(ref)
                .orElseThrow(() -> new IllegalArgumentException("not a local sandbox ref: " + ref));
    // attaches: unavailable if gone, and checks the directory
    String workingDirectory = backend.workingDirectory();
    SandboxIdentity identity = backend.identity();
    Engine engine = sandboxes.engine();
    Map<String, String> env = sandboxes.env();
    Map<String, String> shellEnv = new LinkedHashMap<>(identity.envMap());
    shellEnv.putAll(engine.networks().proxyEnv(engine.dir(ref.id())));
    shellEnv.putAll(env);
    String term = System.getenv("TERM");
    if (term != null && !term.isBlank() && !env.containsKey("TERM")) {
      shellEnv.put("TERM", term);
    }
    String shell = engine.loginShell(ref.id());
    return Exec.interactive(
        engine, ref.id(), identity.user(), workingDirectory, shellEnv, List.of(shell, "-l"));
  }
}
