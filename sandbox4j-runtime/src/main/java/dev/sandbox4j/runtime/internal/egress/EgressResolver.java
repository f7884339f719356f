package dev.sandbox4j.runtime.internal.egress;

import dev.sandbox4j.runtime.internal.addr.HostNames;
import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * How the egress proxy turns a host name into addresses: first a hosts file in /etc/hosts format
 * (the engine home's {@code network/hosts}; re-read when it changes), then the system resolver. The
 * proxy resolves names itself, never the sandbox, so what it checks is what it connects to.
 */
final class EgressResolver {
  /** A hosts file larger than this is ignored as a whole (a hostile or broken file). */
  static final long MAX_HOSTS_FILE = 4L * 1024 * 1024;

  private final Path hostsFile;

  /** Guarded by {@code this}. */
  private FileTime hostsRead;

  private long hostsSize = -1;
  private Map<String, List<InetAddress>> hosts = Map.of();

  public EgressResolver(Path hostsFile) {
    this.hostsFile = hostsFile;
  }

  /**
   * The addresses of {@code host} (a validated, normalized name), hosts file first.
   *
   * @throws UnknownHostException with the reason, if neither knows the name
   */
  public List<InetAddress> resolve(String host) throws UnknownHostException {
    List<InetAddress> fromFile = hostsFile().get(host);
    if (fromFile != null) {
      return fromFile;
    }
    return List.of(InetAddress.getAllByName(host));
  }

  private synchronized Map<String, List<InetAddress>> hostsFile() {
    if (hostsFile == null) {
      return Map.of();
    }
    try {
      FileTime modified = Files.getLastModifiedTime(hostsFile);
      long size = Files.size(hostsFile);
      if (modified.equals(hostsRead) && size == hostsSize) {
        return hosts;
      }
      hosts =
          size > MAX_HOSTS_FILE
              ? Map.of()
              : parse(Files.readString(hostsFile, StandardCharsets.ISO_8859_1));
      hostsRead = modified;
      hostsSize = size;
    } catch (NoSuchFileException e) {
      hosts = Map.of();
      hostsRead = null;
      hostsSize = -1;
    } catch (IOException e) {
      // Keep the last good copy: a file being replaced is renamed atomically, so this is rare.
    }
    return hosts;
  }

  static Map<String, List<InetAddress>> parse(String text) {
    Map<String, List<InetAddress>> out = new HashMap<>();
    for (String line : text.split("\n")) {
      int hash = line.indexOf('#');
      String[] fields = (hash < 0 ? line : line.substring(0, hash)).strip().split("\\s+");
      if (fields.length < 2) {
        continue;
      }
      InetAddress address;
      try {
        address = InetAddress.ofLiteral(fields[0]);
      } catch (IllegalArgumentException e) {
        continue;
      }
      for (int i = 1; i < fields.length; i++) {
        if (HostNames.isValidHostName(fields[i])) {
          out.computeIfAbsent(HostNames.normalizeHost(fields[i]), k -> new ArrayList<>())
              .add(address);
        }
      }
    }
    out.replaceAll((k, v) -> List.copyOf(v));
    return Map.copyOf(out);
  }
}
