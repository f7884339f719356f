package dev.sandbox4j.runtime.internal.net;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The network setup of a freshly started sandbox through rtnetlink in this process ({@code
 * java.lang.foreign}), instead of spawning {@code ip}: naming its namespace (a bind mount under
 * {@code /run/netns}, as {@code ip netns attach} makes), the veth pair with its peer in the
 * namespace, the host route, and inside the address, links and routes. Each call runs on a platform
 * thread of its own, which joins the sandbox's namespace ({@code setns}) halfway and then ends.
 *
 * <p>Only the common case (nothing of the sandbox's network exists yet) comes here; {@link
 * Networks#attach} falls back to {@code ip} for everything else, and when this fails, so a failure
 * here costs time, never correctness.
 */
final class Rtnetlink {
  private static final int AF_NETLINK = 16;
  private static final int AF_INET = 2;
  private static final int SOCK_RAW_CLOEXEC = 3 | 02000000;
  private static final int NETLINK_ROUTE = 0;
  private static final int CLONE_NEWNET = 0x40000000;
  private static final int O_RDONLY_CLOEXEC = 02000000;
  private static final int O_CREAT_EXCL_CLOEXEC = 0100 | 0200 | 02000000;
  private static final long MS_BIND = 4096;

  private static final short RTM_NEWLINK = 16;
  private static final short RTM_NEWADDR = 20;
  private static final short RTM_NEWROUTE = 24;
  private static final short NLMSG_ERROR = 2;
  private static final short F_REQUEST_ACK = 1 | 4;
  private static final short F_CREATE_EXCL = 0x400 | 0x200;
  private static final short F_CREATE_REPLACE = 0x400 | 0x100;

  private static final MethodHandle SOCKET;
  private static final MethodHandle SEND;
  private static final MethodHandle RECV;
  private static final MethodHandle CLOSE;
  private static final MethodHandle OPEN;
  private static final MethodHandle SETNS;
  private static final MethodHandle MOUNT;
  private static final MethodHandle IF_NAMETOINDEX;
  private static final VarHandle ERRNO;
  private static final MemoryLayout CALL_STATE;

  static final boolean AVAILABLE;

  static {
    MethodHandle[] h = new MethodHandle[8];
    VarHandle errno = null;
    MemoryLayout state = null;
    boolean ok = false;
    if ("amd64".equals(System.getProperty("os.arch"))
        || "aarch64".equals(System.getProperty("os.arch"))) {
      try {
        Linker linker = Linker.nativeLinker();
        SymbolLookup libc = linker.defaultLookup();
        Linker.Option capture = Linker.Option.captureCallState("errno");
        state = Linker.Option.captureStateLayout();
        errno = state.varHandle(MemoryLayout.PathElement.groupElement("errno"));
        ValueLayout i = ValueLayout.JAVA_INT;
        ValueLayout l = ValueLayout.JAVA_LONG;
        ValueLayout a = ValueLayout.ADDRESS;
        h[0] =
            linker.downcallHandle(
                libc.find("socket").orElseThrow(), FunctionDescriptor.of(i, i, i, i), capture);
        h[1] =
            linker.downcallHandle(
                libc.find("send").orElseThrow(), FunctionDescriptor.of(l, i, a, l, i), capture);
        h[2] =
            linker.downcallHandle(
                libc.find("recv").orElseThrow(), FunctionDescriptor.of(l, i, a, l, i), capture);
        h[3] = linker.downcallHandle(libc.find("close").orElseThrow(), FunctionDescriptor.of(i, i));
        h[4] =
            linker.downcallHandle(
                libc.find("open").orElseThrow(),
                FunctionDescriptor.of(i, a, i, i),
                capture,
                Linker.Option.firstVariadicArg(2));
        h[5] =
            linker.downcallHandle(
                libc.find("setns").orElseThrow(), FunctionDescriptor.of(i, i, i), capture);
        h[6] =
            linker.downcallHandle(
                libc.find("mount").orElseThrow(), FunctionDescriptor.of(i, a, a, a, l, a), capture);
        h[7] =
            linker.downcallHandle(
                libc.find("if_nametoindex").orElseThrow(), FunctionDescriptor.of(i, a), capture);
        ok = true;
      } catch (RuntimeException | LinkageError e) {
        ok = false;
      }
    }
    SOCKET = h[0];
    SEND = h[1];
    RECV = h[2];
    CLOSE = h[3];
    OPEN = h[4];
    SETNS = h[5];
    MOUNT = h[6];
    IF_NAMETOINDEX = h[7];
    ERRNO = errno;
    CALL_STATE = state;
    AVAILABLE = ok;
  }

  private Rtnetlink() {}

  /** A failed step, with the errno it failed with. */
  static final class Failure extends Exception {
    private static final long serialVersionUID = 1L;

    Failure(String message) {
      super(message, null, false, false);
    }
  }

  /**
   * Names the network namespace of process {@code pid} {@code /run/netns/<name>} and gives it veth
   * {@code veth} (host side, up, with a route to {@code address}/32) whose peer {@code eth0} inside
   * has {@code address}/32, is up, and routes everything through {@code gateway}. Nothing of it may
   * exist yet.
   */
  static void attach(long pid, String name, String veth, String address, String gateway)
      throws Failure {
    Failure[] failure = new Failure[1];
    Thread t =
        Thread.ofPlatform()
            .name("rtnetlink-attach")
            .start(
                () -> {
                  try {
                    run(pid, name, veth, address, gateway);
                  } catch (Failure f) {
                    failure[0] = f;
                  } catch (Throwable e) {
                    failure[0] = new Failure(e.toString());
                  }
                });
    try {
      t.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new Failure("interrupted");
    }
    if (failure[0] != null) {
      throw failure[0];
    }
  }

  private static void run(long pid, String name, String veth, String address, String gateway)
      throws Throwable {
    byte[] addr = InetAddress.getByName(address).getAddress();
    byte[] gw = InetAddress.getByName(gateway).getAddress();
    try (Arena arena = Arena.ofConfined()) {
      MemorySegment st = arena.allocate(CALL_STATE);
      String nsPath = "/proc/" + pid + "/ns/net";
      Path named = Path.of("/run/netns", name);
      int created =
          (int) OPEN.invokeExact(st, arena.allocateFrom(named.toString()), O_CREAT_EXCL_CLOEXEC, 0);
      check(created, st, "create " + named);
      int ignored = (int) CLOSE.invokeExact(created);
      int mounted =
          (int)
              MOUNT.invokeExact(
                  st,
                  arena.allocateFrom(nsPath),
                  arena.allocateFrom(named.toString()),
                  arena.allocateFrom("none"),
                  MS_BIND,
                  MemorySegment.NULL);
      if (mounted != 0) {
        int e = errno(st);
        Files.deleteIfExists(named);
        throw new Failure("bind " + nsPath + " on " + named + ": errno " + e);
      }
      int ns = (int) OPEN.invokeExact(st, arena.allocateFrom(nsPath), O_RDONLY_CLOEXEC, 0);
      check(ns, st, "open " + nsPath);
      int host = (int) SOCKET.invokeExact(st, AF_NETLINK, SOCK_RAW_CLOEXEC, NETLINK_ROUTE);
      check(host, st, "netlink socket");
      int inside = -1;
      try {
        // veth VETH up, peer eth0 in the namespace
        Message m = new Message(RTM_NEWLINK, F_CREATE_EXCL);
        m.ifinfo(0, 0, 0);
        m.string(3, veth); // IFLA_IFNAME
        int linkinfo = m.begin(18); // IFLA_LINKINFO
        m.string(1, "veth"); // IFLA_INFO_KIND
        int data = m.begin(2); // IFLA_INFO_DATA
        int peer = m.begin(1); // VETH_INFO_PEER
        m.ifinfo(0, 0, 0);
        m.string(3, "eth0");
        m.int32(28, ns); // IFLA_NET_NS_FD
        m.end(peer);
        m.end(data);
        m.end(linkinfo);
        transact(host, m, arena, st, "create veth " + veth);
        int index = (int) IF_NAMETOINDEX.invokeExact(st, arena.allocateFrom(veth));
        check(index == 0 ? -1 : index, st, "index of " + veth);
        up(host, index, arena, st);
        route(host, addr, 32, index, null, arena, st);

        int joined = (int) SETNS.invokeExact(st, ns, CLONE_NEWNET);
        check(joined, st, "setns");
        inside = (int) SOCKET.invokeExact(st, AF_NETLINK, SOCK_RAW_CLOEXEC, NETLINK_ROUTE);
        check(inside, st, "netlink socket inside");
        up(inside, 1, arena, st); // lo
        int eth0 = (int) IF_NAMETOINDEX.invokeExact(st, arena.allocateFrom("eth0"));
        check(eth0 == 0 ? -1 : eth0, st, "index of eth0");
        Message a = new Message(RTM_NEWADDR, F_CREATE_EXCL);
        a.buffer.put((byte) AF_INET).put((byte) 32).put((byte) 0).put((byte) 0).putInt(eth0);
        a.bytes(2, addr); // IFA_LOCAL
        a.bytes(1, addr); // IFA_ADDRESS
        transact(inside, a, arena, st, "address " + address);
        up(inside, eth0, arena, st);
        route(inside, gw, 32, eth0, null, arena, st);
        route(inside, new byte[4], 0, eth0, gw, arena, st);
      } finally {
        int c1 = (int) CLOSE.invokeExact(host);
        if (inside >= 0) {
          int c2 = (int) CLOSE.invokeExact(inside);
        }
        int c3 = (int) CLOSE.invokeExact(ns);
      }
    }
  }

  private static void up(int fd, int index, Arena arena, MemorySegment st) throws Throwable {
    Message m = new Message(RTM_NEWLINK, (short) 0);
    m.ifinfo(index, 1, 1); // IFF_UP
    transact(fd, m, arena, st, "link " + index + " up");
  }

  /** A unicast route in the main table: to {@code dst/len} via {@code via}, or on-link. */
  private static void route(
      int fd, byte[] dst, int len, int oif, byte[] via, Arena arena, MemorySegment st)
      throws Throwable {
    Message m = new Message(RTM_NEWROUTE, F_CREATE_REPLACE);
    m.buffer
        .put((byte) AF_INET)
        .put((byte) len)
        .put((byte) 0)
        .put((byte) 0)
        .put((byte) 254) // RT_TABLE_MAIN
        .put((byte) 3) // RTPROT_BOOT
        .put((byte) (via == null ? 253 : 0)) // RT_SCOPE_LINK / UNIVERSE
        .put((byte) 1) // RTN_UNICAST
        .putInt(0);
    if (len > 0) {
      m.bytes(1, dst); // RTA_DST
    }
    if (via != null) {
      m.bytes(5, via); // RTA_GATEWAY
    }
    m.int32(4, oif); // RTA_OIF
    transact(fd, m, arena, st, "route");
  }

  private static void transact(int fd, Message m, Arena arena, MemorySegment st, String what)
      throws Throwable {
    byte[] bytes = m.finish();
    MemorySegment out = arena.allocate(bytes.length);
    out.copyFrom(MemorySegment.ofArray(bytes));
    long sent = (long) SEND.invokeExact(st, fd, out, (long) bytes.length, 0);
    if (sent != bytes.length) {
      throw new Failure(what + ": send: errno " + errno(st));
    }
    MemorySegment in = arena.allocate(8192);
    long got = (long) RECV.invokeExact(st, fd, in, 8192L, 0);
    if (got < 20) {
      throw new Failure(what + ": recv: errno " + errno(st));
    }
    ByteBuffer reply = in.asSlice(0, got).asByteBuffer().order(ByteOrder.nativeOrder());
    if (reply.getShort(4) != NLMSG_ERROR) {
      throw new Failure(what + ": unexpected reply type " + reply.getShort(4));
    }
    int error = reply.getInt(16);
    if (error != 0) {
      throw new Failure(what + ": errno " + -error);
    }
  }

  private static void check(int rc, MemorySegment st, String what) throws Failure {
    if (rc < 0) {
      throw new Failure(what + ": errno " + errno(st));
    }
  }

  private static int errno(MemorySegment st) {
    return (int) ERRNO.get(st, 0L);
  }

  /** One netlink request being written: header, fixed part, attributes (nested ones too). */
  private static final class Message {
    private static int seq;
    final ByteBuffer buffer = ByteBuffer.allocate(1024).order(ByteOrder.nativeOrder());

    Message(short type, short flags) {
      buffer.putInt(0).putShort(type).putShort((short) (F_REQUEST_ACK | flags));
      buffer.putInt(++seq).putInt(0);
    }

    void ifinfo(int index, int flags, int change) {
      buffer.put((byte) 0).put((byte) 0).putShort((short) 0).putInt(index);
      buffer.putInt(flags).putInt(change);
    }

    int begin(int type) {
      int at = buffer.position();
      buffer.putShort((short) 0).putShort((short) type);
      return at;
    }

    void end(int at) {
      buffer.putShort(at, (short) (buffer.position() - at));
    }

    void bytes(int type, byte[] value) {
      int at = begin(type);
      buffer.put(value);
      end(at);
      pad();
    }

    void string(int type, String value) {
      byte[] v = value.getBytes(StandardCharsets.US_ASCII);
      byte[] z = java.util.Arrays.copyOf(v, v.length + 1);
      bytes(type, z);
    }

    void int32(int type, int value) {
      int at = begin(type);
      buffer.putInt(value);
      end(at);
    }

    private void pad() {
      while (buffer.position() % 4 != 0) {
        buffer.put((byte) 0);
      }
    }

    byte[] finish() {
      buffer.putInt(0, buffer.position());
      return java.util.Arrays.copyOf(buffer.array(), buffer.position());
    }
  }
}
