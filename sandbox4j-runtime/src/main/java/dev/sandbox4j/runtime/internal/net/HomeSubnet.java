package dev.sandbox4j.runtime.internal.net;

import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * The {@code /16} in {@code 10.64.0.0/10} one home claims for its sandboxes, and the addresses in
 * it: the gateway {@code 10.X.0.1} on the host's {@code lo}, and the slots its sandboxes take (slot
 * {@code n}'s address is {@code 10.X.0.0 + n}). The claim is {@code $home/network/subnet}, backed
 * by the host-wide file {@code /run/sandbox4j/subnets/<subnet>} naming the home, so two homes on
 * one host never share one.
 *
 * <p>Thread-safe: the subnet is claimed once, under this object's lock.
 */
final class HomeSubnet {
  static final int FIRST_SLOT = 2;
  static final int LAST_SLOT = 65_000;
  private static final Path CLAIMS = Path.of("/run/sandbox4j/subnets");

  private final Path home;
  private final Path dir;
  private final String hash;
  private volatile int subnet = -1;
  private volatile boolean gatewaySeen;

  /** The subnet of {@code home}, whose networking keeps its files in {@code dir}. */
  HomeSubnet(Path home, Path dir, String hash) {
    this.home = home;
    this.dir = dir;
    this.hash = hash;
  }

  /**
   * Whether the gateway address is on the host's loopback interface (not on a dummy interface of
   * its own: kernels without the dummy module exist, a Firecracker guest's for one).
   */
  boolean hasGateway() {
    if (gatewaySeen) {
      return true; // only a reboot removes it, and a reboot ends this JVM
    }
    try {
      java.net.NetworkInterface lo = java.net.NetworkInterface.getByName("lo");
      InetAddress g = Networks.parse(gateway());
      gatewaySeen = lo != null && java.util.Collections.list(lo.getInetAddresses()).contains(g);
      return gatewaySeen;
    } catch (java.net.SocketException e) {
      return false;
    }
  }

  /** The second octet of this home's {@code 10.X.0.0/16}, claimed on first use. */
  int subnet() {
    int s = subnet;
    if (s >= 0) {
      return s;
    }
    synchronized (this) {
      if (subnet < 0) {
        subnet = claimSubnet();
      }
      return subnet;
    }
  }

  private int claimSubnet() {
    try {
      PrivateFiles.createPrivateDirectories(dir);
      Path saved = dir.resolve("subnet");
      int start;
      if (Files.exists(saved)) {
        start = Integer.parseInt(Files.readString(saved).strip());
      } else {
        start = 64 + (Integer.parseInt(hash, 16) % 64);
      }
      Files.createDirectories(CLAIMS);
      String me = home.toAbsolutePath().normalize().toString();
      for (int i = 0; i < 64; i++) {
        int candidate = 64 + ((start - 64 + i) % 64);
        Path claim = CLAIMS.resolve("10." + candidate);
        try {
          Files.writeString(claim, me, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        } catch (FileAlreadyExistsException e) {
          String owner = Files.readString(claim).strip();
          if (!owner.equals(me)) {
            if (Files.isDirectory(Path.of(owner)) || owner.isEmpty()) {
              continue; // another home's
            }
            Files.writeString(claim, me); // its home is gone
            dropTableOf(Path.of(owner));
          }
        }
        if (!Files.exists(saved) || start != candidate) {
          AtomicFiles.write(saved, (candidate + "\n").getBytes(StandardCharsets.UTF_8));
        }
        return candidate;
      }
      throw new WorkspaceException("no free /16 in 10.64.0.0/10 for this home's sandboxes");
    } catch (IOException | NumberFormatException e) {
      throw new WorkspaceException("cannot choose the sandboxes' subnet: " + e, e);
    }
  }

  /**
   * Removes the nftables table a deleted home left behind (a test's temporary home, say): nobody
   * else ever would, since its gc went with the directory. Its veths went with its sandboxes'
   * namespaces; the gateway address on {@code lo} is the new claimant's too.
   */
  private static void dropTableOf(Path goneHome) {
    try {
      Nftables.run("delete table inet " + new HostNames(goneHome).table());
    } catch (RuntimeException e) {
      // no such table (its home never had a sandbox with a network, or it was removed already)
    }
  }

  String gateway() {
    return "10." + subnet() + ".0.1";
  }

  String address(int slot) {
    return "10." + subnet() + "." + (slot >> 8) + "." + (slot & 0xff);
  }

  /** The slot of a sandbox address of this home, or -1. */
  int slotOf(InetAddress a) {
    if (!(a instanceof Inet4Address)) {
      return -1;
    }
    byte[] b = a.getAddress();
    if (b[0] != 10 || (b[1] & 0xff) != subnet()) {
      return -1;
    }
    int slot = ((b[2] & 0xff) << 8) | (b[3] & 0xff);
    return slot >= FIRST_SLOT && slot <= LAST_SLOT ? slot : -1;
  }

  /** Whether {@code a} is in this home's sandbox subnet (a sandbox, or the gateway). */
  boolean isSandboxSubnet(InetAddress a) {
    return a instanceof Inet4Address
        && a.getAddress()[0] == 10
        && (a.getAddress()[1] & 0xff) == subnet();
  }

  /**
   * Takes a free slot for sandbox {@code id} ({@code $home/network/slots/<n>}, created exclusively,
   * holding its id) and returns it.
   */
  int claimSlot(String id) throws IOException {
    Path slots = PrivateFiles.createPrivateDirectories(dir.resolve("slots"));
    int start = FIRST_SLOT + Math.floorMod(id.hashCode(), LAST_SLOT - FIRST_SLOT);
    for (int i = 0; i <= LAST_SLOT - FIRST_SLOT; i++) {
      int slot = FIRST_SLOT + Math.floorMod(start - FIRST_SLOT + i, LAST_SLOT - FIRST_SLOT + 1);
      if ((slot & 0xff) == 0 || (slot & 0xff) == 0xff || slot == 1) {
        continue;
      }
      try {
        Files.writeString(slots.resolve(Integer.toString(slot)), id, StandardOpenOption.CREATE_NEW);
      } catch (FileAlreadyExistsException taken) {
        continue;
      }
      return slot;
    }
    throw new WorkspaceException("no free sandbox address left in " + address(0) + "/16");
  }

  /** Frees sandbox {@code id}'s slot, if it still holds it. */
  void releaseSlot(int slot, String id) {
    Path file = dir.resolve("slots").resolve(Integer.toString(slot));
    try {
      if (Files.exists(file) && Files.readString(file).strip().equals(id)) {
        Files.deleteIfExists(file);
      }
    } catch (IOException e) {
      // gc releases it
    }
  }
}
