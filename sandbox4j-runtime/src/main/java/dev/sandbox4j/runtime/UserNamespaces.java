package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.atomic.AtomicReference;

/**
 * User namespaces held by a file descriptor only, for idmapped mounts ({@link
 * NativeFs#idmappedBind}): a multithreaded JVM cannot unshare itself, so a short-lived child
 * ({@code unshare --user}) makes the namespace, this JVM writes its maps and opens {@code
 * /proc/<pid>/ns/user}, and the child exits; the open descriptor keeps the namespace alive.
 *
 * <p>Starting the child (fork, exec of {@code unshare} and a shell) costs 5–30 ms, too much for a
 * create. Its namespace has no maps until this JVM writes them, so the next one is started ahead,
 * in the background, with no block in mind: a create takes the waiting child (writing two maps and
 * opening a descriptor take well under a millisecond) and starts the next. Thread-safe.
 */
final class UserNamespaces {
  private UserNamespaces() {}

  /** The child started ahead, waiting in its empty namespace; null while one is being started. */
  private static final AtomicReference<Process> SPARE = new AtomicReference<>();

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
      child = start();
    }
    Thread.ofVirtual().name("sandbox4j-userns-spare").start(UserNamespaces::refill);
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
    }
  }

  /** Starts a spare child unless one waits already. */
  private static void refill() {
    if (SPARE.get() != null) {
      return;
    }
    try {
      Process next = start();
      if (!SPARE.compareAndSet(null, next)) {
        next.destroyForcibly(); // another refill was quicker
      }
    } catch (RuntimeException e) {
      // the next create starts its own, and reports why if it cannot
    }
  }

  /** A child in a new user namespace without maps, once it is there. */
  private static Process start() {
    Process child;
    try {
      child =
          new ProcessBuilder(List.of("unshare", "--user", "--", "/bin/sh", "-c", "echo; read x"))
              .redirectErrorStream(true)
              .start();
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
