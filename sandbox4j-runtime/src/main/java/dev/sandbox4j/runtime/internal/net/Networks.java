package dev.sandbox4j.runtime.internal.net;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.runtime.internal.addr.Cidr;
import dev.sandbox4j.runtime.internal.addr.PublicAddresses;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Stream;

/**
 * The networking of one state directory's sandboxes: each sandbox's own network namespace, the
 * routed veth pair that is its only way out, its address, and the nftables rules that decide where
 * its packets may go (its {@link EgressPolicy} and its named networks).
 *
 * <p><b>Layout.</b> Each home claims a {@code /16} in {@code 10.64.0.0/10} ({@code
 * $home/network/subnet}; the claim is the file {@code /run/sandbox4j/subnets/<subnet>} naming the
 * home, so two homes on one host never share one). Its gateway address {@code 10.X.0.1} sits on the
 * host's {@code lo} (a /32: it routes nothing there): it is where the sandboxes' default route
 * points, and where the egress proxy listens ({@value #PROXY_PORT}). A sandbox takes a slot ({@code
 * $home/network/slots/<n>}, created exclusively, holding its id): its address is {@code 10.X.0.0 +
 * n}/32, its host-side interface {@code s4<hash>-<n>}, the name of its network namespace {@code
 * s4j-<hash>-<id>} (under {@code /run/netns}, given with {@code ip netns attach} once the runtime
 * has made the namespace). Host-global names carry a hash of the home, so homes never collide. The
 * namespace belongs to the sandbox's user namespace (CRIU needs that); root in the sandbox still
 * cannot change its addresses or routes (no CAP_NET_ADMIN), and nothing relies on that either:
 * every rule sits on the host and a forged source address is dropped.
 *
 * <p><b>Rules.</b> One nftables table per home, {@code inet s4j_<hash>}: a forward chain sends each
 * sandbox's packets (by input interface) to its own chain {@code sb_<id>}, which accepts replies,
 * then the members of its networks, then (mode ALL) the host's nameservers, then rejects every
 * range no policy opens ({@link PublicAddresses#NEVER_OPEN}: loopback, link-local, the engine's own
 * {@code 10.64.0.0/10} with every home's sandboxes, ...), then accepts its policy's CIDRs, then
 * (mode ALL) everything but the private ranges, and rejects the rest at once (TCP reset, or ICMP
 * administratively prohibited); the never-open rejects come before the CIDRs, so no rule, however
 * wide or however it got into the policy, opens them. An input chain rejects every packet a sandbox
 * sends to the host itself (any of its addresses, loopback included: packets for 127/8 arriving on
 * a veth are martians the kernel drops anyway), except TCP to the proxy port on the gateway. A
 * postrouting chain masquerades what leaves. Setting a policy rewrites the sandbox's chain in one
 * transaction; existing connections are kept.
 *
 * <p><b>Files.</b> {@code $dir/network.json} (slot and networks) and {@code $dir/egress.json} (the
 * policy; mode 0600, since header values are secrets) in the sandbox's directory. A sandbox on a
 * named network gets its {@code /etc/hosts} bind-mounted read-only from {@code $dir/hosts}, which
 * lists every member of its networks by id and is rewritten in place when members come and go.
 */
public final class Networks {
  public static final int PROXY_PORT = 3128;
  public static final String NETWORK_FILE = "network.json";
  static final String EGRESS_FILE = "egress.json";
  static final String HOSTS_FILE = "hosts";

  private static final Path NETNS_DIR = Path.of("/run/netns");
  private static final Path CLAIMS = Path.of("/run/sandbox4j/subnets");
  private static final int FIRST_SLOT = 2;
  private static final int LAST_SLOT = 65_000;
  private static final java.util.regex.Pattern NETWORK_NAME =
      java.util.regex.Pattern.compile("[a-z0-9][a-z0-9-]{0,31}");

  /**
   * Not public: where sandboxes must not go in mode ALL ({@link PublicAddresses#NON_PUBLIC_V4}).
   */
  static final List<String> PRIVATE_V4 = PublicAddresses.NON_PUBLIC_V4;

  private final Path home;
  private final Path dir;
  private final String hash;
  private volatile int subnet = -1;
  private volatile boolean gatewaySeen;
  private volatile boolean forwarding;
  private volatile boolean baseWritten;
  private volatile boolean netnsDirShared;
  private static final System.Logger LOG = System.getLogger(Networks.class.getName());

  public Networks(Path home) {
    this.home = home;
    this.dir = home.resolve("network");
    this.hash = hashOf(home);
  }

  /** A network name as the API takes it: 1 to 32 of a-z, 0-9 and '-', not starting with '-'. */
  public static String checkNetworkName(String name) {
    if (name == null || !NETWORK_NAME.matcher(name).matches()) {
      throw new IllegalArgumentException(
          "invalid network name '"
              + name
              + "': 1 to 32 of a-z, 0-9 and '-', starting with a letter or digit");
    }
    return name;
  }

  /** What a sandbox's network is made of. */
  public record Settings(EgressPolicy egress, List<String> networks) {
    public Settings {
      java.util.Objects.requireNonNull(egress, "egress");
      networks = List.copyOf(new TreeSet<>(networks));
    }

    static final Settings DEFAULT = new Settings(EgressPolicy.all(), List.of());
  }

  /** {@code network.json}. */
  record Saved(int slot, List<String> networks) {
    Saved {
      networks = networks == null ? List.of() : List.copyOf(networks);
    }
  }

  private static final com.fasterxml.jackson.databind.ObjectMapper JSON =
      new com.fasterxml.jackson.databind.ObjectMapper()
          .disable(
              com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  static String hashOf(Path home) {
    try {
      byte[] d =
          MessageDigest.getInstance("SHA-256")
              .digest(
                  home.toAbsolutePath().normalize().toString().getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(d, 0, 3).substring(0, 5);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  public String table() {
    return "s4j_" + hash;
  }

  public String netnsName(String id) {
    return "s4j-" + hash + "-" + id;
  }

  Path netnsPath(String id) {
    return NETNS_DIR.resolve(netnsName(id));
  }

  public String vethName(int slot) {
    return "s4" + hash + "-" + Integer.toString(slot, 36);
  }

  /**
   * Whether the gateway address is on the host's loopback interface (not on a dummy interface of
   * its own: kernels without the dummy module exist, a Firecracker guest's for one).
   */
  public boolean hasGateway() {
    if (gatewaySeen) {
      return true; // only a reboot removes it, and a reboot ends this JVM
    }
    try {
      java.net.NetworkInterface lo = java.net.NetworkInterface.getByName("lo");
      InetAddress g = parse(gateway());
      gatewaySeen = lo != null && java.util.Collections.list(lo.getInetAddresses()).contains(g);
      return gatewaySeen;
    } catch (java.net.SocketException e) {
      return false;
    }
  }

  // ---- addresses ----------------------------------------------------------------------------

  /** The second octet of this home's {@code 10.X.0.0/16}, claimed on first use. */
  public int subnet() {
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
      Nftables.run("delete table inet s4j_" + hashOf(goneHome));
    } catch (RuntimeException e) {
      // no such table (its home never had a sandbox with a network, or it was removed already)
    }
  }

  public String gateway() {
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

  // ---- host prerequisites -------------------------------------------------------------------

  /** The Debian packages sandbox networking needs that are missing: nftables, iproute2. */
  public static List<String> missingPackages() {
    List<String> missing = new ArrayList<>();
    if (Nftables.unavailable().isPresent()) {
      missing.add("nftables");
    }
    if (!HostCommand.onPath("ip")) {
      missing.add("iproute2");
    }
    return missing;
  }

  /** {@code doctor}'s check: the tools sandbox networking uses, and the kernel's veth support. */
  public static HostCheck check() {
    List<String> missing = missingPackages();
    if (!missing.isEmpty()) {
      return HostCheck.missing(
          "networking",
          String.join(", ", missing) + " missing: sandboxes cannot get their network",
          "apt-get install -y --no-install-recommends " + String.join(" ", missing));
    }
    return HostCheck.ok(
        "networking",
        "nftables and iproute2 installed (each sandbox: own network namespace, veth, nftables"
            + " rules; IPv4 forwarding is switched on with the first sandbox)");
  }

  /** Whether {@code a} is in this home's sandbox subnet (a sandbox, or the gateway). */
  public boolean isSandboxSubnet(InetAddress a) {
    return a instanceof Inet4Address
        && a.getAddress()[0] == 10
        && (a.getAddress()[1] & 0xff) == subnet();
  }

  // ---- a sandbox's settings -----------------------------------------------------------------

  /**
   * Gives new sandbox {@code id} (its directory {@code sandboxDir}, lock held) a slot and writes
   * its settings. Nothing on the host changes until {@link #up}.
   */
  public void assign(Path sandboxDir, String id, Settings settings) throws IOException {
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
      // Not synced here: the sandbox's RUNNING record, written durably later, is the one durable
      // step of a create, and on ext4 (data=ordered) its commit carries these files' data too.
      writePolicy(sandboxDir, settings.egress(), false);
      Files.write(
          sandboxDir.resolve(NETWORK_FILE),
          JSON.writeValueAsBytes(new Saved(slot, settings.networks())),
          StandardOpenOption.CREATE_NEW);
      return;
    }
    throw new WorkspaceException("no free sandbox address left in " + address(0) + "/16");
  }

  /** Its settings, or empty for a sandbox made before sandboxes had networks (loopback only). */
  public static Optional<Saved> saved(Path sandboxDir) {
    try {
      return Optional.of(
          JSON.readValue(Files.readAllBytes(sandboxDir.resolve(NETWORK_FILE)), Saved.class));
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new WorkspaceException("cannot read " + sandboxDir.resolve(NETWORK_FILE) + ": " + e, e);
    }
  }

  public static EgressPolicy policy(Path sandboxDir) {
    try {
      return EgressPolicy.fromJson(Files.readString(sandboxDir.resolve(EGRESS_FILE)));
    } catch (NoSuchFileException e) {
      return EgressPolicy.none();
    } catch (IOException e) {
      throw new WorkspaceException("cannot read " + sandboxDir.resolve(EGRESS_FILE) + ": " + e, e);
    }
  }

  private static void writePolicy(Path sandboxDir, EgressPolicy policy, boolean durably)
      throws IOException {
    // Root-only from its first byte: it holds the header values, which are secrets.
    Path temp = sandboxDir.resolve("." + EGRESS_FILE + ".new");
    Files.deleteIfExists(temp);
    Files.createFile(
        temp, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    Files.writeString(temp, policy.toJson());
    if (durably) {
      try (var ch = java.nio.channels.FileChannel.open(temp, StandardOpenOption.WRITE)) {
        ch.force(true);
      }
    }
    Files.move(
        temp,
        sandboxDir.resolve(EGRESS_FILE),
        java.nio.file.StandardCopyOption.ATOMIC_MOVE,
        java.nio.file.StandardCopyOption.REPLACE_EXISTING);
  }

  /** The sandbox a proxy client's source address belongs to, and its policy now. */
  public Optional<EgressPolicy> policyOf(InetAddress source) {
    int slot = slotOf(source);
    if (slot < 0) {
      return Optional.empty();
    }
    try {
      String id = Files.readString(dir.resolve("slots").resolve(Integer.toString(slot))).strip();
      Path sandboxDir = home.resolve("sandboxes").resolve(id);
      Optional<Saved> saved = SandboxHome.isId(id) ? saved(sandboxDir) : Optional.empty();
      if (saved.isEmpty() || saved.get().slot() != slot) {
        return Optional.empty();
      }
      return Optional.of(policy(sandboxDir));
    } catch (IOException | WorkspaceException e) {
      return Optional.empty();
    }
  }

  /**
   * The variables that send a sandbox's HTTP clients through the egress proxy: for a policy whose
   * domain rules or header rules need it; none otherwise.
   */
  public Map<String, String> proxyEnv(Path sandboxDir) {
    if (saved(sandboxDir).isEmpty()) {
      return Map.of();
    }
    EgressPolicy p = policy(sandboxDir);
    if (!usesProxy(p)) {
      return Map.of();
    }
    String url = "http://" + gateway() + ":" + PROXY_PORT;
    List<String> direct = new ArrayList<>(List.of("localhost", "127.0.0.1", "::1"));
    direct.addAll(p.cidrs());
    Map<String, String> env = new LinkedHashMap<>();
    for (String name : List.of("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")) {
      env.put(name, url);
    }
    env.put("NO_PROXY", String.join(",", direct));
    env.put("no_proxy", String.join(",", direct));
    if (p.interceptTls()) {
      // Node.js and Python's requests bring their own CA lists: point them at the proxy's CA too.
      env.put("NODE_EXTRA_CA_CERTS", CA_FILE);
      env.put("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt");
    }
    return env;
  }

  /** Where an intercepting policy's proxy CA is installed in a sandbox. */
  public static final String CA_FILE =
      "/usr/local/share/ca-certificates/sandbox4j-egress-proxy.crt";

  /** Whether the policy needs the egress proxy: domain rules, or headers to inject. */
  static boolean usesProxy(EgressPolicy p) {
    return (p.mode() == EgressPolicy.Mode.ALLOWLIST && !p.domains().isEmpty())
        || !p.headerRules().isEmpty();
  }

  // ---- bringing it up -----------------------------------------------------------------------

  /**
   * Starts writing sandbox {@code id}'s rules, in the background (they are keyed by its veth's
   * name, so they may precede it), or returns empty for a sandbox without network settings. The
   * runtime starts the container meanwhile; {@link #attach} then gives it its veth.
   */
  public Optional<CompletableFuture<Void>> rules(Path sandboxDir, String id) {
    Optional<Saved> saved = saved(sandboxDir);
    if (saved.isEmpty()) {
      return Optional.empty();
    }
    EgressPolicy policy = policy(sandboxDir);
    String script = sandboxRules(id, saved.get().slot(), policy, saved.get());
    return Optional.of(CompletableFuture.runAsync(() -> runWithBase(script), VIRTUAL));
  }

  /**
   * Runs {@code script} after the home's base rules, which are written (flushed and filled anew,
   * work for the kernel) only the first time in this JVM, or again when the table has gone.
   */
  private void runWithBase(String script) {
    if (baseWritten) {
      try {
        Nftables.run(script);
        return;
      } catch (WorkspaceException tableGone) {
        // written again below
      }
    }
    Nftables.run(baseRules() + script);
    baseWritten = true;
  }

  private static final java.util.concurrent.Executor VIRTUAL =
      task -> Thread.ofVirtual().start(task);

  /**
   * Gives running sandbox {@code id} (its init is {@code pid}) its way out, unless it has it: names
   * its network namespace ({@code ip netns attach}: the namespace is the one the runtime made,
   * owned by the sandbox's user namespace, as checkpoint/restore needs), and adds the veth pair,
   * the address and the routes. Idempotent; after a restart or a restore (a new namespace) the
   * stale name and veth are replaced. Nothing for a sandbox without network settings.
   */
  public void attach(Path sandboxDir, String id, long pid) {
    Optional<Saved> saved = saved(sandboxDir);
    if (saved.isEmpty()) {
      return;
    }
    int slot = saved.get().slot();
    Path ns = netnsPath(id);
    String veth = vethName(slot);
    Path own = Path.of("/proc", Long.toString(pid), "ns", "net");
    boolean named = sameFile(ns, own);
    boolean linked = Files.exists(Path.of("/sys/class/net", veth));
    if (named && linked) {
      return;
    }
    enableForwarding();
    if (!named && !linked && !Files.exists(ns) && hasGateway() && netnsDirShared()) {
      try {
        Rtnetlink.attach(pid, netnsName(id), veth, address(slot), gateway());
        return;
      } catch (Rtnetlink.Failure e) {
        LOG.log(
            System.Logger.Level.WARNING,
            "in-process network setup of local:" + id + " failed (" + e.getMessage() + "); ip");
        named = sameFile(ns, own);
        linked = Files.exists(Path.of("/sys/class/net", veth));
      }
    }
    StringBuilder host = new StringBuilder();
    if (!hasGateway()) {
      host.append("addr replace ").append(gateway()).append("/32 dev lo\n");
    }
    if (linked) {
      host.append("link delete ").append(veth).append('\n'); // its peer is in a stale namespace
    }
    if (!named) {
      if (Files.exists(ns)) {
        host.append("netns delete ").append(netnsName(id)).append('\n');
      }
      host.append("netns attach ").append(netnsName(id)).append(' ').append(pid).append('\n');
    }
    host.append("link add ").append(veth).append(" type veth peer name eth0 netns ");
    host.append(netnsName(id)).append('\n');
    host.append("link set ").append(veth).append(" up\n");
    host.append("route replace ").append(address(slot)).append("/32 dev ").append(veth);
    host.append('\n');
    // One spawn for both batches (a spawn from the JVM costs more than the ip runs themselves):
    // the host's side, then inside the namespace it just named.
    String inside =
        "link set lo up\n"
            + ("addr add " + address(slot) + "/32 dev eth0\n")
            + "link set eth0 up\n"
            + ("route add " + gateway() + "/32 dev eth0\n")
            + ("route add default via " + gateway() + " dev eth0\n");
    HostCommand.checkWithInput(
        List.of(
            "sh",
            "-c",
            "ip -batch - <<'EOF1'\n"
                + host
                + "EOF1\nip -n \"$1\" -batch - <<'EOF2'\n"
                + inside
                + "EOF2\n",
            "sh",
            netnsName(id)),
        "");
  }

  /**
   * Removes sandbox {@code id}'s veth pair, keeping its rules and slot: before checkpointing it
   * (CRIU cannot dump a veth whose peer is outside the dumped namespaces); {@link #attach} adds it
   * again. Nothing for a sandbox without one.
   */
  public void detach(Path sandboxDir, String id) {
    Optional<Saved> saved = saved(sandboxDir);
    if (saved.isPresent()
        && Files.exists(Path.of("/sys/class/net", vethName(saved.get().slot())))) {
      HostCommand.Result r =
          HostCommand.run(List.of("ip", "link", "delete", vethName(saved.get().slot())));
      if (!r.ok() && Files.exists(Path.of("/sys/class/net", vethName(saved.get().slot())))) {
        throw new WorkspaceException(
            "cannot detach the network of local:" + id + " for its checkpoint: " + r.output());
      }
    }
  }

  /**
   * Whether {@code /run/netns} is a mount point of its own (as {@code ip netns} makes it, shared,
   * so that a namespace's name unmounted here is unmounted in every mount namespace that copied
   * it): only then does {@link Rtnetlink} name namespaces itself; else {@code ip} prepares it
   * first.
   */
  private boolean netnsDirShared() {
    if (netnsDirShared) {
      return true;
    }
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
        String[] f = line.split(" ");
        if (f.length > 6 && f[4].equals(NETNS_DIR.toString()) && line.contains(" shared:")) {
          netnsDirShared = true;
          return true;
        }
      }
    } catch (IOException e) {
      return false;
    }
    return false;
  }

  private static boolean sameFile(Path a, Path b) {
    try {
      return Files.exists(a) && Files.isSameFile(a, b);
    } catch (IOException e) {
      return false;
    }
  }

  /** Replaces sandbox {@code id}'s policy and rewrites its rules: for {@code setEgress}. */
  public void setPolicy(Path sandboxDir, String id, EgressPolicy policy) {
    Saved saved =
        saved(sandboxDir)
            .orElseThrow(
                () ->
                    new WorkspaceException(
                        "local:"
                            + id
                            + " was created before sandboxes had networks: it has loopback only"));
    try {
      writePolicy(sandboxDir, policy, true);
    } catch (IOException e) {
      throw new WorkspaceException("cannot write the egress policy of local:" + id + ": " + e, e);
    }
    runWithBase(sandboxRules(id, saved.slot(), policy, saved));
  }

  private void enableForwarding() {
    if (forwarding) {
      return;
    }
    Path forward = Path.of("/proc/sys/net/ipv4/ip_forward");
    try {
      if (!Files.readString(forward).strip().equals("1")) {
        Files.writeString(forward, "1");
      }
      forwarding = true;
    } catch (IOException e) {
      throw new WorkspaceException("cannot enable IPv4 forwarding (" + forward + "): " + e, e);
    }
  }

  /** The home's table and chains; idempotent (the fixed chains are flushed and filled anew). */
  String baseRules() {
    String t = "inet " + table();
    String prefix = "s4" + hash + "-*";
    String sub = "10." + subnet() + ".0.0/16";
    return ("add table " + t + "\n")
        + ("add set "
            + t
            + " private { type ipv4_addr; flags interval; elements = { "
            + String.join(", ", PRIVATE_V4)
            + " }; }\n")
        + ("add set "
            + t
            + " never_open { type ipv4_addr; flags interval; elements = { "
            + String.join(", ", neverOpen(4))
            + " }; }\n")
        + ("add set "
            + t
            + " never_open6 { type ipv6_addr; flags interval; elements = { "
            + String.join(", ", neverOpen(16))
            + " }; }\n")
        + ("add map " + t + " egress { type ifname : verdict; }\n")
        + ("add set " + t + " proxied { type ifname; }\n")
        + ("add chain "
            + t
            + " forward { type filter hook forward priority filter; policy accept; }\n")
        + ("flush chain " + t + " forward\n")
        + ("add rule " + t + " forward iifname vmap @egress\n")
        + ("add rule "
            + t
            + " forward iifname \""
            + prefix
            + "\" reject with icmpx admin-prohibited\n")
        + ("add chain " + t + " input { type filter hook input priority filter; policy accept; }\n")
        + ("flush chain " + t + " input\n")
        + ("add rule "
            + t
            + " input iifname \""
            + prefix
            + "\" ct state established,related accept\n")
        + ("add rule "
            + t
            + " input iifname @proxied ip daddr "
            + gateway()
            + " tcp dport "
            + PROXY_PORT
            + " accept\n")
        + ("add rule "
            + t
            + " input iifname \""
            + prefix
            + "\" meta l4proto tcp reject with tcp reset\n")
        + ("add rule "
            + t
            + " input iifname \""
            + prefix
            + "\" reject with icmpx admin-prohibited\n")
        + ("add chain "
            + t
            + " postrouting { type nat hook postrouting priority srcnat; policy accept; }\n")
        + ("flush chain " + t + " postrouting\n")
        + ("add rule "
            + t
            + " postrouting ip saddr "
            + sub
            + " ip daddr != "
            + sub
            + " masquerade\n");
  }

  /** The sandbox's own chain, written anew, and its place in the forward map. */
  String sandboxRules(String id, int slot, EgressPolicy policy, Saved saved) {
    String t = "inet " + table();
    String c = "sb_" + id;
    StringBuilder s = new StringBuilder();
    for (String network : saved.networks()) {
      s.append("add set ").append(t).append(' ').append(setName(network));
      s.append(" { type ipv4_addr; }\n");
      s.append("add element ").append(t).append(' ').append(setName(network));
      s.append(" { ").append(address(slot)).append(" }\n");
    }
    s.append("add chain ").append(t).append(' ').append(c).append('\n');
    s.append("flush chain ").append(t).append(' ').append(c).append('\n');
    String rule = "add rule " + t + " " + c + " ";
    s.append(rule).append("ct state established,related accept\n");
    s.append(rule).append("ip saddr != ").append(address(slot)).append(" drop\n");
    for (String network : saved.networks()) {
      s.append(rule).append("ip daddr @").append(setName(network)).append(" accept\n");
    }
    if (policy.mode() == EgressPolicy.Mode.ALL) {
      List<String> dns = publicNameservers();
      if (!dns.isEmpty()) {
        s.append(rule).append("ip daddr { ").append(String.join(", ", dns));
        s.append(" } meta l4proto { tcp, udp } th dport 53 accept\n");
      }
    }
    // Before any CIDR of the policy: what no policy opens stays shut whatever the rules say.
    s.append(rule).append("ip daddr @never_open meta l4proto tcp reject with tcp reset\n");
    s.append(rule).append("ip daddr @never_open reject with icmpx admin-prohibited\n");
    s.append(rule).append("ip6 daddr @never_open6 meta l4proto tcp reject with tcp reset\n");
    s.append(rule).append("ip6 daddr @never_open6 reject with icmpx admin-prohibited\n");
    List<String> v4 = new ArrayList<>();
    List<String> v6 = new ArrayList<>();
    for (String cidr : policy.cidrs()) {
      (cidr.contains(":") ? v6 : v4).add(cidr);
    }
    if (!v4.isEmpty()) {
      s.append(rule).append("ip daddr { ").append(String.join(", ", v4)).append(" } accept\n");
    }
    if (!v6.isEmpty()) {
      s.append(rule).append("ip6 daddr { ").append(String.join(", ", v6)).append(" } accept\n");
    }
    if (policy.mode() == EgressPolicy.Mode.ALL) {
      s.append(rule).append("meta nfproto ipv4 ip daddr != @private accept\n");
    }
    s.append(rule).append("meta l4proto tcp reject with tcp reset\n");
    s.append(rule).append("reject with icmpx admin-prohibited\n");
    s.append("add element ").append(t).append(" egress { \"").append(vethName(slot));
    s.append("\" : jump ").append(c).append(" }\n");
    // Added first so that the delete cannot fail on a missing element: one transaction.
    s.append("add element ").append(t).append(" proxied { \"").append(vethName(slot));
    s.append("\" }\n");
    if (!usesProxy(policy)) {
      s.append("delete element ").append(t).append(" proxied { \"").append(vethName(slot));
      s.append("\" }\n");
    }
    return s.toString();
  }

  /** The never-open ranges of one address length (4 or 16 bytes), as nftables elements. */
  static List<String> neverOpen(int bytes) {
    return PublicAddresses.NEVER_OPEN_MINIMAL.stream()
        .map(PublicAddresses.Range::cidr)
        .filter(c -> c.network().length == bytes)
        .map(Cidr::toString)
        .toList();
  }

  static String setName(String network) {
    return "net_" + network.replace('-', '_');
  }

  /**
   * The host's nameservers, which a sandbox in mode ALL may ask (it gets them in its {@code
   * /etc/resolv.conf}); loopback ones are useless from a sandbox and left out.
   */
  static List<String> publicNameservers() {
    List<String> out = new ArrayList<>();
    try {
      for (String line : Files.readAllLines(Path.of("/etc/resolv.conf"))) {
        String[] f = line.strip().split("\\s+");
        if (f.length >= 2 && f[0].equals("nameserver") && f[1].matches("[0-9.]+")) {
          InetAddress a = InetAddress.getByName(f[1]);
          if (!a.isLoopbackAddress() && !a.isAnyLocalAddress()) {
            out.add(f[1]);
          }
        }
      }
    } catch (IOException e) {
      // no resolver configured: names then resolve through the proxy only
    }
    return out;
  }

  /** The {@code /etc/resolv.conf} a new sandbox gets: the host's usable nameservers. */
  public static String resolvConf() {
    StringBuilder s = new StringBuilder();
    for (String ns : publicNameservers()) {
      s.append("nameserver ").append(ns).append('\n');
    }
    return s.toString();
  }

  // ---- tearing it down ----------------------------------------------------------------------

  /**
   * Starts removing what sandbox {@code id} had on the host, but its address: its namespace's name
   * (with the namespace, once its processes are gone, goes its veth), its chain and map entry, its
   * address in its networks' sets. On a virtual thread: the nftables commit costs milliseconds that
   * a destroy spends killing the container meanwhile. {@link #release} follows once the container
   * is gone. Idempotent; quiet about what is already gone.
   */
  public CompletableFuture<Void> unroute(Path sandboxDir, String id) {
    Optional<Saved> saved = savedOrEmpty(sandboxDir);
    return CompletableFuture.runAsync(() -> removeRules(saved, id), VIRTUAL);
  }

  /** Frees the sandbox's address and takes it out of its networks' host lists. */
  public void release(Path sandboxDir, String id) {
    Optional<Saved> saved = savedOrEmpty(sandboxDir);
    if (saved.isPresent()) {
      releaseSlot(saved.get().slot(), id);
      for (String network : saved.get().networks()) {
        refreshHosts(network, id);
      }
    }
  }

  private Optional<Saved> savedOrEmpty(Path sandboxDir) {
    try {
      return saved(sandboxDir);
    } catch (WorkspaceException torn) {
      return Optional.empty();
    }
  }

  private void removeRules(Optional<Saved> saved, String id) {
    removeNetns(id);
    String t = "inet " + table();
    String c = "sb_" + id;
    // One transaction (each commit costs the kernel milliseconds): everything it deletes is added
    // first, a no-op where it exists, so that no delete fails on what is already gone.
    StringBuilder s = new StringBuilder();
    s.append("add chain ").append(t).append(' ').append(c).append('\n');
    if (saved.isPresent()) {
      int slot = saved.get().slot();
      String veth = "\"" + vethName(slot) + "\"";
      s.append("add element ").append(t).append(" egress { ").append(veth);
      s.append(" : jump ").append(c).append(" }\n");
      s.append("delete element ").append(t).append(" egress { ").append(veth).append(" }\n");
      s.append("add element ").append(t).append(" proxied { ").append(veth).append(" }\n");
      s.append("delete element ").append(t).append(" proxied { ").append(veth).append(" }\n");
      for (String network : saved.get().networks()) {
        String set = t + " " + setName(network);
        s.append("add set ").append(set).append(" { type ipv4_addr; }\n");
        s.append("add element ").append(set).append(" { ").append(address(slot)).append(" }\n");
        s.append("delete element ").append(set).append(" { ").append(address(slot)).append(" }\n");
      }
    }
    s.append("delete chain ").append(t).append(' ').append(c).append('\n');
    try {
      Nftables.run(s.toString());
    } catch (WorkspaceException noTable) {
      // no table: nothing of this home's rules exists
    }
  }

  private void releaseSlot(int slot, String id) {
    Path file = dir.resolve("slots").resolve(Integer.toString(slot));
    try {
      if (Files.exists(file) && Files.readString(file).strip().equals(id)) {
        Files.deleteIfExists(file);
      }
    } catch (IOException e) {
      // gc releases it
    }
  }

  private void removeNetns(String id) {
    Path ns = netnsPath(id);
    if (Files.exists(ns)) {
      HostCommand.Result r = HostCommand.run(List.of("ip", "netns", "delete", netnsName(id)));
      if (!r.ok() && Files.exists(ns)) {
        throw new WorkspaceException(
            "cannot remove the network namespace of local:" + id + ": " + r.output());
      }
    }
  }

  /**
   * Removes the networking of sandboxes of this home that no longer exist: namespaces, chains, map
   * entries, slots. Returns a line per thing removed.
   */
  public List<String> gc(Path sandboxes) {
    List<String> removed = new ArrayList<>();
    Set<String> leftover = new TreeSet<>();
    String nsPrefix = "s4j-" + hash + "-";
    if (Files.isDirectory(NETNS_DIR)) {
      try (Stream<Path> names = Files.list(NETNS_DIR)) {
        names
            .map(p -> p.getFileName().toString())
            .filter(n -> n.startsWith(nsPrefix))
            .map(n -> n.substring(nsPrefix.length()))
            .filter(id -> SandboxHome.isId(id) && !Files.isDirectory(sandboxes.resolve(id)))
            .forEach(leftover::add);
      } catch (IOException e) {
        // nothing to list
      }
    }
    Map<Integer, String> slots = new java.util.TreeMap<>();
    try (Stream<Path> files =
        Files.isDirectory(dir.resolve("slots")) ? Files.list(dir.resolve("slots")) : Stream.of()) {
      for (Path f : files.toList()) {
        try {
          String id = Files.readString(f).strip();
          if (!SandboxHome.isId(id) || !Files.isDirectory(sandboxes.resolve(id))) {
            slots.put(Integer.parseInt(f.getFileName().toString()), id);
          }
        } catch (IOException | NumberFormatException e) {
          // being written or removed
        }
      }
    } catch (IOException e) {
      // nothing to list
    }
    Set<String> chains = new TreeSet<>();
    if (hasGateway() || !slots.isEmpty()) {
      try {
        String listing = Nftables.run("list table inet " + table());
        java.util.regex.Matcher m =
            java.util.regex.Pattern.compile("chain sb_([a-z0-9]+) \\{").matcher(listing);
        while (m.find()) {
          if (!Files.isDirectory(sandboxes.resolve(m.group(1)))) {
            chains.add(m.group(1));
          }
        }
      } catch (WorkspaceException noTable) {
        // nothing there
      }
    }
    for (String id : leftover) {
      removeNetns(id);
      removed.add("network namespace " + netnsName(id) + " of a sandbox that no longer exists");
    }
    for (var e : slots.entrySet()) {
      tryNft("delete element inet " + table() + " egress { \"" + vethName(e.getKey()) + "\" }");
      try {
        Files.deleteIfExists(dir.resolve("slots").resolve(Integer.toString(e.getKey())));
        removed.add("address " + address(e.getKey()) + " of a sandbox that no longer exists");
      } catch (IOException ex) {
        // next gc
      }
    }
    for (String id : chains) {
      tryNft("delete chain inet " + table() + " sb_" + id);
      removed.add("nftables chain sb_" + id + " of a sandbox that no longer exists");
    }
    return removed;
  }

  private static void tryNft(String command) {
    try {
      Nftables.run(command);
    } catch (WorkspaceException gone) {
      // already gone
    }
  }

  // ---- named networks -----------------------------------------------------------------------

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
          Optional<Saved> s = saved(d);
          if (s.isPresent() && s.get().networks().contains(network)) {
            members.put(id, address(s.get().slot()));
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
  public void refreshHosts(String network, String leaving) {
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
  public void writeHosts(Path sandboxDir, String id) throws IOException {
    Optional<Saved> saved = saved(sandboxDir);
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

  /** The networks sandbox {@code id} is on. */
  public static List<String> networksOf(Path sandboxDir) {
    return saved(sandboxDir).map(Saved::networks).orElse(List.of());
  }

  public static InetAddress parse(String address) {
    try {
      return InetAddress.getByName(address);
    } catch (UnknownHostException e) {
      throw new IllegalArgumentException(address, e);
    }
  }
}
