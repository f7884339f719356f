package com.example.workspace;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.net.URI;

/** The user guide's port URLs: a server in a sandbox gets a URL on this host, and a TCP forward. */
final class PortUrls {
  private PortUrls() {}

  /** The URL of port 8000, whether it has a token, the forward's host port and the URL template. */
  static String run() {
    // [ports]
    LocalSandbox sandboxes = LocalSandbox.builder().portToken(true).build(); // token: optional
    Workspace ws = Workspace.of(sandboxes.newBackend());
    ws.run(Command.shell("nohup python3 -m http.server 8000 >/dev/null 2>&1 &"));
    WorkspaceRef ref = ws.open();
    URI url = sandboxes.url(ref, 8000); // http://8000-<id>.localhost:7780/
    String token = sandboxes.portToken(ref).orElseThrow();
    int hostPort = sandboxes.forwardTcp(ref, 5432); // raw TCP: 127.0.0.1:hostPort -> sandbox :5432
    String template = sandboxes.info(ref).orElseThrow().portUrl(); // "http://{port}-<id>..."
    // [/ports]
    sandboxes.destroy(ref);
    return url.getHost().replace(ref.id(), "ID")
        + " token: "
        + !token.isEmpty()
        + " forward: "
        + (hostPort > 0)
        + " "
        + template.replace(ref.id(), "ID").replaceAll(":[0-9]+/", ":PORT/");
  }
}
