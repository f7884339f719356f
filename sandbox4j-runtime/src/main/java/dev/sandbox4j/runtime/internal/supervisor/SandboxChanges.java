package dev.sandbox4j.runtime.internal.supervisor;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.Timers;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import java.io.IOException;
import java.nio.file.ClosedWatchServiceException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardWatchEventKinds;
import java.nio.file.WatchEvent;
import java.nio.file.WatchKey;
import java.nio.file.WatchService;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * Which of a home's sandboxes changed since the {@link Supervisor} last asked, so that its work
 * follows changes instead of the number of sandboxes.
 *
 * <p><b>How it learns.</b> From the kernel (inotify, through {@link WatchService}): a watch on
 * {@code sandboxes/} sees a sandbox directory appear or go, and a watch on each sandbox directory
 * sees its record ({@code state.json}), its timers ({@code timers.json}) or its {@linkplain
 * Engine#PARKED parked} marker written, renamed into place or deleted, by any process: a JVM killed
 * right after writing is no problem, since the kernel reports the write, not the writer. Other
 * files of the directory (command pid files, the activity stamp) are ignored: the supervisor looks
 * at them itself when it needs to.
 *
 * <p><b>Safety net.</b> Every {@link #RECONCILE}, at its first call, and whenever the kernel says
 * it dropped events (an overflow), it lists {@code sandboxes/} and compares each sandbox's record
 * and timers with the identity and modification time it saw last (three {@code stat}s a sandbox, no
 * read): what differs counts as changed. A sandbox directory it cannot watch (the user's inotify
 * watch limit, {@code fs.inotify.max_user_watches}, reached) is reported changed on every call, as
 * every sandbox was before this class existed; the log says so once.
 *
 * <p>Not thread-safe: the supervisor's scan loop is its only user.
 */
final class SandboxChanges implements AutoCloseable {
  /** How often the directory is listed and compared even though the kernel reported nothing. */
  static final Duration RECONCILE = Duration.ofSeconds(60);

  /** The files of a sandbox directory whose change the supervisor must see. */
  private static final Set<String> WATCHED_FILES =
      Set.of("state.json", Timers.SETTINGS_FILE, Engine.PARKED);

  private final Path sandboxes;
  private final Consumer<String> log;
  private final WatchService watcher;
  private WatchKey sandboxesKey;
  private final Map<String, WatchKey> keys = new HashMap<>();
  private final Map<WatchKey, String> ids = new HashMap<>();
  private final Set<String> unwatched = new HashSet<>();
  private final Map<String, Stamp> stamps = new HashMap<>();
  private long lastReconcile;
  private boolean reconciled;
  private boolean toldUnwatched;
  private int reads;

  /** What a sandbox's files looked like: each file's identity and modification time, or null. */
  private record Stamp(Object state, Object timers, boolean parked) {}

  SandboxChanges(Path sandboxes, Consumer<String> log) throws IOException {
    this.sandboxes = sandboxes;
    this.log = log;
    this.watcher = FileSystems.getDefault().newWatchService();
  }

  /**
   * The ids of the sandboxes whose directory appeared, went, or had its record, timers or parked
   * marker changed since the last call (every sandbox at the first call); and of those it cannot
   * watch. Ids only: the caller reads what it needs, then calls {@link #seen}.
   */
  Set<String> changed() {
    Set<String> changed = new LinkedHashSet<>();
    boolean full = !reconciled || System.nanoTime() - lastReconcile >= RECONCILE.toNanos();
    if (sandboxesKey == null || !sandboxesKey.isValid()) {
      full |= watchSandboxes();
    }
    for (WatchKey key; (key = watcher.poll()) != null; ) {
      full |= drain(key, changed);
    }
    if (full) {
      reconcile(changed);
    }
    changed.addAll(unwatched);
    return changed;
  }

  /** Whether it (re)started watching {@code sandboxes/}: events before that were missed. */
  private boolean watchSandboxes() {
    try {
      sandboxesKey =
          sandboxes.register(
              watcher, StandardWatchEventKinds.ENTRY_CREATE, StandardWatchEventKinds.ENTRY_DELETE);
      return true;
    } catch (NoSuchFileException e) {
      return true; // not there yet: listed each time until it is
    } catch (IOException | ClosedWatchServiceException e) {
      log.accept("cannot watch " + sandboxes + " (every sandbox is looked at each time): " + e);
      return true;
    }
  }

  /** Adds what {@code key} reports to {@code changed}; returns whether events were lost. */
  private boolean drain(WatchKey key, Set<String> changed) {
    boolean lost = false;
    String owner = ids.get(key);
    for (WatchEvent<?> event : key.pollEvents()) {
      if (event.kind() == StandardWatchEventKinds.OVERFLOW) {
        if (owner != null) {
          changed.add(owner);
        } else {
          lost = true;
        }
        continue;
      }
      String name = Objects.toString(event.context(), "");
      if (owner == null && key == sandboxesKey) {
        if (SandboxHome.isId(name)) {
          changed.add(name);
        }
      } else if (owner != null && WATCHED_FILES.contains(name)) {
        changed.add(owner);
      }
    }
    if (!key.reset()) {
      // its directory is gone (or was replaced): the caller finds out which
      if (owner != null) {
        changed.add(owner);
        forgetKey(owner);
      } else {
        lost = true;
      }
    }
    return lost;
  }

  /** Adds to {@code changed} what differs between {@code sandboxes/} and what it last saw. */
  private void reconcile(Set<String> changed) {
    reconciled = true;
    lastReconcile = System.nanoTime();
    Set<String> listed = new HashSet<>();
    reads++;
    try (Stream<Path> dirs = Files.list(sandboxes)) {
      for (Path dir : dirs.toList()) {
        String id = dir.getFileName().toString();
        if (SandboxHome.isId(id)) {
          listed.add(id);
        }
      }
    } catch (IOException e) {
      // no sandboxes/ (yet or any more): every sandbox it knew is gone
    }
    for (String id : listed) {
      Stamp before = stamps.get(id);
      if (before == null || !before.equals(stamp(sandboxes.resolve(id)))) {
        changed.add(id);
      }
    }
    for (String id : List.copyOf(stamps.keySet())) {
      if (!listed.contains(id)) {
        changed.add(id);
      }
    }
  }

  /**
   * Called by the supervisor just before it reads sandbox {@code id}'s files: watches its directory
   * (if it exists) from now on and remembers how its files look, so that a change made while it
   * reads is reported next time. Forgets a sandbox whose directory is gone.
   */
  void seen(String id, Path dir) {
    if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
      forget(id);
      return;
    }
    if (!keys.containsKey(id) && !unwatched.contains(id)) {
      try {
        WatchKey key =
            dir.register(
                watcher,
                StandardWatchEventKinds.ENTRY_CREATE,
                StandardWatchEventKinds.ENTRY_DELETE,
                StandardWatchEventKinds.ENTRY_MODIFY);
        WatchKey old = keys.put(id, key);
        if (old != null && old != key) {
          ids.remove(old);
        }
        ids.put(key, id);
      } catch (NoSuchFileException e) {
        forget(id);
        return;
      } catch (IOException | ClosedWatchServiceException e) {
        unwatched.add(id);
        if (!toldUnwatched) {
          toldUnwatched = true;
          log.accept(
              "cannot watch "
                  + dir
                  + " ("
                  + e.getMessage()
                  + "; see fs.inotify.max_user_watches): such sandboxes are looked at every scan");
        }
      }
    }
    stamps.put(id, stamp(dir));
  }

  /** Stops watching sandbox {@code id} (destroyed). */
  void forget(String id) {
    forgetKey(id);
    unwatched.remove(id);
    stamps.remove(id);
  }

  private void forgetKey(String id) {
    WatchKey key = keys.remove(id);
    if (key != null) {
      ids.remove(key);
      key.cancel();
    }
  }

  private Stamp stamp(Path dir) {
    reads += 3;
    return new Stamp(
        identity(dir.resolve("state.json")),
        identity(dir.resolve(Timers.SETTINGS_FILE)),
        Files.exists(dir.resolve(Engine.PARKED), LinkOption.NOFOLLOW_LINKS));
  }

  /** A file's inode and modification time (a rename into place changes the first); null if none. */
  private static Object identity(Path file) {
    try {
      BasicFileAttributes a =
          Files.readAttributes(file, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
      return List.of(Objects.toString(a.fileKey()), a.lastModifiedTime());
    } catch (IOException e) {
      return null;
    }
  }

  /** How many sandboxes it cannot watch (looked at every time). */
  int unwatchedCount() {
    return unwatched.size();
  }

  /** Files read or looked up ({@code stat}, listing) since the last call; for tests. */
  int takeReads() {
    int n = reads;
    reads = 0;
    return n;
  }

  @Override
  public void close() throws IOException {
    watcher.close();
  }
}
