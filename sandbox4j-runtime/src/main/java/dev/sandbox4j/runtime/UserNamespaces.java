package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;

/**
 * User namespaces held by a file descriptor only, for idmapped mounts ({@link
 * NativeFs#idmappedBind}): a multithreaded JVM cannot unshare itself, so a short-lived child
 * ({@code unshare --user}) makes the namespace, this JVM writes its maps and opens {@code
 * /proc/<pid>/ns/user}, and the child exits; the open descriptor keeps the namespace alive.
 *
 * <p>Status (issue 13 item 4, distinct id ranges): a building block, not wired into sandbox
 * creation yet; see docs/design.md.
 */
final class UserNamespaces {
  private UserNamespaces() {}

  /**
   * A namespace mapping {@code size} ids from {@code inside} to host ids from {@code host}, uids
   * and gids alike; the caller closes the returned descriptor ({@link NativeFs#close}).
   */
  static int create(long inside, long host, long size) {
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
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted making a user namespace");
    } finally {
      child.destroyForcibly();
    }
  }
}
