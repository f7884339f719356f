package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.linux.Cgroups;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.oci.OciRuntime;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * The engine's gc: finds what crashes left in one state directory and removes it, sandbox by
 * sandbox under each one's lock, then what belongs to no sandbox (containers, cgroups, network
 * leftovers, spare disks, id blocks) and the image store's leftovers. Never touches a sandbox whose
 * lock someone holds, nor one whose record it cannot read.
 */
final class SandboxGc {
  private static final System.Logger LOG = System.getLogger(Engine.class.getName());

  private final Engine engine;
  private final Path home;
  private final Path sandboxes;
  private final ImageStore images;
  private final Cgroups cgroups;
  private final Networks networks;

  SandboxGc(Engine engine) {
    this.engine = engine;
    this.home = engine.home();
    this.sandboxes = home.resolve("sandboxes");
    this.images = engine.images();
    this.cgroups = engine.cgroups();
    this.networks = engine.networks();
  }

  /**
   * Removes what crashes left: sandboxes interrupted while being created or destroyed (nobody holds
   * their lock), directories of half-destroyed ones, containers, mounts and cgroups that belong to
   * no sandbox, and leftovers of interrupted image builds. Returns what it removed.
   */
  List<String> gc() {
    engine.runtime().restoreFavorDynmodsAfterCrash(); // a checkpoint or restore that died midway
    List<String> removed = new ArrayList<>();
    if (Files.isDirectory(sandboxes)) {
      try (Stream<Path> dirs = Files.list(sandboxes)) {
        for (Path dir : dirs.sorted().toList()) {
          String name = dir.getFileName().toString();
          try {
            if (name.startsWith(".new-")) {
              Optional<FileLock> lock = FileLock.tryAcquire(dir.resolve("lock"));
              if (lock.isPresent()) { // its creator died before naming it: nothing else exists yet
                try (FileLock held = lock.get()) { // held while deleting: see removeIfInterrupted
                  Trees.delete(dir);
                }
                removed.add("half-reserved sandbox directory " + name);
              }
            } else if (name.startsWith(".destroyed-")) {
              String id = name.substring(".destroyed-".length(), name.lastIndexOf('-'));
              Overlay.unmount(dir.resolve("rootfs"));
              SandboxDisk.unmount(dir);
              Trees.delete(dir);
              removed.add("leftover files of destroyed sandbox " + id);
            } else if (SandboxHome.isId(name) && removeIfInterrupted(name, dir)) {
              removed.add("interrupted sandbox local:" + name);
            }
          } catch (NoSuchFileException e) {
            // renamed or deleted meanwhile by a concurrent create, destroy or gc
          } catch (IOException e) {
            // A whole record this version cannot read (a newer version's state, say) is never
            // destroyed on a guess; the other sandboxes still get their gc.
            LOG.log(
                System.Logger.Level.WARNING,
                "gc left " + dir + " alone: cannot read it (" + e.getMessage() + ")");
          }
        }
      } catch (IOException e) {
        throw new WorkspaceException("gc cannot read " + sandboxes + ": " + e, e);
      }
    }
    for (OciRuntime runtime : engine.runtimes()) {
      for (String id : runtime.list()) {
        if (!Files.isDirectory(sandboxes.resolve(id))) {
          runtime.delete(id);
          removed.add("orphan container " + id);
        }
      }
    }
    for (String id : cgroups.sandboxIds()) {
      if (SandboxHome.isId(id) && !Files.isDirectory(sandboxes.resolve(id))) {
        cgroups.removeSandbox(id);
        removed.add("orphan cgroup " + cgroups.pathOf(id));
      }
    }
    removed.addAll(networks.gc(sandboxes));
    removed.addAll(SpareDisks.gc(home));
    removed.addAll(IdBlocks.gc(home));
    removed.addAll(images.gc());
    return removed;
  }

  /**
   * Tears down a sandbox whose record is missing, torn, or says CREATING or DESTROYING while nobody
   * holds its lock, and keeps holding the lock from the check to the end: released in between,
   * someone could take it and change the sandbox that gc then destroys. A torn record is a CREATING
   * one that a power loss cut short (see {@link SandboxRecord}): the records of usable states are
   * written durably. A suspended or stopped one whose transition was interrupted is finished
   * instead ({@link Lifecycle#finishInterrupted}).
   */
  private boolean removeIfInterrupted(String id, Path dir) throws IOException {
    Optional<FileLock> lock = FileLock.tryAcquire(dir.resolve("lock"));
    if (lock.isEmpty()) {
      return false; // someone is creating or destroying it right now
    }
    try (FileLock held = lock.get()) {
      Path state = dir.resolve("state.json");
      if (Files.exists(state) && !SandboxRecord.isTorn(state)) {
        SandboxRecord record = SandboxRecord.read(state);
        if (record.status().isUsable()) {
          Lifecycle.finishInterrupted(engine, record);
          return false;
        }
      }
      engine.teardown(id, dir);
      return true;
    }
  }
}
