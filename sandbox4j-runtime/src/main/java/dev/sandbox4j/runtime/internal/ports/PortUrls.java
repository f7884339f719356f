package dev.sandbox4j.runtime.internal.ports;

import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Optional;
import java.util.UUID;
import java.util.regex.Pattern;

/**
 * Where the port proxy listens and the URLs it serves: the proxy's port for a home, kept in {@code
 * network/proxy-port} ({@value #DEFAULT_PORT} for the default home, a free port for any other), and
 * {@code http://{port}-{id}.localhost:{proxyPort}/}. Static: every JVM of a home agrees through the
 * file.
 */
public final class PortUrls {
  static final int DEFAULT_PORT = 7780;
  static final Pattern NUMBER = Pattern.compile("[1-9][0-9]{0,4}");

  private PortUrls() {}

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
}
