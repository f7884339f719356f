package dev.sandbox4j.runtime.internal.ports;

import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Instant;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/**
 * Raw TCP forwards from a host port on 127.0.0.1 to a sandbox port. Asked for through files: a
 * caller creates {@code forwards/<port>} in the sandbox's directory ({@link #forward}); the
 * supervisor's proxy scans for them, binds a host port for each and writes its number into the
 * file; a forward ends when its file or its sandbox goes.
 *
 * <p>The scan (every 100 ms) looks only at the sandboxes known to have asked for a forward, so that
 * its work does not grow with the number of sandboxes (issue 18). It lists every sandbox directory
 * only when the caller's stamp {@value #ASKED} in the home has changed since the last look ({@link
 * #forward} touches it after writing its file), and every {@link #FULL_SCAN_NANOS} in any case: for
 * a caller killed between the two writes, or one of a version that wrote no stamp.
 */
public final class PortForwards {
  private final PortTargets targets;
  private final Path sandboxes;
  private final PortProxy.Log log;
  private final Connections open;
  private final Upstreams upstreams;
  private final Map<String, Forward> forwards = new ConcurrentHashMap<>();
  private volatile boolean closed;
  private Thread scanner;

  /** The home's stamp file whose modification time says a forward was asked for. */
  static final String ASKED = "forwards.asked";

  /** How often every sandbox directory is listed even though the stamp did not change. */
  static final long FULL_SCAN_NANOS = 5_000_000_000L;

  /** Ids of the sandboxes that have a {@code forwards/} directory, as of the last scans. */
  private final Set<String> asking = new HashSet<>();

  private Object askedSeen;
  private long lastFullScan;
  private boolean scannedAll;

  PortForwards(PortTargets targets, PortProxy.Log log, Connections open, Upstreams upstreams) {
    this.targets = targets;
    this.sandboxes = targets.sandboxes();
    this.log = log;
    this.open = open;
    this.upstreams = upstreams;
  }

  /**
   * Asks the proxy for a forward of sandbox port {@code port} and waits until it is bound; returns
   * the host port on 127.0.0.1. The caller has checked the sandbox exists and started the
   * supervisor.
   */
  public static int forward(PortTargets targets, String id, int port, boolean supervisorRuns) {
    PortUrls.checkPort(port);
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
      stampAsked(targets.home());
      long end = System.nanoTime() + 20_000_000_000L;
      while (System.nanoTime() < end) {
        String text = Files.readString(file).strip();
        if (PortUrls.NUMBER.matcher(text).matches()) {
          return Integer.parseInt(text);
        }
        Thread.sleep(20);
      }
      throw new WorkspaceException(
          "the supervisor did not bind a forward of port "
              + port
              + " of "
              + targets.ref(id)
              + " within 20 s: see "
              + targets.home().resolve(SandboxHome.SUPERVISOR_LOG));
    } catch (NoSuchFileException e) {
      throw targets.unavailable(id, "it was destroyed");
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot forward port " + port + " of " + targets.ref(id) + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CancellationException("interrupted");
    }
  }

  /** Starts scanning for forwards asked for, unless started. */
  synchronized void start() {
    if (scanner == null && !closed) {
      scanner = Thread.ofVirtual().name("port-forwards").start(this::scanForwardsLoop);
    }
  }

  /** Stops scanning and closes every forward's listener. */
  synchronized void close() {
    closed = true;
    if (scanner != null) {
      scanner.interrupt();
    }
    forwards.values().forEach(Forward::close);
    forwards.clear();
  }

  /** A host port on 127.0.0.1 forwarding to one sandbox port. */
  private record Forward(String id, int sandboxPort, ServerSocket listener) {
    void close() {
      Pipes.closeQuietly(listener);
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

  /**
   * Tells the scanner of {@code home} to list every sandbox at its next scan: its stamp's time
   * changes (the file's content is nothing). A failure only delays the forward to the next full
   * scan.
   */
  private static void stampAsked(Path home) {
    Path stamp = home.resolve(ASKED);
    try {
      if (!Files.exists(stamp)) {
        PrivateFiles.createPrivateFile(stamp); // O_CREAT without O_EXCL: a racing caller is fine
      }
      Files.setLastModifiedTime(
          stamp, java.nio.file.attribute.FileTime.fromMillis(System.currentTimeMillis()));
    } catch (IOException e) {
      // the next full scan finds the request
    }
  }

  /** The stamp's identity and time now; null if there is none. */
  private Object askedNow() {
    try {
      var a =
          Files.readAttributes(
              targets.home().resolve(ASKED), java.nio.file.attribute.BasicFileAttributes.class);
      return List.of(String.valueOf(a.fileKey()), a.lastModifiedTime());
    } catch (IOException e) {
      return null;
    }
  }

  /**
   * The sandbox directories to look in: every one when the stamp changed or a full scan is due,
   * else those that had asked for a forward.
   */
  private List<Path> dirsToScan() {
    Object stamp = askedNow();
    long now = System.nanoTime();
    if (scannedAll
        && now - lastFullScan < FULL_SCAN_NANOS
        && java.util.Objects.equals(stamp, askedSeen)) {
      return asking.stream().map(sandboxes::resolve).toList();
    }
    scannedAll = true;
    lastFullScan = now;
    askedSeen = stamp;
    asking.clear();
    if (!Files.isDirectory(sandboxes)) {
      return List.of();
    }
    try (Stream<Path> dirs = Files.list(sandboxes)) {
      return dirs.toList();
    } catch (IOException e) {
      return List.of(); // nothing to scan
    }
  }

  /** Binds the forwards asked for, and closes those whose sandbox or request is gone. */
  void scanForwards() {
    Set<String> wanted = new HashSet<>();
    for (Path dir : dirsToScan()) {
      Path asked = dir.resolve("forwards");
      if (!Files.isDirectory(asked) || dir.getFileName().toString().startsWith(".")) {
        asking.remove(dir.getFileName().toString());
        continue;
      }
      String id = dir.getFileName().toString();
      asking.add(id);
      try (Stream<Path> files = Files.list(asked)) {
        for (Path f : files.toList()) {
          String name = f.getFileName().toString();
          if (!PortUrls.NUMBER.matcher(name).matches() || Integer.parseInt(name) > 65535) {
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
    for (String key : List.copyOf(forwards.keySet())) {
      if (!wanted.contains(key)) {
        Forward gone = forwards.remove(key);
        if (gone != null) {
          gone.close();
          log.say(
              "closed the forward of port " + gone.sandboxPort() + " of " + targets.ref(gone.id()));
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
                loopback,
                PortUrls.NUMBER.matcher(recorded).matches() ? Integer.parseInt(recorded) : 0));
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
          .start(() -> open.acceptLoop(bound, client -> serveForward(client, id, sandboxPort)));
      log.say(
          "forwarding 127.0.0.1:"
              + listener.getLocalPort()
              + " to port "
              + sandboxPort
              + " of "
              + targets.ref(id)
              + " ("
              + Instant.now()
              + ")");
    } catch (NoSuchFileException e) {
      // destroyed meanwhile
    } catch (IOException e) {
      log.say("cannot forward port " + sandboxPort + " of " + targets.ref(id) + ": " + e);
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
        upstream = upstreams.wakeAndConnect(id, sandboxPort);
      } catch (IOException | WorkspaceException e) {
        return; // a raw stream has no way to say why: the client sees the connection close
      }
      open.add(upstream.socket());
      try {
        Pipes.pipe(client, upstream.socket(), new Activity(targets, id));
      } finally {
        open.remove(upstream.socket());
        Pipes.closeQuietly(upstream.socket());
      }
    } catch (IOException e) {
      // gone
    }
  }
}
