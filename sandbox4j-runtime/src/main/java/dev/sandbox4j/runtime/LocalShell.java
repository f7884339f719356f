package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Exec;
import dev.sandbox4j.workspace.WorkspaceBackend;
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
    WorkspaceBackend backend =
        sandboxes
            .backend(ref)
            .orElseThrow(() -> new IllegalArgumentException("not a local sandbox ref: " + ref));
    backend.workingDirectory(); // attaches: unavailable if gone, and checks the directory
    Engine engine = sandboxes.engine();
    Map<String, String> env = sandboxes.env();
    Map<String, String> shellEnv = new LinkedHashMap<>(Engine.BASE_ENV);
    shellEnv.putAll(engine.networks().proxyEnv(engine.dir(ref.id())));
    shellEnv.putAll(env);
    String term = System.getenv("TERM");
    if (term != null && !term.isBlank() && !env.containsKey("TERM")) {
      shellEnv.put("TERM", term);
    }
    return Exec.interactive(
        engine,
        ref.id(),
        Engine.USER,
        sandboxes.workingDirectory(),
        shellEnv,
        List.of("/bin/bash", "-l"));
  }
}
