package dev.sandbox4j.runtime.internal.linux;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Freezes and thaws every process of a sandbox through its cgroup freezer ({@link
 * Cgroups#freezerFile}): the v1 {@code freezer.state} ({@code FROZEN}/{@code THAWED}) or the v2
 * {@code cgroup.freeze} ({@code 1}/{@code 0}). A frozen process keeps its memory and resumes where
 * it was; a command started into a frozen sandbox freezes too, so every operation thaws first.
 *
 * <p>The v1 freezer can stay {@code FREEZING} for good after a single write: a task that was
 * running when the kernel walked the cgroup (a shell's vfork parent entering its wait, a child
 * forked during the walk) is not marked, and nothing walks again. Measured here: a dash loop that
 * forks without pause stuck about one freeze in 35. Writing {@code FROZEN} again while the state is
 * {@code FREEZING} walks the tasks again and finishes every time (as runc does); the v2 freezer
 * follows forks itself and is written once.
 */
public final class Freezer {
  private static final long WAIT_NANOS = 10_000_000_000L;

  private Freezer() {}

  /**
   * Freezes the sandbox's processes and waits until the kernel says they all are; does nothing if
   * the sandbox has no cgroup (its container is not running).
   *
   * @throws WorkspaceException if they do not freeze within 10 s (they are thawed again)
   */
  public static void freeze(Cgroups cgroups, String id) {
    Optional<Path> file = cgroups.freezerFile(id);
    if (file.isEmpty()) {
      return;
    }
    Path f = file.get();
    boolean v1 = f.getFileName().toString().equals("freezer.state");
    try {
      Files.writeString(f, v1 ? "FROZEN" : "1");
      long end = System.nanoTime() + WAIT_NANOS;
      while (!isFrozen(f, v1)) {
        if (System.nanoTime() > end) {
          String running = notFrozen(cgroups, id);
          thaw(cgroups, id);
          throw new WorkspaceException(
              "the processes of sandbox local:"
                  + id
                  + " did not freeze within 10 s"
                  + (running.isEmpty() ? "" : "; still running: " + running));
        }
        Thread.sleep(0, 200_000);
        if (v1) {
          Files.writeString(f, "FROZEN"); // walks the tasks again: see the class comment
        }
      }
    } catch (IOException e) {
      if (Files.exists(f)) {
        throw new WorkspaceException("cannot freeze sandbox local:" + id + ": " + e, e);
      } // its cgroup went away: nothing runs to freeze
    } catch (InterruptedException e) {
      thaw(cgroups, id);
      Thread.currentThread().interrupt();
      throw new java.util.concurrent.CancellationException("interrupted while freezing " + id);
    }
  }

  /** Thaws the sandbox's processes; quiet if it has no cgroup or is not frozen. */
  public static void thaw(Cgroups cgroups, String id) {
    Optional<Path> file = cgroups.freezerFile(id);
    if (file.isEmpty()) {
      return;
    }
    Path f = file.get();
    boolean v1 = f.getFileName().toString().equals("freezer.state");
    try {
      Files.writeString(f, v1 ? "THAWED" : "0");
    } catch (IOException e) {
      if (Files.exists(f)) {
        throw new WorkspaceException("cannot thaw sandbox local:" + id + ": " + e, e);
      }
    }
  }

  /** Whether the sandbox's processes are frozen (or freezing). */
  public static boolean isFrozen(Cgroups cgroups, String id) {
    Optional<Path> file = cgroups.freezerFile(id);
    if (file.isEmpty()) {
      return false;
    }
    Path f = file.get();
    try {
      if (f.getFileName().toString().equals("freezer.state")) {
        return !Files.readString(f).strip().equals("THAWED");
      }
      return Files.readString(f).strip().equals("1");
    } catch (IOException e) {
      return false;
    }
  }

  /**
   * The sandbox's tasks that are not asleep in the freezer, as {@code pid (comm) state in wchan},
   * at most five: what an operator needs to see why a freeze did not finish.
   */
  private static String notFrozen(Cgroups cgroups, String id) {
    List<String> running = new ArrayList<>();
    for (long pid : cgroups.pids(id)) {
      Path proc = Path.of("/proc", Long.toString(pid));
      try {
        String wchan = Files.readString(proc.resolve("wchan")).strip();
        if (wchan.contains("refrigerator") || wchan.contains("freezer")) {
          continue;
        }
        String stat = Files.readString(proc.resolve("stat"));
        int close = stat.lastIndexOf(')');
        String comm = stat.substring(stat.indexOf('(') + 1, close);
        String state = stat.substring(close + 2, close + 3);
        running.add(pid + " (" + comm + ") " + state + " in " + (wchan.isEmpty() ? "-" : wchan));
      } catch (IOException | RuntimeException e) {
        continue; // it exited meanwhile
      }
      if (running.size() == 5) {
        break;
      }
    }
    return String.join(", ", running);
  }

  private static boolean isFrozen(Path f, boolean v1) throws IOException {
    if (v1) {
      return Files.readString(f).strip().equals("FROZEN");
    }
    return Files.readString(f.resolveSibling("cgroup.events")).contains("frozen 1");
  }
}
