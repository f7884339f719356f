package com.example.remote;

import dev.sandbox4j.remote.RemoteSandbox;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.server.SandboxServer;
import dev.sandbox4j.server.ServerKeys;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Starts a Sandbox4j server in this JVM (what {@code sandbox4j serve} runs), makes an API key, and
 * uses a sandbox through the server with {@link RemoteSandbox}: the same Workspace API as a local
 * one.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws IOException {
    System.out.println(run(Files.createTempDirectory("sandbox4j-server")));
  }

  /** What a command printed in a sandbox of the server's, and how the server listed it. */
  static String run(Path serverData) {
    String key;
    try (ServerKeys keys = ServerKeys.open(serverData)) {
      key = keys.create("acme").key(); // shown once; the server keeps a hash
    }
    try (SandboxServer server =
        SandboxServer.builder()
            .engine(new LocalSandbox())
            .dataDirectory(serverData)
            .bind("127.0.0.1", 0) // any free port
            .build()
            .start()) {
      // [remote]
      RemoteSandbox sandboxes = RemoteSandbox.builder().url(server.uri()).apiKey(key).build();
      // or RemoteSandbox.fromEnvironment(): SANDBOX4J_URL and SANDBOX4J_API_KEY
      Workspace ws = Workspace.of(sandboxes.newBackend());
      CommandResult r = ws.run(Command.shell("echo hello from $(hostname)"));
      WorkspaceRef ref = ws.open(); // "remote:..."
      List<SandboxInfo> mine = sandboxes.list(); // this organization's sandboxes only
      sandboxes.destroy(ref);
      // [/remote]
      return r.stdoutText().strip().replaceAll("from .*", "from a sandbox")
          + "\nlisted: "
          + mine.stream().map(SandboxInfo::ref).toList().contains(ref);
    }
  }
}
