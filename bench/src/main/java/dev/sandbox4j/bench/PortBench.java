package dev.sandbox4j.bench;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.NetNamespace;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.ports.PortProxy;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The port URL scenarios (issue 6): a 1 KiB HTTP request answered with 1 KiB by a node server in a
 * sandbox, through the port URL (the supervisor's {@link PortProxy}) and directly, on a socket
 * opened in the sandbox's network namespace the same way the proxy opens its own ({@link
 * NetNamespace}), so the difference is the proxy's overhead. The direct path opens its own engine
 * on the same home (as the supervisor does), since {@code LocalSandbox} keeps its engine to itself.
 */
public final class PortBench implements AutoCloseable {
  private static final int PORT = 8090;
  private static final String SERVER =
      "require('http').createServer((req, res) => { const b = [];"
          + " req.on('data', (c) => b.push(c)); req.on('end', () => { const body ="
          + " Buffer.concat(b); res.writeHead(200, {'content-length': body.length});"
          + " res.end(body); }); }).listen("
          + PORT
          + ", '127.0.0.1', () => require('fs').writeFileSync('/tmp/bench-listening', ''));";

  private final LocalSandbox sandboxes;
  private final Workspace ws;
  private final WorkspaceRef ref;
  private final int proxyPort;
  private final String host;
  private final byte[] request;
  private Socket viaProxy;
  private Socket direct;

  /** Creates a sandbox from {@code sandboxes} running the server, and waits for the proxy. */
  public PortBench(LocalSandbox sandboxes) throws IOException, InterruptedException {
    this.sandboxes = sandboxes;
    ws = Workspace.of(sandboxes.newBackend());
    ws.writeText("/tmp/bench-server.js", SERVER);
    CommandResult r =
        ws.run(
            Command.shell(
                "nohup node /tmp/bench-server.js >/tmp/bench-server.out 2>&1 </dev/null &"
                    + " for i in $(seq 300); do [ -f /tmp/bench-listening ] && exit 0; sleep 0.1;"
                    + " done; cat /tmp/bench-server.out; exit 1"));
    if (!r.succeeded()) {
      throw new IllegalStateException("the bench's port server did not start: " + r);
    }
    ref = ws.open();
    proxyPort = sandboxes.url(ref, PORT).getPort();
    host = PORT + "-" + ref.id() + ".localhost:" + proxyPort;
    byte[] body = new byte[1024];
    Arrays.fill(body, (byte) 'x');
    byte[] head =
        ("POST /bench HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 1024\r\n\r\n")
            .getBytes(StandardCharsets.ISO_8859_1);
    request = Arrays.copyOf(head, head.length + body.length);
    System.arraycopy(body, 0, request, head.length, body.length);
    long end = System.nanoTime() + 30_000_000_000L;
    while (true) {
      try (Socket probe = new Socket()) {
        probe.connect(new InetSocketAddress("127.0.0.1", proxyPort), 1000);
        break;
      } catch (IOException e) {
        if (System.nanoTime() > end) {
          throw new IllegalStateException("the port proxy did not listen within 30 s", e);
        }
        Thread.sleep(50);
      }
    }
  }

  /** One request and its response on a kept-alive connection through the port URL. */
  public long[] viaProxy() throws IOException {
    if (viaProxy == null) {
      viaProxy = new Socket("127.0.0.1", proxyPort);
      viaProxy.setTcpNoDelay(true);
    }
    return new long[] {exchange(viaProxy)};
  }

  /** The same on a new connection through the port URL each time (connect included). */
  public long[] viaProxyNewConnection() throws IOException {
    long start = System.nanoTime();
    try (Socket s = new Socket("127.0.0.1", proxyPort)) {
      s.setTcpNoDelay(true);
      exchange(s);
      return new long[] {System.nanoTime() - start};
    }
  }

  /** The same on a kept-alive connection opened inside the sandbox's network namespace. */
  public long[] direct() throws IOException {
    if (direct == null) {
      Engine engine =
          Engine.open(
              sandboxes.home(),
              Engine.imageStore(sandboxes.home()),
              null,
              null,
              -1,
              SandboxDisk.DEFAULT_OVERCOMMIT);
      direct = NetNamespace.connect(engine, ref.id(), PORT).socket();
      direct.setTcpNoDelay(true);
    }
    return new long[] {exchange(direct)};
  }

  private long exchange(Socket s) throws IOException {
    long start = System.nanoTime();
    OutputStream out = s.getOutputStream();
    out.write(request);
    out.flush();
    InputStream in = s.getInputStream();
    StringBuilder head = new StringBuilder();
    while (!head.toString().endsWith("\r\n\r\n")) {
      int b = in.read();
      if (b < 0) {
        throw new IOException("the connection closed in a response: " + head);
      }
      head.append((char) b);
    }
    if (!head.toString().startsWith("HTTP/1.1 200")) {
      throw new IOException("unexpected response: " + head);
    }
    byte[] body = in.readNBytes(1024);
    long elapsed = System.nanoTime() - start;
    if (body.length != 1024) {
      throw new IOException("short response body: " + body.length + " bytes");
    }
    return elapsed;
  }

  @Override
  public void close() throws IOException {
    for (Socket s : new Socket[] {viaProxy, direct}) {
      if (s != null) {
        s.close();
      }
    }
    sandboxes.destroy(ref);
  }
}
