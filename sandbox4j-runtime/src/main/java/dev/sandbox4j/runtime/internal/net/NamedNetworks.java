package dev.sandbox4j.runtime.internal.net;

import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The named networks of one home's sandboxes: their names, their members, and each member's {@code
 * hosts} file (bind-mounted read-only as its {@code /etc/hosts}), which lists every member of its
 * networks by id and is rewritten in place when members come and go. Who may reach whom is {@link
 * NftablesRules}'.
 */
final class NamedNetworks {
  static final String HOSTS_FILE = "hosts";
  private static final Pattern NETWORK_NAME = Pattern.compile("[a-z0-9][a-z0-9-]{0,31}");

  private final Path home;
  private final Path dir;
  private final HomeSubnet subnet;

  NamedNetworks(Path home, Path dir, HomeSubnet subnet) {
    this.home = home;
    this.dir = dir;
    this.subnet = subnet;
  }

  /** A network name as the API takes it: 1 to 32 of a-z, 0-9 and '-', not starting with '-'. */
  static String checkNetworkName(String name) {
    if (name == null || !NETWORK_NAME.matcher(name).matches()) {
      throw new IllegalArgumentException(
          "invalid network name '"
              + name
              + "': 1 to 32 of a-z, 0-9 and '-', starting with a letter or digit");
    }
    return name;
  }

  /** The sandboxes on {@code network}, by id, with their addresses. */
  private Map<String, String> members(String network) {
    Map<String, String> members = new java.util.TreeMap<>();
    Path sandboxes = home.resolve("sandboxes");
    if (!Files.isDirectory(sandboxes)) {
      return members;
    }
    try (Stream<Path> dirs = Files.list(sandboxes)) {
      for (Path d : dirs.toList()) {
        String id = d.getFileName().toString();
        if (!SandboxHome.isId(id)) {
          continue;
        }
        try {
          Optional<NetworkFiles.Saved> s = NetworkFiles.saved(d);
          if (s.isPresent() && s.get().networks().contains(network)) {
            members.put(id, subnet.address(s.get().slot()));
          }
        } catch (WorkspaceException e) {
          // being written
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot list the members of network " + network + ": " + e, e);
    }
    return members;
  }

  /**
   * Rewrites the {@code hosts} file of every member of {@code network} (in place: it is
   * bind-mounted into them), leaving out {@code leaving}. Serialized per home.
   */
  void refreshHosts(String network, String leaving) {
    try {
      PrivateFiles.createPrivateDirectories(dir);
      try (FileLock lock = FileLock.acquire(dir.resolve("hosts.lock"))) {
        Map<String, String> members = members(network);
        if (leaving != null) {
          members.remove(leaving);
        }
        for (String id : members.keySet()) {
          writeHosts(home.resolve("sandboxes").resolve(id), id);
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot update the hosts of network " + network + ": " + e, e);
    }
  }

  /** Writes sandbox {@code id}'s {@code hosts}: itself, then every member of its networks. */
  void writeHosts(Path sandboxDir, String id) throws IOException {
    Optional<NetworkFiles.Saved> saved = NetworkFiles.saved(sandboxDir);
    if (saved.isEmpty() || saved.get().networks().isEmpty()) {
      return;
    }
    StringBuilder s = new StringBuilder();
    s.append("127.0.0.1\tlocalhost\n127.0.1.1\t").append(id).append('\n');
    s.append("::1\tlocalhost ip6-localhost ip6-loopback\n");
    Map<String, String> peers = new java.util.TreeMap<>();
    for (String network : saved.get().networks()) {
      peers.putAll(members(network));
    }
    peers.remove(id);
    peers.forEach((peer, address) -> s.append(address).append('\t').append(peer).append('\n'));
    Path file = sandboxDir.resolve(HOSTS_FILE);
    // In place, never renamed over: a bind mount holds on to the file it was made of.
    Files.writeString(
        file,
        s.toString(),
        StandardOpenOption.CREATE,
        StandardOpenOption.WRITE,
        StandardOpenOption.TRUNCATE_EXISTING);
    Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));
  }
}
