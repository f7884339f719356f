package dev.sandbox4j.runtime.internal.ports;

import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The host's way into the ports that sandboxes listen on: a reverse proxy serving {@code
 * http://{port}-{id}.localhost:{proxyPort}/}, and raw TCP forwards from a host port to a sandbox
 * port. Runs in the home's supervisor; the backend and the proxy share only files, and the proxy
 * reaches sandboxes only through its {@link PortTargets}.
 *
 * <p><b>Files.</b> {@code $home/network/proxy-port}: the proxy's port, chosen once by the first JVM
 * that needs it ({@value #DEFAULT_PORT} for the default home, a free port for any other) and kept;
 * edit it to move the proxy (the supervisor binds it when it starts). {@code
 * sandboxes/<id>/port-token} (0600): the sandbox's access token, if it was created with one. {@code
 * sandboxes/<id>/forwards/<port>}: a forward of sandbox port {@code port}, empty until the proxy
 * has bound a host port for it, then that port's number. Both go with the sandbox's directory on
 * destroy.
 *
 * <p><b>A request.</b> The first request head of a connection is read (at most {@value #MAX_HEAD}
 * bytes) and checked before anything else: origin-form target, HTTP/1.0 or 1.1, one {@code Host} of
 * the form {@code {port}-{id}.localhost[:proxyPort]} (else 400), a sandbox of that id here (else
 * 404), and, if the sandbox has a token, that token in header {@value #TOKEN_HEADER} or query
 * parameter {@value #TOKEN_PARAM} (else 401). Only then is the sandbox woken if it sleeps (through
 * {@link PortTargets#wake}, under its lock), stamped active, and a socket connected to {@code
 * 127.0.0.1:port} inside its network namespace ({@link PortTargets#connect}); none there is a 502.
 * The head is forwarded without the token and the connection becomes a byte pipe both ways: keep-
 * alive requests, WebSocket and {@code Upgrade: h2c} pass through untouched. The connection stays
 * bound to the sandbox its first request was authorized for, so bytes never reach another one; the
 * token is stripped from that first request only.
 *
 * <p><b>Activity.</b> Bytes moving either way stamp the sandbox active (at most once a second), so
 * idle timers do not suspend a sandbox that is being used through its ports.
 *
 * <p>Thread-safety: one virtual thread per connection direction; the maps of listeners and
 * connections are concurrent.
 */
public final class PortProxy implements AutoCloseable {
  static final int DEFAULT_PORT = 7780;
  public static final String TOKEN_HEADER = "X-Sandbox4j-Token";
  static final String TOKEN_PARAM = "s4j_token";
  static final int MAX_HEAD = 32 * 1024;

  private static final int HEAD_TIMEOUT_MILLIS = 30_000;
  private static final int BUFFER = 32 * 1024;
  private static final long TOUCH_EVERY_NANOS = 1_000_000_000L;
  private static final long WAKE_CHECK_NANOS = 100_000_000L;
  private static final long SWITCH_WAIT_MILLIS = 2_000;
  private static final int MAX_CHUNK_LINE = 4096;
  private static final Pattern HOST =
      Pattern.compile("([1-9][0-9]{0,4})-([a-z0-9]{1,32})\\.localhost(?::([0-9]{1,5}))?");
  private static final Pattern TOKEN_CHARS = Pattern.compile("[!#$%&'*+.^_`|~0-9A-Za-z-]+");
  private static final Pattern VERSION = Pattern.compile("HTTP/1\\.[01]");
  private static final Pattern NUMBER = Pattern.compile("[1-9][0-9]{0,4}");
  private static final SecureRandom RANDOM = new SecureRandom();

  private final PortTargets targets;
  private final Path sandboxes;
  private final Log log;
  private final Map<String, Forward> forwards = new ConcurrentHashMap<>();
  private final Set<Socket> open = ConcurrentHashMap.newKeySet();
  private volatile ServerSocket server;
  private volatile int port;
  private volatile boolean closed;
  private String lastBindFailure;
  private Thread forwardScanner;

  /** Where the supervisor's log lines go. */
  public interface Log {
    void say(String line);
  }

  public PortProxy(PortTargets targets, Log log) {
    this.targets = targets;
    this.sandboxes = targets.sandboxes();
    this.log = log;
  }

  // ---- shared with the backend --------------------------------------------------------------

  /**
   * The proxy's port for {@code home}: from {@code network/proxy-port}, written on first use (the
   * first writer wins, so every JVM agrees).
   */
  public static int port(Path home) {
    return port(home, true);
  }

  /**
   * {@link #port(Path)}; unless {@code mayCreateHome}, never creates {@code home} itself (the
   * supervisor's case: a home that is gone must stay gone).
   */
  public static int port(Path home, boolean mayCreateHome) {
    Path file = home.resolve("network").resolve("proxy-port");
    try {
      Optional<Integer> known = readPort(file);
      if (known.isPresent()) {
        return known.get();
      }
      if (mayCreateHome) {
        PrivateFiles.createPrivateDirectories(file.getParent());
      } else if (!Files.isDirectory(file.getParent())) {
        // fails if the home is gone: never brought back
        PrivateFiles.createPrivateDirectory(file.getParent());
      }
      int chosen =
          home.equals(SandboxHome.DEFAULT) ? DEFAULT_PORT : freePort().orElse(DEFAULT_PORT);
      Path temp = file.resolveSibling(".proxy-port.tmp-" + UUID.randomUUID());
      try {
        Files.writeString(temp, chosen + "\n");
        Files.createLink(file, temp); // fails if another JVM wrote it first: then theirs holds
      } catch (FileAlreadyExistsException lost) {
        // read below
      } finally {
        Files.deleteIfExists(temp);
      }
      return readPort(file)
          .orElseThrow(() -> new WorkspaceException(file + " does not hold a port number"));
    } catch (IOException e) {
      throw new WorkspaceException("cannot read or choose the port proxy's port in " + file, e);
    }
  }

  private static Optional<Integer> readPort(Path file) throws IOException {
    try {
      String text = Files.readString(file).strip();
      if (!NUMBER.matcher(text).matches() || Integer.parseInt(text) > 65535) {
        throw new WorkspaceException(
            file + " must hold a port number from 1 to 65535, holds '" + text + "'");
      }
      return Optional.of(Integer.parseInt(text));
    } catch (NoSuchFileException e) {
      return Optional.empty();
    }
  }

  private static Optional<Integer> freePort() {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return Optional.of(s.getLocalPort());
    } catch (IOException e) {
      return Optional.empty();
    }
  }

  /** {@code http://{port}-{id}.localhost:{proxyPort}/}. */
  public static URI url(int proxyPort, String id, int port) {
    checkPort(port);
    return URI.create("http://" + port + "-" + id + ".localhost:" + proxyPort + "/");
  }

  /** The URL with {@code {port}} standing for the sandbox port. */
  public static String urlTemplate(int proxyPort, String id) {
    return "http://{port}-" + id + ".localhost:" + proxyPort + "/";
  }

  public static void checkPort(int port) {
    if (port < 1 || port > 65535) {
      throw new IllegalArgumentException("port must be from 1 to 65535, was " + port);
    }
  }

  static Path tokenFile(Path sandboxDir) {
    return sandboxDir.resolve("port-token");
  }

  /** The sandbox's access token, if it has one. */
  public static Optional<String> token(Path sandboxDir) {
    try {
      return Optional.of(Files.readString(tokenFile(sandboxDir)).strip());
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new WorkspaceException("cannot read " + tokenFile(sandboxDir) + ": " + e, e);
    }
  }

  /** Writes a new random token, readable by root only from its first byte on. */
  public static void writeNewToken(Path sandboxDir) throws IOException {
    byte[] secret = new byte[32];
    RANDOM.nextBytes(secret);
    String token = Base64.getUrlEncoder().withoutPadding().encodeToString(secret);
    Path temp = sandboxDir.resolve(".port-token.tmp-" + UUID.randomUUID());
    try {
      Files.createFile(
          temp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
      Files.writeString(temp, token + "\n");
      Files.move(temp, tokenFile(sandboxDir), StandardCopyOption.ATOMIC_MOVE);
    } finally {
      Files.deleteIfExists(temp);
    }
  }

  /** A fork of a sandbox with a token gets a token too (its own: they are two machines). */
  public static void inherit(Path parentDir, Path forkDir) throws IOException {
    if (Files.exists(tokenFile(parentDir))) {
      writeNewToken(forkDir);
    }
  }

  /**
   * Asks the proxy for a forward of sandbox port {@code port} and waits until it is bound; returns
   * the host port on 127.0.0.1. The caller has checked the sandbox exists and started the
   * supervisor.
   */
  public static int forward(PortTargets targets, String id, int port, boolean supervisorRuns) {
    checkPort(port);
    Path file = targets.dir(id).resolve("forwards").resolve(Integer.toString(port));
    try {
      PrivateFiles.createPrivateDirectories(file.getParent());
      if (!supervisorRuns) {
        Files.write(file, new byte[0]); // a number there is a dead supervisor's: bind anew
      } else if (!Files.exists(file)) {
        try {
          Files.createFile(file);
        } catch (FileAlreadyExistsException raced) {
          // asked by someone else at the same time
        }
      }
      long end = System.nanoTime() + 20_000_000_000L;
      while (System.nanoTime() < end) {
        String text = Files.readString(file).strip();
        if (NUMBER.matcher(text).matches()) {
          return Integer.parseInt(text);
        }
        Thread.sleep(20);
      }
      throw new WorkspaceException(
          "the supervisor did not bind a forward of port "
              + port
              + " of local:"
              + id
              + " within 20 s: see "
              + targets.home().resolve(SandboxHome.SUPERVISOR_LOG));
    } catch (NoSuchFileException e) {
      throw targets.unavailable(id, "it was destroyed");
    } catch (IOException e) {
      throw new WorkspaceException("cannot forward port " + port + " of local:" + id + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted");
    }
  }

  // ---- the proxy (in the supervisor) ----------------------------------------------------------

  /**
   * Binds the proxy's port unless bound, and starts forwarding; failures are logged and retried.
   */
  public synchronized void start() {
    if (closed) {
      return;
    }
    if (server == null) {
      try {
        int wanted = port(targets.home(), false);
        ServerSocket s = new ServerSocket();
        s.setReuseAddress(true);
        s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), wanted), 128);
        server = s;
        port = wanted;
        Thread.ofVirtual().name("port-proxy").start(() -> acceptLoop(s, this::serveHttp));
        log.say("port proxy listens on http://127.0.0.1:" + wanted + "/");
      } catch (IOException | RuntimeException e) {
        String why = "port proxy cannot listen yet: " + e.getMessage();
        if (!why.equals(lastBindFailure)) { // retried every scan: said once
          log.say(why);
          lastBindFailure = why;
        }
      }
    }
    if (forwardScanner == null) {
      forwardScanner = Thread.ofVirtual().name("port-forwards").start(this::scanForwardsLoop);
    }
  }

  public int port() {
    return port;
  }

  @Override
  public synchronized void close() {
    closed = true;
    closeQuietly(server);
    if (forwardScanner != null) {
      forwardScanner.interrupt();
    }
    forwards.values().forEach(Forward::close);
    forwards.clear();
    open.forEach(PortProxy::closeQuietly);
  }

  private void acceptLoop(ServerSocket listener, java.util.function.Consumer<Socket> serve) {
    while (!listener.isClosed()) {
      Socket client;
      try {
        client = listener.accept();
      } catch (IOException e) {
        if (!listener.isClosed()) {
          log.say("port proxy: accept on " + listener.getLocalPort() + " failed: " + e);
        }
        return;
      }
      open.add(client);
      Thread.ofVirtual()
          .start(
              () -> {
                try {
                  serve.accept(client);
                } finally {
                  open.remove(client);
                  closeQuietly(client);
                }
              });
    }
  }

  /** One client connection of the HTTP proxy. */
  private void serveHttp(Socket client) {
    HttpConnection connection = new HttpConnection(client);
    try {
      connection.run();
    } catch (IOException e) {
      // the client or the server went away: nothing to answer
    } catch (WorkspaceUnavailableException e) {
      // the sandbox was destroyed while the connection was open: it ends with it
    } catch (RuntimeException e) {
      log.say("port proxy: " + e);
    } finally {
      connection.closeUpstream();
    }
  }

  /**
   * A client connection: reads each request head and frames each request body (Content-Length or
   * chunked), so that every request is checked and stripped of the token, while responses stream
   * back untouched on their own thread. A request for another target than the connection's current
   * upstream (a client that pools connections by address) ends that upstream and opens the new one,
   * with the full checks; an upgrade request ({@code Upgrade:} WebSocket, h2c) turns the rest of
   * the connection into a byte pipe to its target.
   */
  private final class HttpConnection {
    private final Socket client;
    private Target target; // the authorized target of the current upstream, or null
    private Socket upstream;
    private OutputStream upstreamOut; // buffered: a request's head and body leave in one write
    private Thread downstream;
    private Activity activity;
    private volatile boolean switching;

    HttpConnection(Socket client) {
      this.client = client;
    }

    void run() throws IOException {
      client.setTcpNoDelay(true);
      client.setSoTimeout(HEAD_TIMEOUT_MILLIS);
      ClientInput in = new ClientInput(client.getInputStream());
      OutputStream out = client.getOutputStream();
      while (true) {
        Head head;
        Target next;
        try {
          head = in.readHead();
          if (head == null) {
            endUpstream(); // the client is done: let the last response finish
            return;
          }
          client.setSoTimeout(0); // idle keep-alive and upgraded connections are legitimate
          next = target(head, target);
          head.checkFraming();
        } catch (BadRequest e) {
          if (endUpstream()) {
            respond(out, e.status, e.getMessage());
          }
          return;
        }
        if (!next.equals(target) || downstream == null || !downstream.isAlive()) {
          if (target != null && !endUpstream()) {
            return; // the previous response did not end: this connection cannot go on
          }
          Socket opened = connectForClient(next.id(), next.port(), out);
          if (opened == null) {
            return;
          }
          open(next, opened);
        } else {
          activity.wake();
        }
        OutputStream up = upstreamOut;
        up.write(head.bytes());
        if (head.isUpgrade()) {
          up.flush();
          in.spliceTo(up, activity);
          upstream.shutdownOutput();
          join(downstream, 0);
          return;
        }
        try {
          head.copyBody(in, up);
        } catch (BadRequest e) {
          return; // a malformed chunked body, half sent: only closing is left
        }
        up.flush();
      }
    }

    private void open(Target next, Socket opened) throws IOException {
      target = next;
      upstream = opened;
      upstreamOut = new java.io.BufferedOutputStream(opened.getOutputStream(), BUFFER);
      open.add(opened);
      activity = new Activity(next.id());
      switching = false;
      Socket up = opened;
      Activity a = activity;
      downstream =
          Thread.ofVirtual()
              .start(
                  () -> {
                    try {
                      copy(up.getInputStream(), client.getOutputStream(), a::touch);
                      if (!switching) {
                        client.shutdownOutput(); // as the server closed: a close-delimited body
                      }
                    } catch (IOException e) {
                      if (!switching) {
                        closeQuietly(client);
                      }
                    }
                  });
    }

    /**
     * Ends the current upstream after its response: half-closes it and waits a little for the
     * server to finish and close; returns false if it did not (the connection must end).
     */
    private boolean endUpstream() {
      if (upstream == null) {
        return true;
      }
      switching = true;
      boolean done;
      try {
        upstream.shutdownOutput();
        done = join(downstream, SWITCH_WAIT_MILLIS);
      } catch (IOException e) {
        done = true; // already closed
      }
      closeUpstream();
      return done;
    }

    void closeUpstream() {
      if (upstream != null) {
        open.remove(upstream);
        closeQuietly(upstream);
        join(downstream, SWITCH_WAIT_MILLIS);
        upstream = null;
        downstream = null;
        target = null;
      }
    }
  }

  /** Waits for {@code t} to end, at most {@code millis} (0: no limit); whether it ended. */
  private static boolean join(Thread t, long millis) {
    try {
      if (millis == 0) {
        t.join();
      } else {
        t.join(millis);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return !t.isAlive();
  }

  private record Target(String id, int port) {}

  /**
   * Checks the host, the sandbox and the token (unless the request is for {@code authorized}, the
   * connection's current target), and strips the token from the head.
   */
  private Target target(Head head, Target authorized) throws BadRequest {
    List<String> hosts = head.values("host");
    if (hosts.size() != 1) {
      throw new BadRequest(400, "exactly one Host header is needed, " + hostForm());
    }
    Matcher m = HOST.matcher(hosts.get(0).strip().toLowerCase(Locale.ROOT));
    if (!m.matches()) {
      throw new BadRequest(400, "bad Host '" + printable(hosts.get(0)) + "': " + hostForm());
    }
    int sandboxPort = Integer.parseInt(m.group(1));
    if (sandboxPort > 65535) {
      throw new BadRequest(400, "bad port " + sandboxPort + " in Host: 1 to 65535");
    }
    if (m.group(3) != null && !m.group(3).equals(Integer.toString(port))) {
      throw new BadRequest(400, "bad Host: this proxy listens on port " + port);
    }
    String id = m.group(2);
    Path dir = targets.dir(id);
    Target target = new Target(id, sandboxPort);
    if (target.equals(authorized)) {
      head.removeQueryParameter(TOKEN_PARAM);
      head.removeHeader(TOKEN_HEADER.toLowerCase(Locale.ROOT));
      return target;
    }
    if (!targets.isAlive(id)) {
      throw new BadRequest(404, "no sandbox local:" + id + " here");
    }
    Optional<String> expected;
    try {
      expected = token(dir);
    } catch (WorkspaceException e) {
      throw new BadRequest(500, "cannot read the sandbox's token");
    }
    List<String> given = new ArrayList<>(head.values(TOKEN_HEADER.toLowerCase(Locale.ROOT)));
    given.addAll(head.removeQueryParameter(TOKEN_PARAM));
    head.removeHeader(TOKEN_HEADER.toLowerCase(Locale.ROOT));
    if (expected.isPresent()) {
      byte[] want = expected.get().getBytes(StandardCharsets.UTF_8);
      boolean ok = !given.isEmpty();
      for (String g : given) {
        ok &= MessageDigest.isEqual(want, g.strip().getBytes(StandardCharsets.UTF_8));
      }
      if (!ok) {
        throw new BadRequest(
            401,
            (given.isEmpty() ? "missing" : "wrong")
                + " token for local:"
                + id
                + ": send header "
                + TOKEN_HEADER
                + " or query parameter "
                + TOKEN_PARAM);
      }
    }
    return target;
  }

  private String hostForm() {
    return "expected {port}-{id}.localhost:" + port;
  }

  /**
   * Wakes the sandbox if it sleeps, stamps it active, and connects to its port; on failure answers
   * the client itself and returns null.
   */
  private Socket connectForClient(String id, int sandboxPort, OutputStream out) throws IOException {
    String failure;
    try {
      return wakeAndConnect(id, sandboxPort).socket();
    } catch (WorkspaceUnavailableException e) {
      respond(out, 404, "no sandbox local:" + id + " here: " + e.getMessage());
      return null;
    } catch (ConnectException e) {
      failure =
          "nothing listens on port "
              + sandboxPort
              + " in sandbox local:"
              + id
              + " (a server must listen on 127.0.0.1 or 0.0.0.0 inside it)";
    } catch (PortTargets.NotRunning e) {
      failure = e.getMessage();
    } catch (IOException | WorkspaceException e) {
      failure = "cannot reach port " + sandboxPort + " of local:" + id + ": " + e.getMessage();
    }
    respond(out, 502, failure);
    return null;
  }

  private SocketChannel wakeAndConnect(String id, int sandboxPort) throws IOException {
    targets.touch(id); // before waking: the supervisor must not suspend it again
    targets.wake(id);
    SocketChannel channel = targets.connect(id, sandboxPort);
    channel.socket().setTcpNoDelay(true); // a head and its body are two writes: no Nagle wait
    return channel;
  }

  /**
   * Copies bytes both ways until both sides are done. Bytes either way stamp the sandbox active;
   * bytes from the client first wake it if it fell asleep since (a kept-alive connection outlives a
   * suspend), checked at most every {@link #WAKE_CHECK_NANOS}.
   */
  private void pipe(Socket client, Socket upstream, String id) throws IOException {
    Activity activity = new Activity(id);
    Thread up =
        Thread.ofVirtual()
            .start(
                () -> {
                  try {
                    copy(client.getInputStream(), upstream.getOutputStream(), activity::wake);
                    upstream.shutdownOutput();
                  } catch (IOException | RuntimeException e) {
                    closeQuietly(upstream); // a broken half breaks the whole
                    closeQuietly(client);
                  }
                });
    try {
      copy(upstream.getInputStream(), client.getOutputStream(), activity::touch);
      client.shutdownOutput();
    } catch (IOException e) {
      closeQuietly(upstream);
      closeQuietly(client);
    }
    try {
      up.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The activity stamps of one connection: touched at most once a second. */
  private final class Activity {
    private final String id;
    private volatile long lastTouch = System.nanoTime();
    private volatile long lastWakeCheck = System.nanoTime();

    Activity(String id) {
      this.id = id;
    }

    void touch() {
      long now = System.nanoTime();
      if (now - lastTouch > TOUCH_EVERY_NANOS) {
        lastTouch = now;
        targets.touch(id);
      }
    }

    void wake() {
      long now = System.nanoTime();
      if (now - lastWakeCheck > WAKE_CHECK_NANOS) {
        lastWakeCheck = now;
        lastTouch = now;
        targets.touch(id); // before waking: the supervisor must not suspend it again
        targets.wake(id); // unavailable once destroyed: ends the pipe
      } else {
        touch();
      }
    }
  }

  private static void copy(InputStream from, OutputStream to, Runnable beforeWrite)
      throws IOException {
    byte[] buffer = new byte[BUFFER];
    int n;
    while ((n = from.read(buffer)) >= 0) {
      beforeWrite.run();
      to.write(buffer, 0, n);
      to.flush();
    }
  }

  private static void respond(OutputStream out, int status, String text) throws IOException {
    byte[] body = (text + "\n").getBytes(StandardCharsets.UTF_8);
    String head =
        "HTTP/1.1 "
            + status
            + " "
            + reason(status)
            + (status == 401 ? "\r\nWWW-Authenticate: " + TOKEN_HEADER : "")
            + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
            + body.length
            + "\r\nConnection: close\r\n\r\n";
    out.write(head.getBytes(StandardCharsets.US_ASCII));
    out.write(body);
    out.flush();
  }

  private static String reason(int status) {
    return switch (status) {
      case 400 -> "Bad Request";
      case 401 -> "Unauthorized";
      case 404 -> "Not Found";
      case 408 -> "Request Timeout";
      case 431 -> "Request Header Fields Too Large";
      case 502 -> "Bad Gateway";
      default -> "Error";
    };
  }

  /** Up to 60 printable ASCII characters of {@code s}, for an error message. */
  private static String printable(String s) {
    StringBuilder b = new StringBuilder();
    s.chars().limit(60).forEach(c -> b.append(c >= 0x20 && c < 0x7f ? (char) c : '?'));
    return b.toString();
  }

  // ---- request heads ------------------------------------------------------------------------

  private static final class BadRequest extends Exception {
    private static final long serialVersionUID = 1L;
    final int status;

    BadRequest(int status, String message) {
      super(message, null, false, false);
      this.status = status;
    }
  }

  /** The client's bytes, buffered: request heads are parsed, bodies copied on as framed. */
  private static final class ClientInput {
    private final InputStream in;
    private byte[] buf = new byte[16 * 1024];
    private int pos;
    private int lim;

    ClientInput(InputStream in) {
      this.in = in;
    }

    /** The next request head; null if the client closed the connection between requests. */
    Head readHead() throws IOException, BadRequest {
      int scanned = 0; // bytes after pos already searched (offsets survive fill's compaction)
      while (true) {
        for (int i = pos + Math.max(0, scanned - 3); i + 3 < lim; i++) {
          if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
            Head head = Head.parse(new String(buf, pos, i - pos, StandardCharsets.ISO_8859_1));
            pos = i + 4;
            return head;
          }
        }
        scanned = lim - pos;
        if (scanned >= MAX_HEAD) {
          throw new BadRequest(431, "request head larger than " + MAX_HEAD + " bytes");
        }
        int n;
        try {
          n = fill();
        } catch (SocketTimeoutException e) {
          throw new BadRequest(
              408, "no complete request head within " + HEAD_TIMEOUT_MILLIS + " ms");
        }
        if (n < 0) {
          if (lim == pos) {
            return null;
          }
          throw new BadRequest(400, "connection closed in the request head");
        }
      }
    }

    /** Reads more bytes after {@code lim}, compacting or growing the buffer; -1 at EOF. */
    private int fill() throws IOException {
      if (lim == buf.length) {
        if (pos > 0) {
          System.arraycopy(buf, pos, buf, 0, lim - pos);
          lim -= pos;
          pos = 0;
        } else {
          buf = java.util.Arrays.copyOf(buf, buf.length * 2);
        }
      }
      int n = in.read(buf, lim, buf.length - lim);
      if (n > 0) {
        lim += n;
      }
      return n;
    }

    /** Copies exactly {@code n} bytes to {@code out}. */
    void copy(long n, OutputStream out) throws IOException {
      while (n > 0) {
        if (pos == lim) {
          pos = lim = 0;
          if (fill() < 0) {
            throw new IOException("the client closed the connection in a request body");
          }
        }
        int k = (int) Math.min(n, lim - pos);
        out.write(buf, pos, k);
        pos += k;
        n -= k;
      }
    }

    /** Reads a CRLF-terminated line (of a chunked body) and copies it on; returns it. */
    String copyLine(OutputStream out) throws IOException, BadRequest {
      int scanned = 0;
      while (true) {
        for (int i = pos + Math.max(0, scanned - 1); i + 1 < lim; i++) {
          if (buf[i] == '\r' && buf[i + 1] == '\n') {
            String line = new String(buf, pos, i - pos, StandardCharsets.ISO_8859_1);
            out.write(buf, pos, i + 2 - pos);
            pos = i + 2;
            return line;
          }
        }
        scanned = lim - pos;
        if (scanned > MAX_CHUNK_LINE) {
          throw new BadRequest(400, "chunk line longer than " + MAX_CHUNK_LINE + " bytes");
        }
        if (fill() < 0) {
          throw new IOException("the client closed the connection in a chunked body");
        }
      }
    }

    /** Copies what is buffered, then everything the client sends, until it closes. */
    void spliceTo(OutputStream out, Activity activity) throws IOException {
      if (lim > pos) {
        out.write(buf, pos, lim - pos);
        out.flush();
        pos = lim;
      }
      PortProxy.copy(in, out, activity::wake);
    }
  }

  /** A request head: its line and headers. */
  private static final class Head {
    private final String method;
    private String target;
    private final String version;
    private final List<String[]> headers; // name as sent, value

    private Head(String method, String target, String version, List<String[]> headers) {
      this.method = method;
      this.target = target;
      this.version = version;
      this.headers = headers;
    }

    static Head parse(String text) throws BadRequest {
      String[] lines = text.split("\r\n", -1);
      String[] requestLine = lines[0].split(" ", -1);
      if (requestLine.length != 3
          || !TOKEN_CHARS.matcher(requestLine[0]).matches()
          || !VERSION.matcher(requestLine[2]).matches()) {
        throw new BadRequest(400, "bad request line: expected METHOD /path HTTP/1.1");
      }
      if (!requestLine[1].startsWith("/")
          || requestLine[1].chars().anyMatch(c -> c <= 0x20 || c >= 0x7f)) {
        throw new BadRequest(400, "bad request target: expected a path starting with /");
      }
      List<String[]> headers = new ArrayList<>();
      for (int i = 1; i < lines.length; i++) {
        String line = lines[i];
        int colon = line.indexOf(':');
        if (colon <= 0 || !TOKEN_CHARS.matcher(line.substring(0, colon)).matches()) {
          throw new BadRequest(400, "bad header line " + i + " (folded, or no name)");
        }
        String value = line.substring(colon + 1).strip();
        if (value.chars().anyMatch(c -> c < 0x20 && c != '\t' || c == 0x7f)) {
          throw new BadRequest(400, "bad header value of " + line.substring(0, colon));
        }
        headers.add(new String[] {line.substring(0, colon), value});
      }
      return new Head(requestLine[0], requestLine[1], requestLine[2], headers);
    }

    List<String> values(String lowerName) {
      return headers.stream()
          .filter(h -> h[0].toLowerCase(Locale.ROOT).equals(lowerName))
          .map(h -> h[1])
          .toList();
    }

    void removeHeader(String lowerName) {
      headers.removeIf(h -> h[0].toLowerCase(Locale.ROOT).equals(lowerName));
    }

    /** Removes every {@code name=value} from the query; returns the (percent-decoded) values. */
    List<String> removeQueryParameter(String name) throws BadRequest {
      int q = target.indexOf('?');
      if (q < 0) {
        return List.of();
      }
      List<String> values = new ArrayList<>();
      List<String> kept = new ArrayList<>();
      for (String pair : target.substring(q + 1).split("&", -1)) {
        int eq = pair.indexOf('=');
        String key = eq < 0 ? pair : pair.substring(0, eq);
        if (key.equals(name)) {
          try {
            values.add(
                java.net.URLDecoder.decode(
                    eq < 0 ? "" : pair.substring(eq + 1), StandardCharsets.UTF_8));
          } catch (IllegalArgumentException e) {
            throw new BadRequest(400, "bad " + name + " in the query");
          }
        } else {
          kept.add(pair);
        }
      }
      if (!values.isEmpty()) {
        target = target.substring(0, q) + (kept.isEmpty() ? "" : "?" + String.join("&", kept));
      }
      return values;
    }

    /**
     * Refuses bodies whose end the proxy could not find the same way as the server (request
     * smuggling): both Content-Length and Transfer-Encoding, differing lengths, or a transfer
     * coding other than chunked last.
     */
    void checkFraming() throws BadRequest {
      List<String> te = values("transfer-encoding");
      List<String> cl = values("content-length");
      if (!te.isEmpty() && !cl.isEmpty()) {
        throw new BadRequest(400, "both Content-Length and Transfer-Encoding");
      }
      if (!te.isEmpty()) {
        String codings = String.join(",", te).toLowerCase(Locale.ROOT).replace(" ", "");
        if (!codings.equals("chunked")) {
          throw new BadRequest(400, "unsupported Transfer-Encoding '" + printable(codings) + "'");
        }
      }
      if (cl.stream().distinct().count() > 1) {
        throw new BadRequest(400, "conflicting Content-Length headers");
      }
      if (!cl.isEmpty() && !cl.get(0).matches("[0-9]{1,18}")) {
        throw new BadRequest(400, "bad Content-Length '" + printable(cl.get(0)) + "'");
      }
    }

    /** Whether the request asks to switch protocols (WebSocket, h2c). */
    boolean isUpgrade() {
      return !values("upgrade").isEmpty()
          && values("connection").stream()
              .anyMatch(v -> v.toLowerCase(Locale.ROOT).contains("upgrade"));
    }

    /** Copies the request's body, as framed by its headers, from {@code in} to {@code out}. */
    void copyBody(ClientInput in, OutputStream out) throws IOException, BadRequest {
      if (!values("transfer-encoding").isEmpty()) {
        while (true) {
          String line = in.copyLine(out);
          String size = line.split(";", 2)[0].strip();
          if (!size.matches("[0-9a-fA-F]{1,15}")) {
            throw new BadRequest(400, "bad chunk size");
          }
          long n = Long.parseLong(size, 16);
          if (n == 0) {
            while (!in.copyLine(out).isEmpty()) {
              // trailer fields, copied on
            }
            return;
          }
          in.copy(n + 2, out); // the chunk and its CRLF
        }
      }
      List<String> cl = values("content-length");
      if (!cl.isEmpty()) {
        in.copy(Long.parseLong(cl.get(0)), out);
      }
    }

    /** The head as forwarded. */
    byte[] bytes() {
      StringBuilder b = new StringBuilder();
      b.append(method).append(' ').append(target).append(' ').append(version).append("\r\n");
      for (String[] h : headers) {
        b.append(h[0]).append(": ").append(h[1]).append("\r\n");
      }
      b.append("\r\n");
      return b.toString().getBytes(StandardCharsets.ISO_8859_1);
    }
  }

  // ---- raw TCP forwards ---------------------------------------------------------------------

  /** A host port on 127.0.0.1 forwarding to one sandbox port. */
  private record Forward(String id, int sandboxPort, ServerSocket listener) {
    void close() {
      closeQuietly(listener);
    }
  }

  private void scanForwardsLoop() {
    while (!closed) {
      try {
        scanForwards();
        Thread.sleep(100);
      } catch (InterruptedException e) {
        return;
      } catch (RuntimeException e) {
        log.say("port forwards: " + e);
      }
    }
  }

  /** Binds the forwards asked for, and closes those whose sandbox or request is gone. */
  void scanForwards() {
    Set<String> wanted = new java.util.HashSet<>();
    if (Files.isDirectory(sandboxes)) {
      try (Stream<Path> dirs = Files.list(sandboxes)) {
        for (Path dir : dirs.toList()) {
          Path asked = dir.resolve("forwards");
          if (!Files.isDirectory(asked) || dir.getFileName().toString().startsWith(".")) {
            continue;
          }
          String id = dir.getFileName().toString();
          try (Stream<Path> files = Files.list(asked)) {
            for (Path f : files.toList()) {
              String name = f.getFileName().toString();
              if (!NUMBER.matcher(name).matches() || Integer.parseInt(name) > 65535) {
                continue;
              }
              String key = id + ":" + name;
              wanted.add(key);
              Forward bound = forwards.get(key);
              if (bound == null) {
                bindForward(id, Integer.parseInt(name), f, key);
              } else {
                rewriteIfCleared(f, bound);
              }
            }
          } catch (IOException e) {
            // destroyed meanwhile
          }
        }
      } catch (IOException e) {
        // nothing to scan
      }
    }
    for (String key : List.copyOf(forwards.keySet())) {
      if (!wanted.contains(key)) {
        Forward gone = forwards.remove(key);
        if (gone != null) {
          gone.close();
          log.say("closed the forward of port " + gone.sandboxPort() + " of local:" + gone.id());
        }
      }
    }
  }

  /** Writes the bound port again if someone cleared the file (a JVM that found no supervisor). */
  private static void rewriteIfCleared(Path file, Forward bound) {
    try {
      String text = Files.readString(file).strip();
      String port = Integer.toString(bound.listener().getLocalPort());
      if (!text.equals(port)) {
        AtomicFiles.write(file, (port + "\n").getBytes(StandardCharsets.US_ASCII));
      }
    } catch (IOException e) {
      // destroyed meanwhile: the next scan closes the forward
    }
  }

  private void bindForward(String id, int sandboxPort, Path file, String key) {
    try {
      String recorded = Files.readString(file).strip();
      ServerSocket listener = new ServerSocket();
      listener.setReuseAddress(true);
      InetAddress loopback = InetAddress.getLoopbackAddress();
      try {
        listener.bind(
            new InetSocketAddress(
                loopback, NUMBER.matcher(recorded).matches() ? Integer.parseInt(recorded) : 0));
      } catch (IOException taken) {
        listener.close();
        listener = new ServerSocket();
        listener.bind(new InetSocketAddress(loopback, 0));
      }
      if (!Files.isRegularFile(file)) {
        listener.close();
        return; // destroyed meanwhile
      }
      AtomicFiles.write(file, (listener.getLocalPort() + "\n").getBytes(StandardCharsets.US_ASCII));
      Forward forward = new Forward(id, sandboxPort, listener);
      forwards.put(key, forward);
      ServerSocket bound = listener;
      Thread.ofVirtual()
          .name("forward-" + key)
          .start(() -> acceptLoop(bound, client -> serveForward(client, id, sandboxPort)));
      log.say(
          "forwarding 127.0.0.1:"
              + listener.getLocalPort()
              + " to port "
              + sandboxPort
              + " of local:"
              + id
              + " ("
              + Instant.now()
              + ")");
    } catch (NoSuchFileException e) {
      // destroyed meanwhile
    } catch (IOException e) {
      log.say("cannot forward port " + sandboxPort + " of local:" + id + ": " + e);
    }
  }

  private void serveForward(Socket client, String id, int sandboxPort) {
    try {
      client.setTcpNoDelay(true);
      if (!targets.isAlive(id)) {
        return;
      }
      SocketChannel upstream;
      try {
        upstream = wakeAndConnect(id, sandboxPort);
      } catch (IOException | WorkspaceException e) {
        return; // a raw stream has no way to say why: the client sees the connection close
      }
      open.add(upstream.socket());
      try {
        pipe(client, upstream.socket(), id);
      } finally {
        open.remove(upstream.socket());
        closeQuietly(upstream.socket());
      }
    } catch (IOException e) {
      // gone
    }
  }

  private static void closeQuietly(java.io.Closeable c) {
    if (c == null) {
      return;
    }
    try {
      c.close();
    } catch (IOException e) {
      // nothing to do
    }
  }
}
