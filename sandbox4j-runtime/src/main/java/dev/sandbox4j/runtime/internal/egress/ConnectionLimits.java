package dev.sandbox4j.runtime.internal.egress;

import java.net.InetAddress;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The connection limits that keep one sandbox, or several together, from starving another: each
 * client (a source address) gets its first {@code reservedPerClient} connections whatever the
 * others hold, and at most {@code maxPerClient} at once; the connections between the two draw on a
 * shared pool of {@code maxConnections}. Thread-safe.
 */
final class ConnectionLimits {
  private final Semaphore connections;
  private final int maxConnections;
  private final int maxPerClient;
  private final int reservedPerClient;
  private final ConcurrentHashMap<InetAddress, AtomicInteger> perClient = new ConcurrentHashMap<>();

  ConnectionLimits(int maxConnections, int maxPerClient, int reservedPerClient) {
    this.connections = new Semaphore(maxConnections);
    this.maxConnections = maxConnections;
    this.maxPerClient = maxPerClient;
    this.reservedPerClient = reservedPerClient;
  }

  /** A connection let in, or refused with {@code refusal}; whether it holds a shared permit. */
  record Admission(String refusal, boolean holdsPermit) {}

  /** Counts a new connection from {@code source}; every admission is {@link #release}d once. */
  Admission admit(InetAddress source) {
    // compute/computeIfPresent: a count and its removal at zero are atomic per source.
    int count =
        perClient.compute(source, (k, v) -> v == null ? new AtomicInteger(1) : increment(v)).get();
    // A client's first connections need no permit: however many the others hold, it gets in.
    String refusal = null;
    boolean permit = false;
    if (count > maxPerClient) {
      refusal =
          "sandbox4j egress proxy: too many open connections from "
              + source.getHostAddress()
              + " ("
              + maxPerClient
              + " at once per sandbox); close some and retry";
    } else if (count > reservedPerClient) {
      permit = connections.tryAcquire();
      if (!permit) {
        refusal =
            "sandbox4j egress proxy: too many open connections from "
                + source.getHostAddress()
                + " while the proxy is busy (all "
                + maxConnections
                + " shared connections in use; each sandbox keeps "
                + reservedPerClient
                + " of its own); close some and retry";
      }
    }
    return new Admission(refusal, permit);
  }

  /** The end of a connection {@link #admit} counted. */
  void release(InetAddress source, boolean holdsPermit) {
    if (holdsPermit) {
      connections.release();
    }
    perClient.computeIfPresent(source, (k, v) -> v.decrementAndGet() == 0 ? null : v);
  }

  private static AtomicInteger increment(AtomicInteger v) {
    v.incrementAndGet();
    return v;
  }
}
