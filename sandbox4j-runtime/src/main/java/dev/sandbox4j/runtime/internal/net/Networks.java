package dev.sandbox4j.runtime.internal.net;

import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
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
 *
 * <p><b>Parts.</b> This class is what the engine calls, a sandbox at a time; each job is a class of
 * its own: the host-global names ({@link HostNames}), the home's subnet and addresses ({@link
 * HomeSubnet}), the settings files ({@link NetworkFiles}), the nftables scripts ({@link
 * NftablesRules}, run by {@link Nftables}), the namespace and veth ({@link VethLinks}, over {@link
 * Rtnetlink}), the named networks' hosts files ({@link NamedNetworks}), the host's nameservers
 * ({@link Nameservers}) and the tools the host needs ({@link NetworkTools}).
 */
public final class Networks {
  public static final int PROXY_PORT = 3128;
  public static final String NETWORK_FILE = "network.json";

  private final Path home;
  private final Path dir;
  private final HostNames names;
  private final HomeSubnet subnet;
  private final NftablesRules rules;
  private final VethLinks links;
  private final NamedNetworks named;
  private volatile boolean baseWritten;

  public Networks(Path home) {
    this.home = home;
    this.dir = home.resolve("network");
    this.names = new HostNames(home);
    this.subnet = new HomeSubnet(home, dir, names.hash());
    this.rules = new NftablesRules(names, subnet);
    this.links = new VethLinks(names, subnet);
    this.named = new NamedNetworks(home, dir, subnet);
    // the engine is built before its sandboxes' descriptors exist: the JVM's nftables context is
    // made now, with its socket at a low number (see Nftables)
    Nftables.prepare();
  }

  /** A network name as the API takes it: 1 to 32 of a-z, 0-9 and '-', not starting with '-'. */
  public static String checkNetworkName(String name) {
    return NamedNetworks.checkNetworkName(name);
  }

  /** What a sandbox's network is made of. */
  public record Settings(EgressPolicy egress, List<String> networks) {
    public Settings {
      java.util.Objects.requireNonNull(egress, "egress");
      networks = List.copyOf(new TreeSet<>(networks));
    }

    static final Settings DEFAULT = new Settings(EgressPolicy.all(), List.of());
  }

  public String table() {
    return names.table();
  }

  public String netnsName(String id) {
    return names.netnsName(id);
  }

  public String vethName(int slot) {
    return names.vethName(slot);
  }

  /**
   * Whether the gateway address is on the host's loopback interface (not on a dummy interface of
   * its own: kernels without the dummy module exist, a Firecracker guest's for one).
   */
  public boolean hasGateway() {
    return subnet.hasGateway();
  }

  /** The second octet of this home's {@code 10.X.0.0/16}, claimed on first use. */
  public int subnet() {
    return subnet.subnet();
  }

  public String gateway() {
    return subnet.gateway();
  }

  /** Whether {@code a} is in this home's sandbox subnet (a sandbox, or the gateway). */
  public boolean isSandboxSubnet(InetAddress a) {
    return subnet.isSandboxSubnet(a);
  }

  // ---- a sandbox's settings -----------------------------------------------------------------

  /**
   * Gives new sandbox {@code id} (its directory {@code sandboxDir}, lock held) a slot and writes
   * its settings. Nothing on the host changes until {@link #up}.
   */
  public void assign(Path sandboxDir, String id, Settings settings) throws IOException {
    NetworkFiles.create(sandboxDir, subnet.claimSlot(id), settings);
  }

  /** Its settings, or empty for a sandbox made before sandboxes had networks (loopback only). */
  public static Optional<NetworkFiles.Saved> saved(Path sandboxDir) {
    return NetworkFiles.saved(sandboxDir);
  }

  public static EgressPolicy policy(Path sandboxDir) {
    return NetworkFiles.policy(sandboxDir);
  }

  /** The networks sandbox {@code id} is on. */
  public static List<String> networksOf(Path sandboxDir) {
    return NetworkFiles.networksOf(sandboxDir);
  }

  /** The sandbox a proxy client's source address belongs to, and its policy now. */
  public Optional<EgressPolicy> policyOf(InetAddress source) {
    int slot = subnet.slotOf(source);
    if (slot < 0) {
      return Optional.empty();
    }
    try {
      String id = Files.readString(dir.resolve("slots").resolve(Integer.toString(slot))).strip();
      Path sandboxDir = home.resolve("sandboxes").resolve(id);
      Optional<NetworkFiles.Saved> saved =
          SandboxHome.isId(id) ? saved(sandboxDir) : Optional.empty();
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
    if (!NftablesRules.usesProxy(p)) {
      return Map.of();
    }
    String url = "http://" + subnet.gateway() + ":" + PROXY_PORT;
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

  /**
   * The command, run as root in a sandbox, that installs the proxy CA {@code pem} into its trust
   * store at {@link #CA_FILE}. Where the image has Debian's layout and {@code openssl}, it does by
   * hand the two things {@code update-ca-certificates} would do for one certificate: the
   * certificate appended to the bundle (once), and its subject-hash link in {@code /etc/ssl/certs}.
   * The script itself rebuilds everything from ~150 certificates with a few processes each: up to
   * 44 s on a loaded 2-core machine. A later {@code update-ca-certificates} in the sandbox keeps
   * the CA, which stays in {@link #CA_FILE}. Other layouts fall back to it. Every backend's.
   */
  public static List<String> installCaArgv(String pem) {
    String lastLine =
        pem.lines().filter(l -> !l.isBlank() && !l.startsWith("-----")).reduce((a, b) -> b).get();
    return List.of(
        "/bin/sh",
        "-c",
        """
        set -e
        mkdir -p "$(dirname "$1")"
        printf '%s' "$2" > "$1"
        bundle=/etc/ssl/certs/ca-certificates.crt
        if [ -f "$bundle" ] && command -v openssl >/dev/null 2>&1; then
          grep -qxF "$3" "$bundle" || cat "$1" >> "$bundle"
          ln -sf "$1" "/etc/ssl/certs/$(openssl x509 -hash -noout -in "$1").0"
        else
          update-ca-certificates >/dev/null 2>&1
        fi
        """,
        "sh",
        CA_FILE,
        pem,
        lastLine);
  }

  // ---- bringing it up -----------------------------------------------------------------------

  /**
   * Starts writing sandbox {@code id}'s rules, in the background (they are keyed by its veth's
   * name, so they may precede it), or returns empty for a sandbox without network settings. The
   * runtime starts the container meanwhile; {@link #attach} then gives it its veth.
   */
  public Optional<CompletableFuture<Void>> rules(Path sandboxDir, String id) {
    Optional<NetworkFiles.Saved> saved = saved(sandboxDir);
    if (saved.isEmpty()) {
      return Optional.empty();
    }
    EgressPolicy policy = policy(sandboxDir);
    String script = rules.sandboxRules(id, saved.get().slot(), policy, saved.get());
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
    Nftables.run(rules.baseRules() + script);
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
    Optional<NetworkFiles.Saved> saved = saved(sandboxDir);
    if (saved.isPresent()) {
      links.attach(id, saved.get().slot(), pid);
    }
  }

  /**
   * Removes sandbox {@code id}'s veth pair, keeping its rules and slot: before checkpointing it
   * (CRIU cannot dump a veth whose peer is outside the dumped namespaces); {@link #attach} adds it
   * again. Nothing for a sandbox without one.
   */
  public void detach(Path sandboxDir, String id) {
    Optional<NetworkFiles.Saved> saved = saved(sandboxDir);
    if (saved.isPresent()) {
      links.detach(id, saved.get().slot());
    }
  }

  /** Replaces sandbox {@code id}'s policy and rewrites its rules: for {@code setEgress}. */
  public void setPolicy(Path sandboxDir, String id, EgressPolicy policy) {
    NetworkFiles.Saved saved =
        saved(sandboxDir)
            .orElseThrow(
                () ->
                    new WorkspaceException(
                        "local:"
                            + id
                            + " was created before sandboxes had networks: it has loopback only"));
    try {
      NetworkFiles.writePolicy(sandboxDir, policy, true);
    } catch (IOException e) {
      throw new WorkspaceException("cannot write the egress policy of local:" + id + ": " + e, e);
    }
    runWithBase(rules.sandboxRules(id, saved.slot(), policy, saved));
  }

  /** The {@code /etc/resolv.conf} a new sandbox gets: the host's usable nameservers. */
  public static String resolvConf() {
    return Nameservers.resolvConf();
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
    Optional<NetworkFiles.Saved> saved = savedOrEmpty(sandboxDir);
    return CompletableFuture.runAsync(() -> removeRules(saved, id), VIRTUAL);
  }

  /** Frees the sandbox's address and takes it out of its networks' host lists. */
  public void release(Path sandboxDir, String id) {
    Optional<NetworkFiles.Saved> saved = savedOrEmpty(sandboxDir);
    if (saved.isPresent()) {
      subnet.releaseSlot(saved.get().slot(), id);
      for (String network : saved.get().networks()) {
        named.refreshHosts(network, id);
      }
    }
  }

  private Optional<NetworkFiles.Saved> savedOrEmpty(Path sandboxDir) {
    try {
      return saved(sandboxDir);
    } catch (WorkspaceException torn) {
      return Optional.empty();
    }
  }

  private void removeRules(Optional<NetworkFiles.Saved> saved, String id) {
    links.removeNetns(id);
    try {
      Nftables.run(rules.removalRules(saved, id));
    } catch (WorkspaceException noTable) {
      // no table: nothing of this home's rules exists
    }
  }

  /**
   * Removes the networking of sandboxes of this home that no longer exist: namespaces, chains, map
   * entries, slots. Returns a line per thing removed.
   */
  public List<String> gc(Path sandboxes) {
    List<String> removed = new ArrayList<>();
    Set<String> leftover = new TreeSet<>();
    String nsPrefix = names.netnsName("");
    if (Files.isDirectory(HostNames.NETNS_DIR)) {
      try (Stream<Path> names = Files.list(HostNames.NETNS_DIR)) {
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
    if (subnet.hasGateway() || !slots.isEmpty()) {
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
      links.removeNetns(id);
      removed.add(
          "network namespace " + names.netnsName(id) + " of a sandbox that no longer exists");
    }
    for (var e : slots.entrySet()) {
      tryNft("delete element inet " + table() + " egress { \"" + vethName(e.getKey()) + "\" }");
      try {
        Files.deleteIfExists(dir.resolve("slots").resolve(Integer.toString(e.getKey())));
        removed.add(
            "address " + subnet.address(e.getKey()) + " of a sandbox that no longer exists");
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

  /**
   * Rewrites the {@code hosts} file of every member of {@code network} (in place: it is
   * bind-mounted into them), leaving out {@code leaving}. Serialized per home.
   */
  public void refreshHosts(String network, String leaving) {
    named.refreshHosts(network, leaving);
  }

  /** Writes sandbox {@code id}'s {@code hosts}: itself, then every member of its networks. */
  public void writeHosts(Path sandboxDir, String id) throws IOException {
    named.writeHosts(sandboxDir, id);
  }

  public static InetAddress parse(String address) {
    try {
      return InetAddress.getByName(address);
    } catch (UnknownHostException e) {
      throw new IllegalArgumentException(address, e);
    }
  }
}
