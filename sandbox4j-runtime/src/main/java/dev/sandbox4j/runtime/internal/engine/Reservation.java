package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Instant;

/**
 * A new sandbox's place, held: a directory that exists under a fresh id, with its CREATING record
 * and a block of host ids of its own, and whose lock is held (the caller closes it once the sandbox
 * is created or torn down).
 */
record Reservation(String id, SandboxRecord record, FileLock lock) {
  /**
   * Makes the sandbox's directory as {@code .new-<id>}, takes its lock, writes the CREATING record,
   * and only then renames it to {@code <id>}: a directory under an id always has a record and,
   * while being created, a held lock, so {@code gc} never takes a sandbox being created for an
   * interrupted one. (The lock survives the rename: it belongs to the file, not the path.)
   */
  static Reservation reserve(Path home, Image image, Engine.Spec spec) {
    Path sandboxes = home.resolve("sandboxes");
    try {
      StateDirectory.ensure(home);
      StateDirectory.requireReachable(home);
      if (!Files.isDirectory(sandboxes)) {
        try {
          Files.createDirectory(
              sandboxes,
              java.nio.file.attribute.PosixFilePermissions.asFileAttribute(
                  StateDirectory.TRAVERSE_ONLY));
        } catch (FileAlreadyExistsException raced) {
          // made meanwhile
        }
      }
      for (int attempt = 0; ; attempt++) {
        String id = Engine.newId();
        Path staging = sandboxes.resolve(".new-" + id);
        if (Files.exists(sandboxes.resolve(id))) {
          continue;
        }
        try {
          PrivateFiles.createPrivateDirectory(staging);
        } catch (FileAlreadyExistsException e) {
          if (attempt == 10) {
            throw e;
          }
          continue;
        }
        FileLock lock;
        try {
          lock = FileLock.acquire(staging.resolve("lock"));
        } catch (NoSuchFileException collectedMeanwhile) {
          continue; // a concurrent gc took the fresh directory for a crash leftover
        }
        long idBase = 0;
        try {
          // A block of host ids of its own (IdBlocks): image build steps too (their layer is
          // shifted back to the canonical ids before it enters the store, see RecipeBuild).
          idBase = IdBlocks.allocate(home, id);
          SandboxRecord record =
              new SandboxRecord(
                  SandboxRecord.FORMAT_VERSION,
                  id,
                  SandboxRecord.Status.CREATING,
                  image.name(),
                  Instant.now().toString(),
                  spec.labels(),
                  spec.limits().cpus(),
                  spec.limits().memoryBytes(),
                  spec.limits().pids(),
                  image.layerIds(),
                  spec.disk() == null ? 0 : spec.disk().bytes(),
                  spec.disk() == null ? 0 : spec.disk().inodes(),
                  idBase,
                  spec.isolation());
          // Not synced: until the RUNNING record is, a power loss leaves a sandbox that gc removes
          // (a .new- directory, or this record torn or CREATING), and no container survives one.
          record.writeNew(staging.resolve("state.json"));
          // Its root traverses it to reach rootfs/ (see StateDirectory); nobody else may.
          StateDirectory.openToSandbox(staging, record.hostBase());
          Files.move(staging, sandboxes.resolve(id), StandardCopyOption.ATOMIC_MOVE);
          return new Reservation(id, record, lock);
        } catch (NoSuchFileException collectedMeanwhile) {
          lock.close(); // a gc had the lock first and deleted the directory: another id
          continue;
        } catch (IOException | RuntimeException e) {
          lock.close();
          Trees.delete(staging);
          IdBlocks.free(home, id, idBase);
          throw e;
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot create a sandbox under " + sandboxes + ": " + e, e);
    }
  }
}
