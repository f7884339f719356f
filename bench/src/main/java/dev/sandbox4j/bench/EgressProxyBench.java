package dev.sandbox4j.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.runtime.EgressPolicy;
import dev.sandbox4j.runtime.internal.egress.EgressProxy;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Arrays;
import java.util.Optional;

/**
 * The egress proxy's speed on loopback (issue 6: one CONNECT stream ≥ 500 MiB/s): a client bound to
 * 127.0.0.2 (a "sandbox"), the proxy on 127.0.0.1, servers on 127.0.1.1 (counted as public for the
 * run). Scenarios, each also measured direct (no proxy) for comparison:
 *
 * <ul>
 *   <li>{@code connect_upload} / {@code connect_download}: {@code --mib} MiB through one CONNECT
 *       tunnel, one direction; one sample per round, in MiB/s;
 *   <li>{@code http_1kib}: a GET answered with 1 KiB through the proxy (absolute form, client
 *       connection kept alive; the proxy opens an upstream connection per request), in ms;
 *   <li>{@code connect_setup}: connect to the proxy, CONNECT, until the 200 arrives, in ms.
 * </ul>
 *
 * Run with {@code bench/egress [--rounds N] [--mib N] [--requests N]}; the table goes to stdout,
 * every sample to {@code bench/results/egress-<UTC timestamp>.json}.
 */
public final class EgressProxyBench {
  private static final InetAddress CLIENT = InetAddress.ofLiteral("127.0.0.2");
  private static final InetAddress SERVER = InetAddress.ofLiteral("127.0.1.1");
  private static final byte[] KIB = "x".repeat(1024).getBytes(StandardCharsets.US_ASCII);

  private EgressProxyBench() {}

  public static void main(String[] args) throws Exception {
    int rounds = 10;
    int mib = 1024;
    int requests = 2000;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--rounds" -> rounds = Integer.parseInt(args[i + 1]);
        case "--mib" -> mib = Integer.parseInt(args[i + 1]);
        case "--requests" -> requests = Integer.parseInt(args[i + 1]);
        default -> throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    ObjectMapper json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    ObjectNode report = json.createObjectNode();
    report.put("date", Instant.now().toString());
    report.put("rounds", rounds);
    report.put("mib_per_round", mib);
    report.put("requests", requests);
    report.put("available_processors", Runtime.getRuntime().availableProcessors());
    report.put("java_version", System.getProperty("java.version"));
    report.put("load_average_1m_start", loadAverage());

    try (ServerSocket sink = new ServerSocket(0, 50, SERVER);
        ServerSocket source = new ServerSocket(0, 50, SERVER);
        ServerSocket http = new ServerSocket(0, 50, SERVER);
        EgressProxy proxy =
            EgressProxy.builder(a -> Optional.of(EgressPolicy.all()))
                .bind(InetAddress.ofLiteral("127.0.0.1"), 0)
                .alsoPublic("127.0.1.0/24")
                .start()) {
      serve(sink, EgressProxyBench::drain);
      serve(source, EgressProxyBench::flood);
      serve(http, EgressProxyBench::http);
      long bytes = (long) mib << 20;
      ObjectNode scenarios = report.putObject("scenarios");

      System.out.printf("%-26s %10s %10s %10s %10s%n", "scenario", "p50", "p95/min", "p99", "max");
      for (boolean viaProxy : new boolean[] {true, false}) {
        String suffix = viaProxy ? "" : "_direct";
        double[] up = new double[rounds];
        double[] down = new double[rounds];
        for (int r = -2; r < rounds; r++) { // two warm-up rounds
          double u = mibPerSecond(bytes, () -> upload(proxy, sink, bytes, viaProxy));
          double d = mibPerSecond(bytes, () -> download(proxy, source, bytes, viaProxy));
          if (r >= 0) {
            up[r] = u;
            down[r] = d;
          }
        }
        rate(scenarios, "connect_upload" + suffix, up);
        rate(scenarios, "connect_download" + suffix, down);
      }
      for (boolean viaProxy : new boolean[] {true, false}) {
        long[] samples = httpRequests(proxy, http, requests, viaProxy);
        latency(scenarios, viaProxy ? "http_1kib" : "http_1kib_direct", samples);
      }
      long[] setup = new long[Math.max(100, requests / 10)];
      for (int i = -20; i < setup.length; i++) {
        long t0 = System.nanoTime();
        try (Socket s = connectThrough(proxy, sink)) {
          long t = System.nanoTime() - t0;
          if (i >= 0) {
            setup[i] = t;
          }
        }
      }
      latency(scenarios, "connect_setup", setup);
    }
    report.put("load_average_1m_end", loadAverage());
    Path dir = Path.of(System.getProperty("sandbox4j.bench.results", "bench/results"));
    Files.createDirectories(dir);
    Path out =
        dir.resolve(
            "egress-"
                + DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'")
                    .withZone(ZoneOffset.UTC)
                    .format(Instant.now())
                + ".json");
    json.writeValue(out.toFile(), report);
    System.err.println("egress bench: report in " + out);
  }

  // ---- scenarios ----

  private static void upload(EgressProxy proxy, ServerSocket sink, long bytes, boolean viaProxy)
      throws IOException {
    try (Socket s = viaProxy ? connectThrough(proxy, sink) : direct(sink)) {
      OutputStream out = s.getOutputStream();
      byte[] buf = new byte[256 * 1024];
      for (long left = bytes; left > 0; left -= buf.length) {
        out.write(buf, 0, (int) Math.min(buf.length, left));
      }
      s.shutdownOutput();
      // the sink answers one byte once it has read everything: the time covers delivery
      if (s.getInputStream().read() != 'k') {
        throw new IOException("the sink did not confirm the upload");
      }
    }
  }

  private static void download(EgressProxy proxy, ServerSocket source, long bytes, boolean viaProxy)
      throws IOException {
    try (Socket s = viaProxy ? connectThrough(proxy, source) : direct(source)) {
      OutputStream out = s.getOutputStream();
      out.write(lengthPrefix(bytes));
      out.flush();
      InputStream in = s.getInputStream();
      byte[] buf = new byte[256 * 1024];
      long got = 0;
      int r;
      while ((r = in.read(buf)) > 0) {
        got += r;
      }
      if (got != bytes) {
        throw new IOException("downloaded " + got + " of " + bytes + " bytes");
      }
    }
  }

  private static long[] httpRequests(EgressProxy proxy, ServerSocket http, int n, boolean viaProxy)
      throws IOException {
    long[] samples = new long[n];
    String target =
        viaProxy ? "http://" + SERVER.getHostAddress() + ":" + http.getLocalPort() + "/" : "/";
    byte[] request =
        ("GET " + target + " HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\n\r\n")
            .getBytes(StandardCharsets.US_ASCII);
    try (Socket s = viaProxy ? client(proxy.address()) : direct(http)) {
      InputStream in = s.getInputStream();
      OutputStream out = s.getOutputStream();
      for (int i = -200; i < n; i++) {
        long t0 = System.nanoTime();
        out.write(request);
        out.flush();
        readResponse(in);
        long t = System.nanoTime() - t0;
        if (i >= 0) {
          samples[i] = t;
        }
      }
    }
    return samples;
  }

  // ---- the fake internet ----

  interface Handler {
    void handle(Socket s) throws IOException;
  }

  private static void serve(ServerSocket server, Handler handler) {
    Thread.ofVirtual()
        .start(
            () -> {
              while (!server.isClosed()) {
                try {
                  Socket s = server.accept();
                  s.setTcpNoDelay(true);
                  Thread.ofVirtual()
                      .start(
                          () -> {
                            try (s) {
                              handler.handle(s);
                            } catch (IOException e) {
                              // the bench client left
                            }
                          });
                } catch (IOException e) {
                  return;
                }
              }
            });
  }

  private static void drain(Socket s) throws IOException {
    InputStream in = s.getInputStream();
    byte[] buf = new byte[256 * 1024];
    while (in.read(buf) > 0) {
      // discard
    }
    s.getOutputStream().write('k');
  }

  /** Reads an 8-byte length, then sends that many bytes and closes. */
  private static void flood(Socket s) throws IOException {
    byte[] len = s.getInputStream().readNBytes(8);
    long bytes = java.nio.ByteBuffer.wrap(len).getLong();
    byte[] buf = new byte[256 * 1024];
    OutputStream out = s.getOutputStream();
    for (long left = bytes; left > 0; left -= buf.length) {
      out.write(buf, 0, (int) Math.min(buf.length, left));
    }
  }

  /** Answers every request with 1 KiB, keep-alive unless asked to close. */
  private static void http(Socket s) throws IOException {
    InputStream in = s.getInputStream();
    OutputStream out = s.getOutputStream();
    byte[] head =
        ("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + KIB.length + "\r\n")
            .getBytes(StandardCharsets.US_ASCII);
    while (true) {
      boolean close = false;
      String line = readLine(in);
      if (line == null) {
        return;
      }
      while (!(line = readLine(in)).isEmpty()) {
        close |= line.equalsIgnoreCase("Connection: close");
      }
      out.write(head);
      out.write((close ? "Connection: close\r\n\r\n" : "\r\n").getBytes(StandardCharsets.US_ASCII));
      out.write(KIB);
      out.flush();
      if (close) {
        return;
      }
    }
  }

  // ---- plumbing ----

  private static Socket connectThrough(EgressProxy proxy, ServerSocket target) throws IOException {
    Socket s = client(proxy.address());
    s.getOutputStream()
        .write(
            ("CONNECT "
                    + SERVER.getHostAddress()
                    + ":"
                    + target.getLocalPort()
                    + " HTTP/1.1\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII));
    InputStream in = s.getInputStream();
    String status = readLine(in);
    while (!readLine(in).isEmpty()) {
      // headers of the 200
    }
    if (status == null || !status.startsWith("HTTP/1.1 200")) {
      s.close();
      throw new IOException("CONNECT refused: " + status);
    }
    return s;
  }

  private static Socket direct(ServerSocket target) throws IOException {
    return client(new InetSocketAddress(SERVER, target.getLocalPort()));
  }

  private static Socket client(InetSocketAddress to) throws IOException {
    Socket s = new Socket();
    s.bind(new InetSocketAddress(CLIENT, 0));
    s.setTcpNoDelay(true);
    s.connect(to, 5_000);
    s.setSoTimeout(60_000);
    return s;
  }

  private static byte[] lengthPrefix(long bytes) {
    return java.nio.ByteBuffer.allocate(8).putLong(bytes).array();
  }

  private static void readResponse(InputStream in) throws IOException {
    String status = readLine(in);
    if (status == null || !status.startsWith("HTTP/1.1 200")) {
      throw new IOException("unexpected response: " + status);
    }
    int length = -1;
    String line;
    while (!(line = readLine(in)).isEmpty()) {
      if (line.regionMatches(true, 0, "Content-Length:", 0, 15)) {
        length = Integer.parseInt(line.substring(15).strip());
      }
    }
    if (in.readNBytes(length).length != length) {
      throw new IOException("short body");
    }
  }

  /** A line without its end, or null at the end of the stream. */
  private static String readLine(InputStream in) throws IOException {
    StringBuilder b = new StringBuilder();
    int c;
    while ((c = in.read()) != '\n') {
      if (c < 0) {
        return b.isEmpty() ? null : b.toString();
      }
      if (c != '\r') {
        b.append((char) c);
      }
    }
    return b.toString();
  }

  interface Transfer {
    void run() throws IOException;
  }

  private static double mibPerSecond(long bytes, Transfer t) throws IOException {
    long t0 = System.nanoTime();
    t.run();
    double seconds = (System.nanoTime() - t0) / 1e9;
    return bytes / 1048576.0 / seconds;
  }

  private static void rate(ObjectNode scenarios, String name, double[] mibPerSecond) {
    double[] sorted = mibPerSecond.clone();
    Arrays.sort(sorted);
    double p50 = sorted[(int) Math.ceil(0.5 * sorted.length) - 1];
    ObjectNode n = scenarios.putObject(name);
    n.put("unit", "MiB/s");
    n.put("p50", p50);
    n.put("min", sorted[0]);
    n.put("max", sorted[sorted.length - 1]);
    n.putPOJO("samples", mibPerSecond);
    System.out.printf(
        "%-26s %10.0f %10.0f %10s %10.0f  MiB/s%n",
        name, p50, sorted[0], "", sorted[sorted.length - 1]);
  }

  private static void latency(ObjectNode scenarios, String name, long[] nanos) {
    double[] ms = Arrays.stream(nanos).mapToDouble(v -> v / 1e6).toArray();
    double[] sorted = ms.clone();
    Arrays.sort(sorted);
    ObjectNode n = scenarios.putObject(name);
    n.put("unit", "ms");
    n.put("n", sorted.length);
    n.put("p50", rank(sorted, 50));
    n.put("p95", rank(sorted, 95));
    n.put("p99", rank(sorted, 99));
    n.put("max", sorted[sorted.length - 1]);
    n.putPOJO("samples", ms);
    System.out.printf(
        "%-26s %10.3f %10.3f %10.3f %10.3f  ms%n",
        name, rank(sorted, 50), rank(sorted, 95), rank(sorted, 99), sorted[sorted.length - 1]);
  }

  private static double rank(double[] sorted, double p) {
    return sorted[Math.max(1, (int) Math.ceil(p * sorted.length / 100.0)) - 1];
  }

  private static Double loadAverage() {
    try {
      return Double.parseDouble(Files.readString(Path.of("/proc/loadavg")).split(" ")[0]);
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }
}
