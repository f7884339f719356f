package dev.sandbox4j.runtime.internal.linux;

import dev.sandbox4j.runtime.internal.engine.IdBlocks;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.atomic.AtomicReference;

/**
 * User namespaces held by a file descriptor only, for idmapped mounts ({@link
 * MountCalls#idmappedTree}): a multithreaded JVM cannot unshare itself, so a short-lived child
 * ({@code unshare --user}) makes the namespace, this JVM writes its maps and opens {@code
 * /proc/<pid>/ns/user}, and the child exits; the open descriptor keeps the namespace alive.
 *
 * <p>Starting that child (three execs: the JDK's spawn helper, {@code unshare}, a shell) costs 5–40
 * ms of CPU, which a create cannot afford, nor a container start running beside it. So the
 * namespace of a block ({@link IdBlocks}) is kept once made ({@link #forBlock}: up to {@value
 * #CACHED} blocks, least recently used dropped), and the allocator hands out a block whose
 * namespace this JVM holds first ({@link #cachedBlocks}): a create after a destroy, the steady
 * state of a busy engine, starts no process at all. A block without one takes the spare child
 * started ahead (its namespace has no maps until this JVM writes them), and a new spare is started
 * at the lowest priority ({@code nice}). Thread-safe.
 */
public final class UserNamespaces {
  private UserNamespaces() {}

  /** How many blocks' namespaces are kept: a descriptor and a few KiB of kernel memory each. */
  static final int CACHED = 64;

  /** The child started ahead, waiting in its empty namespace; null while one is being started. */
  private static final AtomicReference<Process> SPARE = new AtomicReference<>();

  /** The namespaces kept, by the host id their canonical ids map to; guarded by itself. */
  private static final LinkedHashMap<Long, Integer> CACHE =
      new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, Integer> eldest) {
          if (size() > CACHED) {
            NativeFs.close(eldest.getValue());
            return true;
          }
          return false;
        }
      };

  private static final boolean NICE = HostCommand.onPath("nice");

  /**
   * A descriptor of a namespace mapping the canonical block ({@link Image#UID_SHIFT}, {@value
   * Image#ID_RANGE} ids) to host ids from {@code hostBase}; the caller closes it ({@link
   * NativeFs#close}). Kept for the next sandbox of that block.
   */
  public static int forBlock(long hostBase) {
    synchronized (CACHE) {
      Integer kept = CACHE.get(hostBase);
      if (kept != null) {
        return reopen(kept);
      }
    }
    int made = create(Image.UID_SHIFT, hostBase, Image.ID_RANGE);
    synchronized (CACHE) {
      Integer raced = CACHE.putIfAbsent(hostBase, made);
      if (raced != null) {
        NativeFs.close(made);
        made = raced;
      }
      return reopen(made);
    }
  }

  /** The blocks whose namespaces are kept, most recently used first. */
  public static List<Long> cachedBlocks() {
    synchronized (CACHE) {
      return new ArrayList<>(CACHE.keySet()).reversed();
    }
  }

  /** A descriptor of its own for a kept namespace (the cache may close its own meanwhile). */
  private static int reopen(int fd) {
    try {
      return NativeFs.openat(
          NativeFs.AT_FDCWD,
          ("/proc/self/fd/" + fd).getBytes(StandardCharsets.US_ASCII),
          NativeFs.O_RDONLY | NativeFs.O_CLOEXEC,
          0);
    } catch (NativeFs.Errno e) {
      throw new WorkspaceException("cannot reopen a user namespace: " + e, e);
    }
  }

  /**
   * A namespace mapping {@code size} ids from {@code inside} to host ids from {@code host}, uids
   * and gids alike; the caller closes the returned descriptor ({@link NativeFs#close}).
   */
  static int create(long inside, long host, long size) {
    Process child = SPARE.getAndSet(null);
    if (child == null || !child.isAlive()) {
      if (child != null) {
        child.destroyForcibly();
      }
      child = start(false);
    }
    try {
      Path proc = Path.of("/proc", Long.toString(child.pid()));
      String map = inside + " " + host + " " + size + "\n";
      Files.writeString(
          proc.resolve("uid_map"), map, StandardCharsets.US_ASCII, StandardOpenOption.WRITE);
      Files.writeString(
          proc.resolve("gid_map"), map, StandardCharsets.US_ASCII, StandardOpenOption.WRITE);
      return NativeFs.openat(
          NativeFs.AT_FDCWD,
          proc.resolve("ns/user").toString().getBytes(StandardCharsets.UTF_8),
          NativeFs.O_RDONLY | NativeFs.O_CLOEXEC,
          0);
    } catch (IOException | NativeFs.Errno e) {
      throw new WorkspaceException(
          "cannot make a user namespace " + inside + " -> " + host + ": " + e, e);
    } finally {
      child.destroyForcibly();
      Thread.ofVirtual().name("sandbox4j-userns-spare").start(UserNamespaces::refill);
    }
  }

  /** Starts a spare child unless one waits already. */
  private static void refill() {
    if (SPARE.get() != null) {
      return;
    }
    try {
      Process next = start(true);
      if (!SPARE.compareAndSet(null, next)) {
        next.destroyForcibly(); // another refill was quicker
      }
    } catch (RuntimeException e) {
      // the next create starts its own, and reports why if it cannot
    }
  }

  /**
   * A child in a new user namespace without maps, once it is there; {@code spare}: at the lowest
   * priority ({@code nice}), so that it takes no CPU from a container starting meanwhile.
   */
  private static Process start(boolean spare) {
    List<String> argv = new ArrayList<>();
    if (spare && NICE) {
      argv.addAll(List.of("nice", "-n", "19"));
    }
    argv.addAll(List.of("unshare", "--user", "--", "/bin/sh", "-c", "echo; read x"));
    Process child;
    try {
      child = new ProcessBuilder(argv).redirectErrorStream(true).start();
    } catch (IOException e) {
      throw new WorkspaceException("cannot start unshare for a user namespace: " + e, e);
    }
    try {
      if (child.getInputStream().read() != '\n') {
        throw new WorkspaceException("unshare --user did not start: exit " + child.waitFor());
      }
      return child;
    } catch (IOException | RuntimeException e) {
      child.destroyForcibly();
      throw e instanceof WorkspaceException w
          ? w
          : new WorkspaceException("unshare --user did not start: " + e, e);
    } catch (InterruptedException e) {
      child.destroyForcibly();
      Thread.currentThread().interrupt();
      throw new CancellationException("interrupted making a user namespace");
    }
  }
}
