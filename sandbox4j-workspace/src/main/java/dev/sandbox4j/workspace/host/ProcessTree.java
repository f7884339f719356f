package dev.sandbox4j.workspace.host;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Finds and kills every process of a host command, by the marker variable its processes inherit.
 *
 * <p>A process group or the parent/child tree misses processes that called {@code setsid} or
 * daemonized (re-parented to init). Every process a command starts inherits its environment unless
 * it scrubs it on purpose, so on Linux {@code /proc/PID/environ} finds them all; killed processes
 * cannot fork, so repeating scan-and-kill until a scan finds nothing terminates. On systems without
 * {@code /proc} only the process and its descendants are killed.
 */
final class ProcessTree {
  static final String MARKER = "SANDBOX4J_HOST_RUN";
  private static final Path PROC = Path.of("/proc");
  private static final int MAX_ROUNDS = 500;

  private ProcessTree() {}

  /** Kills {@code process}, its descendants and every process whose marker starts with prefix. */
  static void killAll(ProcessHandle process, String markerPrefix) {
    if (process != null) {
      // The root first, so that a shell never outlives its killed child long enough to run its
      // next command; the descendants are listed before, since they are re-parented after.
      List<ProcessHandle> descendants = process.descendants().toList();
      process.destroyForcibly();
      descendants.forEach(ProcessHandle::destroyForcibly);
    }
    if (!Files.isDirectory(PROC.resolve("self"))) {
      return;
    }
    byte[] needle = ("\0" + MARKER + "=" + markerPrefix).getBytes(StandardCharsets.UTF_8);
    for (int round = 0; round < MAX_ROUNDS; round++) {
      List<Long> marked = findMarked(needle);
      if (marked.isEmpty()) {
        return;
      }
      for (long pid : marked) {
        ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
      }
      Thread.onSpinWait();
    }
  }

  private static List<Long> findMarked(byte[] needle) {
    List<Long> marked = new ArrayList<>();
    long self = ProcessHandle.current().pid();
    try (DirectoryStream<Path> procs = Files.newDirectoryStream(PROC, "[0-9]*")) {
      for (Path proc : procs) {
        long pid = Long.parseLong(proc.getFileName().toString());
        if (pid != self && environContains(proc.resolve("environ"), needle)) {
          marked.add(pid);
        }
      }
    } catch (IOException e) {
      // /proc vanished? nothing more to find
    }
    return marked;
  }

  /** Whether the NUL-separated environment holds a variable starting with needle (minus NUL). */
  private static boolean environContains(Path environ, byte[] needle) {
    byte[] env;
    try {
      env = Files.readAllBytes(environ);
    } catch (IOException e) {
      return false; // exited meanwhile, or another user's process
    }
    // needle starts with NUL: match at the start of the block, or after a separator
    outer:
    for (int i = -1; i + needle.length <= env.length; i++) {
      for (int j = (i < 0 ? 1 : 0); j < needle.length; j++) {
        if (env[i + j] != needle[j]) {
          continue outer;
        }
      }
      return true;
    }
    return false;
  }
}
