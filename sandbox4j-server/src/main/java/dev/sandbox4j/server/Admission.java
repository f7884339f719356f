package dev.sandbox4j.server;

import dev.sandbox4j.workspace.machine.SupportsListing;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.stream.Collectors;

/**
 * Whether an organization may have one more sandbox now: its create rate limit (a token bucket per
 * organization) and its quota of sandboxes, where a create or fork holds a {@link Reservation}
 * while its sandbox is made and recorded. Thread-safe: the quota is checked and reserved under a
 * per-organization lock, which guards {@code pending}.
 */
final class Admission {

  private final SupportsListing engine;
  private final Database db;
  private final ServerLimits limits;
  private final Consumer<String> forget;
  private final Map<Long, ReentrantLock> createLocks = new ConcurrentHashMap<>();
  private final Map<Long, Integer> pending = new ConcurrentHashMap<>(); // guarded by createLocks
  private final Map<Long, TokenBucket> createBuckets = new ConcurrentHashMap<>();

  /**
   * @param forget drops what the server keeps of a sandbox a timer destroyed (found while counting)
   */
  Admission(SupportsListing engine, Database db, ServerLimits limits, Consumer<String> forget) {
    this.engine = engine;
    this.db = db;
    this.limits = limits;
    this.forget = forget;
  }

  /** The create rate limit: a token from the organization's bucket, or {@code rate_limited}. */
  void takeCreateToken(Organization org) {
    TokenBucket bucket =
        createBuckets.computeIfAbsent(
            org.id(), k -> new TokenBucket(limits.createBurst(), limits.createRefill()));
    long waitMs = bucket.take();
    if (waitMs > 0) {
      long seconds = Math.max(1, (waitMs + 999) / 1000);
      throw new ApiException(
          ErrorCode.RATE_LIMITED,
          "too many sandboxes created: retry in " + seconds + " s",
          null,
          null,
          seconds);
    }
  }

  /** A place under the organization's quota, held while its sandbox is made and recorded. */
  interface Reservation extends AutoCloseable {
    @Override
    void close();
  }

  /**
   * Reserves a place under the quota, or {@code quota_exceeded}. The check and the reservation
   * happen under the organization's lock; the (slow) creation does not, so concurrent creates of
   * one organization run in parallel and still cannot overshoot the quota together.
   */
  Reservation reserve(Organization org) {
    ReentrantLock lock = createLocks.computeIfAbsent(org.id(), k -> new ReentrantLock());
    lock.lock();
    try {
      checkQuota(org, pending.getOrDefault(org.id(), 0));
      pending.merge(org.id(), 1, Integer::sum);
    } finally {
      lock.unlock();
    }
    return () -> {
      lock.lock();
      try {
        pending.merge(org.id(), -1, Integer::sum);
      } finally {
        lock.unlock();
      }
    };
  }

  private void checkQuota(Organization org, int pendingCreates) {
    List<Database.SandboxRow> rows = db.sandboxes(org.id(), null);
    if (rows.size() + pendingCreates < limits.maxSandboxesPerOrganization()) {
      return;
    }
    Set<String> live = liveIds();
    long count = pendingCreates;
    for (Database.SandboxRow r : rows) {
      if (live.contains(r.id())) {
        count++;
      } else {
        forget.accept(r.id()); // a timer destroyed it: it no longer counts
      }
    }
    if (count >= limits.maxSandboxesPerOrganization()) {
      throw new ApiException(
          ErrorCode.QUOTA_EXCEEDED,
          "the organization has " + count + " sandboxes, its limit: delete one first",
          null,
          null,
          null);
    }
  }

  private Set<String> liveIds() {
    return engine.list().stream().map(i -> i.ref().id()).collect(Collectors.toSet());
  }
}
