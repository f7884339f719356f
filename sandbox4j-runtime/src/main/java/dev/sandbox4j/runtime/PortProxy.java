package dev.sandbox4j.runtime;

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
 * port. Runs in the home's {@link Supervisor}; the engine and the proxy share only files.
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
 * {@link Engine#attach}, under its lock), stamped active, and a socket connected to {@code
 * 127.0.0.1:port} inside its network namespace ({@link NetNamespace}); none there is a 502. The
 * head is forwarded without the token and the connection becomes a byte pipe both ways: keep- alive
 * requests, WebSocket and {@code Upgrade: h2c} pass through untouched. The connection stays bound
 * to the sandbox its first request was authorized for, so bytes never reach another one; the token
 * is stripped from that first request only.
 *
 * <p><b>Activity.</b> Bytes moving either way stamp the sandbox active (at most once a second), so
 * idle timers do not suspend a sandbox that is being used through its ports.
 *
 * <p>Thread-safety: one virtual thread per connection direction; the maps of listeners and
 * connections are concurrent.
 */
final class PortProxy implements AutoCloseable {
  static final int DEFAULT_PORT = 7780;
  static final String TOKEN_HEADER = "X-Sandbox4j-Token";
  static final String TOKEN_PARAM = "s4j_token";
  static final int MAX_HEAD = 32 * 1024;

  private static final int HEAD_TIMEOUT_MILLIS = 30_000;
  private static final int BUFFER = 32 * 1024;
  private static final long TOUCH_EVERY_NANOS = 1_000_000_000L;
  private static final Pattern HOST =
      Pattern.compile("([1-9][0-9]{0,4})-([a-z0-9]{1,32})\\.localhost(?::([0-9]{1,5}))?");
  private static final Pattern TOKEN_CHARS = Pattern.compile("[!#$%&'*+.^_`|~0-9A-Za-z-]+");
  private static final Pattern VERSION = Pattern.compile("HTTP/1\\.[01]");
  private static final Pattern NUMBER = Pattern.compile("[1-9][0-9]{0,4}");
  private static final SecureRandom RANDOM = new SecureRandom();

  private final Engine engine;
  private final Path sandboxes;
  private final Consumer log;
  private final Map<String, Forward> forwards = new ConcurrentHashMap<>();
  private final Set<Socket> open = ConcurrentHashMap.newKeySet();
  private volatile ServerSocket server;
  private volatile int port;
  private volatile boolean closed;
  private Thread forwardScanner;

  /** Where the supervisor's log lines go. */
  interface Consumer {
    void say(String line);
  }

  PortProxy(Engine engine, Consumer log) {
    this.engine = engine;
    this.sandboxes = engine.home().resolve("sandboxes");
    this.log = log;
  }

  // ---- shared with the engine ---------------------------------------------------------------

  /**
   * The proxy's port for {@code home}: from {@code network/proxy-port}, written on first use (the
   * first writer wins, so every JVM agrees).
   */
  static int port(Path home) {
    Path file = home.resolve("network").resolve("proxy-port");
    try {
      Optional<Integer> known = readPort(file);
      if (known.isPresent()) {
        return known.get();
      }
      Files.createDirectories(file.getParent());
      int chosen =
          home.equals(LocalSandbox.DEFAULT_HOME) ? DEFAULT_PORT : freePort().orElse(DEFAULT_PORT);
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
  static URI url(int proxyPort, String id, int port) {
    checkPort(port);
    return URI.create("http://" + port + "-" + id + ".localhost:" + proxyPort + "/");
  }

  /** The URL with {@code {port}} standing for the sandbox port. */
  static String urlTemplate(int proxyPort, String id) {
    return "http://{port}-" + id + ".localhost:" + proxyPort + "/";
  }

  static void checkPort(int port) {
    if (port < 1 || port > 65535) {
      throw new IllegalArgumentException("port must be from 1 to 65535, was " + port);
    }
  }

  static Path tokenFile(Path sandboxDir) {
    return sandboxDir.resolve("port-token");
  }

  /** The sandbox's access token, if it has one. */
  static Optional<String> token(Path sandboxDir) {
    try {
      return Optional.of(Files.readString(tokenFile(sandboxDir)).strip());
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new WorkspaceException("cannot read " + tokenFile(sandboxDir) + ": " + e, e);
    }
  }

  /** Writes a new random token, readable by root only from its first byte on. */
  static void writeNewToken(Path sandboxDir) throws IOException {
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

  /** The writable layer {@code upper} makes, plus a token if {@code withToken}. */
  static Engine.UpperLayer creatingWith(boolean withToken, Engine.UpperLayer upper) {
    if (!withToken) {
      return upper;
    }
    return (dir, id) -> {
      writeNewToken(dir);
      upper.prepare(dir, id);
    };
  }

  /** A fork of a sandbox with a token gets a token too (its own: they are two machines). */
  static void inherit(Path parentDir, Path forkDir) throws IOException {
    if (Files.exists(tokenFile(parentDir))) {
      writeNewToken(forkDir);
    }
  }

  /**
   * Asks the proxy for a forward of sandbox port {@code port} and waits until it is bound; returns
   * the host port on 127.0.0.1. The caller has checked the sandbox exists and started the
   * supervisor.
   */
  static int forward(Engine engine, String id, int port, boolean supervisorRuns) {
    checkPort(port);
    Path file = engine.dir(id).resolve("forwards").resolve(Integer.toString(port));
    try {
      Files.createDirectories(file.getParent());
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
              + engine.home().resolve(Supervisor.LOG_FILE));
    } catch (NoSuchFileException e) {
      throw Engine.unavailable(id, "it was destroyed");
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
  synchronized void start() {
    if (closed) {
      return;
    }
    if (server == null) {
      try {
        int wanted = port(engine.home());
        ServerSocket s = new ServerSocket();
        s.setReuseAddress(true);
        s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), wanted), 128);
        server = s;
        port = wanted;
        Thread.ofVirtual().name("port-proxy").start(() -> acceptLoop(s, this::serveHttp));
        log.say("port proxy listens on http://127.0.0.1:" + wanted + "/");
      } catch (IOException | RuntimeException e) {
        log.say("port proxy cannot listen yet: " + e.getMessage());
      }
    }
    if (forwardScanner == null) {
      forwardScanner = Thread.ofVirtual().name("port-forwards").start(this::scanForwardsLoop);
    }
  }

  int port() {
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
    try {
      client.setTcpNoDelay(true);
      client.setSoTimeout(HEAD_TIMEOUT_MILLIS);
      InputStream in = client.getInputStream();
      OutputStream out = client.getOutputStream();
      Head head;
      try {
        head = Head.read(in);
      } catch (BadRequest e) {
        respond(out, e.status, e.getMessage());
        return;
      }
      if (head == null) {
        return; // closed before a request
      }
      Target target;
      try {
        target = target(head);
      } catch (BadRequest e) {
        respond(out, e.status, e.getMessage());
        return;
      }
      client.setSoTimeout(0); // from here on idle connections (WebSockets) are legitimate
      SocketChannel upstream = connectForClient(target.id(), target.port(), out);
      if (upstream == null) {
        return;
      }
      open.add(upstream.socket());
      try {
        OutputStream up = upstream.socket().getOutputStream();
        up.write(head.forwarded());
        up.flush();
        pipe(client, upstream.socket(), target.id());
      } finally {
        open.remove(upstream.socket());
        closeQuietly(upstream.socket());
      }
    } catch (IOException e) {
      // the client or the server went away: nothing to answer
    } catch (RuntimeException e) {
      log.say("port proxy: " + e);
    }
  }

  private record Target(String id, int port) {}

  /** Checks the host, the sandbox and the token, and strips the token from the head. */
  private Target target(Head head) throws BadRequest {
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
    Path dir = engine.dir(id);
    if (!engine.isAlive(id)) {
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
    return new Target(id, sandboxPort);
  }

  private String hostForm() {
    return "expected {port}-{id}.localhost:" + port;
  }

  /**
   * Wakes the sandbox if it sleeps, stamps it active, and connects to its port; on failure answers
   * the client itself and returns null.
   */
  private SocketChannel connectForClient(String id, int sandboxPort, OutputStream out)
      throws IOException {
    String failure;
    try {
      return wakeAndConnect(id, sandboxPort);
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
    } catch (NetNamespace.NotRunning e) {
      failure = e.getMessage();
    } catch (IOException | WorkspaceException e) {
      failure = "cannot reach port " + sandboxPort + " of local:" + id + ": " + e.getMessage();
    }
    respond(out, 502, failure);
    return null;
  }

  private SocketChannel wakeAndConnect(String id, int sandboxPort) throws IOException {
    Path dir = engine.dir(id);
    Timers.touch(dir); // before waking: the supervisor must not suspend it again
    engine.wake(id);
    return NetNamespace.connect(engine, id, sandboxPort);
  }

  /** Copies bytes both ways until both sides are done; stamps the sandbox active meanwhile. */
  private void pipe(Socket client, Socket upstream, String id) throws IOException {
    Path dir = engine.dir(id);
    long[] lastTouch = {System.nanoTime()};
    Thread up =
        Thread.ofVirtual()
            .start(
                () -> {
                  try {
                    copy(client.getInputStream(), upstream.getOutputStream(), dir, lastTouch);
                    upstream.shutdownOutput();
                  } catch (IOException e) {
                    closeQuietly(upstream); // a broken half breaks the whole
                    closeQuietly(client);
                  }
                });
    try {
      copy(upstream.getInputStream(), client.getOutputStream(), dir, lastTouch);
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

  private static void copy(InputStream from, OutputStream to, Path dir, long[] lastTouch)
      throws IOException {
    byte[] buffer = new byte[BUFFER];
    int n;
    while ((n = from.read(buffer)) >= 0) {
      to.write(buffer, 0, n);
      to.flush();
      long now = System.nanoTime();
      if (now - lastTouch[0] > TOUCH_EVERY_NANOS) {
        lastTouch[0] = now;
        Timers.touch(dir);
      }
    }
  }

  private static void respond(OutputStream out, int status, String text) throws IOException {
    byte[] body = (text + "\n").getBytes(StandardCharsets.UTF_8);
    String head =
        "HTTP/1.1 "
            + status
            + " "
            + reason(status)
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

  /** The first request of a connection: its line, its headers, and the bytes read past it. */
  private static final class Head {
    private final String method;
    private String target;
    private final String version;
    private final List<String[]> headers; // name as sent, value
    private final byte[] rest;

    private Head(
        String method, String target, String version, List<String[]> headers, byte[] rest) {
      this.method = method;
      this.target = target;
      this.version = version;
      this.headers = headers;
      this.rest = rest;
    }

    /** Reads and parses a head; null if the connection closes before any byte. */
    static Head read(InputStream in) throws IOException, BadRequest {
      byte[] buf = new byte[8192];
      int len = 0;
      int end;
      while (true) {
        end = headEnd(buf, len);
        if (end >= 0) {
          break;
        }
        if (len == MAX_HEAD) {
          throw new BadRequest(431, "request head larger than " + MAX_HEAD + " bytes");
        }
        if (len == buf.length) {
          buf = java.util.Arrays.copyOf(buf, Math.min(buf.length * 2, MAX_HEAD));
        }
        int n;
        try {
          n = in.read(buf, len, buf.length - len);
        } catch (SocketTimeoutException e) {
          throw new BadRequest(
              408, "no complete request head within " + HEAD_TIMEOUT_MILLIS + " ms");
        }
        if (n < 0) {
          if (len == 0) {
            return null;
          }
          throw new BadRequest(400, "connection closed in the request head");
        }
        len += n;
      }
      String text = new String(buf, 0, end, StandardCharsets.ISO_8859_1);
      String[] lines = text.split("\r\n", -1);
      String[] requestLine = lines[0].split(" ", -1);
      if (requestLine.length != 3
          || !TOKEN_CHARS.matcher(requestLine[0]).matches()
          || !VERSION.matcher(requestLine[2]).matches()) {
        throw new BadRequest(400, "bad request line: expected METHOD /path HTTP/1.1");
      }
      if (!requestLine[1].startsWith("/")
          || requestLine[1].chars().anyMatch(c -> c <= 0x20 || c == 0x7f)) {
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
      byte[] rest = java.util.Arrays.copyOfRange(buf, end + 4, len);
      return new Head(requestLine[0], requestLine[1], requestLine[2], headers, rest);
    }

    /** The index of the {@code \r\n\r\n} ending the head, or -1. */
    private static int headEnd(byte[] buf, int len) {
      for (int i = 0; i + 3 < len; i++) {
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
          return i;
        }
      }
      return -1;
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

    /** The head as forwarded, followed by the bytes read past it. */
    byte[] forwarded() {
      StringBuilder b = new StringBuilder();
      b.append(method).append(' ').append(target).append(' ').append(version).append("\r\n");
      for (String[] h : headers) {
        b.append(h[0]).append(": ").append(h[1]).append("\r\n");
      }
      b.append("\r\n");
      byte[] head = b.toString().getBytes(StandardCharsets.ISO_8859_1);
      byte[] all = java.util.Arrays.copyOf(head, head.length + rest.length);
      System.arraycopy(rest, 0, all, head.length, rest.length);
      return all;
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
              if (!forwards.containsKey(key)) {
                bindForward(id, Integer.parseInt(name), f, key);
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
      if (!engine.isAlive(id)) {
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
