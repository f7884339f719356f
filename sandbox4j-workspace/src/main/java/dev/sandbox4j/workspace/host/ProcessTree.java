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
 *
 * <p>A process in the middle of {@code execve} shows an empty environment for a moment (its new
 * memory is in place, its environment not yet), so a scan can miss a marked process that is just
 * exec'ing: a setsid'd {@code sh -c '…; exec sleep 300'} survived the output limit that way on a
 * loaded machine. A scan that finds no marked process but some with an empty environment (not
 * zombies, not kernel threads) looks at those again for a little while before it concludes.
 */
final class ProcessTree {
  static final String MARKER = "SANDBOX4J_HOST_RUN";
  private static final Path PROC = Path.of("/proc");
  private static final int MAX_ROUNDS = 500;

  /** How long a blank environment may stay blank before it counts as a really empty one. */
  private static final long BLANK_SETTLE_NANOS = 50_000_000L;

  /** {@code PF_KTHREAD} in {@code /proc/PID/stat}'s flags: kernel threads have no environment. */
  private static final long PF_KTHREAD = 0x00200000L;

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
    byte[] needle = needle(markerPrefix);
    for (int round = 0; round < MAX_ROUNDS; round++) {
      Scan scan = scan(PROC, needle);
      if (scan.marked().isEmpty() && !anyTurnsOutMarked(PROC, scan.blank(), needle)) {
        return;
      }
      for (long pid : scan.marked()) {
        ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
      }
      Thread.onSpinWait();
    }
  }

  /** What a marked environment holds: the marker variable, its value starting with prefix. */
  static byte[] needle(String markerPrefix) {
    return ("\0" + MARKER + "=" + markerPrefix).getBytes(StandardCharsets.UTF_8);
  }

  /**
   * The marked processes, and those whose environment read empty: possibly marked ones caught in
   * {@code execve}.
   */
  record Scan(List<Long> marked, List<Long> blank) {}

  /** One pass over {@code procRoot} ({@code /proc}, or a copy of its shape in a test). */
  static Scan scan(Path procRoot, byte[] needle) {
    List<Long> marked = new ArrayList<>();
    List<Long> blank = new ArrayList<>();
    long self = ProcessHandle.current().pid();
    try (DirectoryStream<Path> procs = Files.newDirectoryStream(procRoot, "[0-9]*")) {
      for (Path proc : procs) {
        long pid = Long.parseLong(proc.getFileName().toString());
        if (pid == self) {
          continue;
        }
        byte[] env = environ(proc);
        if (env != null && contains(env, needle)) {
          marked.add(pid);
        } else if (env != null && env.length == 0 && isLiveUserProcess(proc)) {
          blank.add(pid);
        }
      }
    } catch (IOException e) {
      // /proc vanished? nothing more to find
    }
    return new Scan(marked, blank);
  }

  /**
   * Looks at processes whose environment read empty until each shows one, ends, or has stayed blank
   * for {@link #BLANK_SETTLE_NANOS}; whether one of them turned out marked.
   */
  static boolean anyTurnsOutMarked(Path procRoot, List<Long> blank, byte[] needle) {
    List<Long> waiting = new ArrayList<>(blank);
    long deadline = System.nanoTime() + BLANK_SETTLE_NANOS;
    while (!waiting.isEmpty() && System.nanoTime() < deadline) {
      for (var it = waiting.iterator(); it.hasNext(); ) {
        Path proc = procRoot.resolve(Long.toString(it.next()));
        byte[] env = environ(proc);
        if (env != null && contains(env, needle)) {
          return true;
        }
        if (env == null || env.length > 0 || !isLiveUserProcess(proc)) {
          it.remove();
        }
      }
      Thread.onSpinWait();
    }
    return false;
  }

  /** The process's environment block, or null if it cannot be read (exited, another user's). */
  private static byte[] environ(Path proc) {
    try {
      return Files.readAllBytes(proc.resolve("environ"));
    } catch (IOException e) {
      return null;
    }
  }

  /**
   * Neither a zombie nor a kernel thread: a process that has, or is about to have, an environment.
   */
  private static boolean isLiveUserProcess(Path proc) {
    String stat;
    try {
      stat = Files.readString(proc.resolve("stat"), StandardCharsets.ISO_8859_1);
    } catch (IOException e) {
      return false;
    }
    // "pid (comm) state ppid pgrp session tty_nr tpgid flags ...": comm may hold spaces and ')'
    String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    if (fields.length < 7 || fields[0].equals("Z") || fields[0].equals("X")) {
      return false;
    }
    try {
      return (Long.parseLong(fields[6]) & PF_KTHREAD) == 0;
    } catch (NumberFormatException e) {
      return false;
    }
  }

  /** Whether the NUL-separated environment holds a variable starting with needle (minus NUL). */
  private static boolean contains(byte[] env, byte[] needle) {
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
