package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.linux.MountCalls;
import dev.sandbox4j.runtime.internal.linux.UserNamespaces;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * The host id blocks of sandboxes: each sandbox's user namespace maps its ids {@code 0..65535} to a
 * block of {@value Image#ID_RANGE} host ids of its own, so that one sandbox's ids own nothing of
 * another's on the host (issue 13 item 4). Image layers keep their canonical ids ({@link
 * Image#UID_SHIFT}{@code ..}); a sandbox sees them through idmapped mounts ({@link
 * MountCalls#idmappedTree}).
 *
 * <p><b>Where blocks lie.</b> Block {@code n} is host ids {@code BASE + n * 65536} onwards, {@code
 * BASE} = 2^30, {@value #BLOCKS} blocks: all below 2^31 (no sign trouble anywhere), far above the
 * canonical block (100000..165535, which owns the store's layers on the host and is never handed
 * out) and above what {@code useradd} gives host users in {@code /etc/subuid} (by default up to
 * 600100000). A block that overlaps any {@code /etc/subuid} or {@code /etc/subgid} entry is skipped
 * anyway.
 *
 * <p><b>Claims.</b> A block is taken by creating {@code /var/lib/sandbox4j-ids/<n>} exclusively,
 * holding the home and the sandbox id: host-global, so two homes on one host never hand out the
 * same block, and on the host's disk, so the claims survive a reboot (under {@code /run} a new home
 * could take a block of a hibernated sandbox before its home claimed it again). The sandbox's
 * record keeps its block ({@link SandboxRecord#idBase}); stop, suspend, hibernate and engine
 * restarts keep it; destroy frees it; a claim whose sandbox no longer exists (a crash, a deleted
 * home) is taken over by the next allocation and removed by its home's gc. Changes are made under
 * one host-global lock ({@code .lock}), so a takeover never races a fresh claim.
 *
 * <p>Records written before blocks existed have none ({@code idBase} 0) and keep the canonical
 * block: their upper layers are owned by it.
 */
public final class IdBlocks {
  public static final long BASE = 1L << 30;
  static final int BLOCKS = 16384;
  public static final Path CLAIMS = Path.of("/var/lib/sandbox4j-ids");

  private IdBlocks() {}

  /** The host id container id 0 of a sandbox with record {@code idBase} maps to. */
  static int hostBase(long idBase) {
    return idBase == 0 ? Image.UID_SHIFT : Math.toIntExact(idBase);
  }

  /** Whether {@code idBase} is a block this allocator hands out (not the canonical one). */
  public static boolean isBlock(long idBase) {
    return idBase >= BASE
        && idBase < BASE + (long) BLOCKS * Image.ID_RANGE
        && (idBase - BASE) % Image.ID_RANGE == 0;
  }

  /** Claims a free block for sandbox {@code id} of {@code home}; returns its first host id. */
  static long allocate(Path home, String id) {
    return allocate(CLAIMS, home, id);
  }

  /**
   * {@link #allocate(Path, String)} with the claims in {@code claims} (tests). A free block is
   * claimed without the lock: creating its file exclusively is atomic, and a claim file is only
   * ever deleted or taken over under the lock, so no lock holder can judge a fresh claim stale.
   * Only when no block is free are the claims of sandboxes that no longer exist taken over, under
   * it.
   */
  static long allocate(Path claims, Path home, String id) {
    String me = owner(home, id);
    List<long[]> subordinate = subordinateRanges();
    int start = Math.floorMod(me.hashCode(), BLOCKS);
    try {
      if (!Files.isDirectory(claims)) {
        PrivateFiles.createPrivateDirectories(claims);
      }
      // The claim is written whole to a file of its own first, then linked into place (link fails
      // if the name exists): nobody ever reads a claim half written.
      Path written = Files.createTempFile(claims, ".new-", "", PrivateFiles.privateFile());
      try {
        Files.writeString(written, me, StandardOpenOption.WRITE);
        // First a block whose user namespace this JVM keeps: its idmapped mounts start no process.
        for (long base : UserNamespaces.cachedBlocks()) {
          if (isBlock(base) && !overlaps(subordinate, base)) {
            try {
              Files.createLink(
                  claims.resolve(Long.toString((base - BASE) / Image.ID_RANGE)), written);
              return base;
            } catch (FileAlreadyExistsException taken) {
              // in use again
            }
          }
        }
        for (int i = 0; i < BLOCKS; i++) {
          int n = (start + i) % BLOCKS;
          if (overlaps(subordinate, BASE + (long) n * Image.ID_RANGE)) {
            continue;
          }
          try {
            Files.createLink(claims.resolve(Integer.toString(n)), written);
            return BASE + (long) n * Image.ID_RANGE;
          } catch (FileAlreadyExistsException taken) {
            // the next one
          }
        }
      } finally {
        Files.deleteIfExists(written);
      }
      try (FileLock lock = FileLock.acquire(claims.resolve(".lock"))) {
        for (int i = 0; i < BLOCKS; i++) {
          int n = (start + i) % BLOCKS;
          long base = BASE + (long) n * Image.ID_RANGE;
          Path claim = claims.resolve(Integer.toString(n));
          if (overlaps(subordinate, base)) {
            continue;
          }
          String holder = readClaim(claim);
          if (holder == null || isStale(holder)) {
            // freed meanwhile, or its sandbox is gone: taken over
            AtomicFiles.write(claim, me.getBytes(StandardCharsets.UTF_8));
            return base;
          }
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot claim a host id block under " + claims + ": " + e, e);
    }
    throw new WorkspaceException(
        "no free host id block left: " + BLOCKS + " sandboxes exist on this host");
  }

  /**
   * Makes sure the block {@code idBase} of sandbox {@code id} is claimed by it before it runs: a
   * claims directory lost (restored from a backup, the home moved) is claimed again; a block some
   * other live sandbox holds is refused, never shared.
   */
  static void reclaim(Path home, String id, long idBase) {
    reclaim(CLAIMS, home, id, idBase);
  }

  /** {@link #reclaim(Path, String, long)} with the claims in {@code claims} (tests). */
  static void reclaim(Path claims, Path home, String id, long idBase) {
    if (!isBlock(idBase)) {
      return; // the canonical block of a sandbox made before blocks existed
    }
    String me = owner(home, id);
    Path claim = claims.resolve(Long.toString((idBase - BASE) / Image.ID_RANGE));
    try {
      if (me.equals(readClaim(claim))) {
        return;
      }
      PrivateFiles.createPrivateDirectories(claims);
      try (FileLock lock = FileLock.acquire(claims.resolve(".lock"))) {
        String holder = readClaim(claim);
        if (me.equals(holder)) {
          return;
        }
        if (holder != null && !isStale(holder)) {
          throw new WorkspaceException(
              "sandbox local:"
                  + id
                  + " cannot run: its host ids "
                  + idBase
                  + ".. are claimed by "
                  + holder.replace('\n', ' ')
                  + " ("
                  + claim
                  + ")");
        }
        AtomicFiles.write(claim, me.getBytes(StandardCharsets.UTF_8));
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot claim the host ids of local:" + id + ": " + e, e);
    }
  }

  /** Frees the block {@code idBase} of sandbox {@code id} if it still holds it. */
  public static void free(Path home, String id, long idBase) {
    free(CLAIMS, home, id, idBase);
  }

  /** {@link #free(Path, String, long)} with the claims in {@code claims} (tests). */
  public static void free(Path claims, Path home, String id, long idBase) {
    if (!isBlock(idBase)) {
      return;
    }
    Path claim = claims.resolve(Long.toString((idBase - BASE) / Image.ID_RANGE));
    try (FileLock lock = FileLock.acquire(claims.resolve(".lock"))) {
      if (owner(home, id).equals(readClaim(claim))) {
        Files.deleteIfExists(claim);
      }
    } catch (IOException e) {
      // its home's gc frees it
    }
  }

  /** Frees every block sandbox {@code id} of {@code home} holds (its record lost which). */
  static void freeAll(Path home, String id) {
    if (!Files.isDirectory(CLAIMS)) {
      return;
    }
    String me = owner(home, id);
    try (FileLock lock = FileLock.acquire(CLAIMS.resolve(".lock"));
        Stream<Path> listed = Files.list(CLAIMS)) {
      for (Path claim : listed.toList()) {
        if (claim.getFileName().toString().matches("[0-9]+") && me.equals(readClaim(claim))) {
          Files.deleteIfExists(claim);
        }
      }
    } catch (IOException e) {
      // its home's gc frees it
    }
  }

  /** Removes the claims of {@code home}'s sandboxes that no longer exist; a line per claim. */
  static List<String> gc(Path home) {
    return gc(CLAIMS, home);
  }

  /** {@link #gc(Path)} with the claims in {@code claims} (tests). */
  static List<String> gc(Path claims, Path home) {
    List<String> removed = new ArrayList<>();
    if (!Files.isDirectory(claims)) {
      return removed;
    }
    String prefix = home.toAbsolutePath().normalize() + "\n";
    try (FileLock lock = FileLock.acquire(claims.resolve(".lock"));
        Stream<Path> listed = Files.list(claims)) {
      for (Path claim : listed.toList()) {
        String name = claim.getFileName().toString();
        if (!name.matches("[0-9]+")) {
          continue;
        }
        String holder = readClaim(claim);
        if (holder != null && holder.startsWith(prefix) && isStale(holder)) {
          Files.deleteIfExists(claim);
          removed.add(
              "host ids "
                  + (BASE + Long.parseLong(name) * Image.ID_RANGE)
                  + ".. of sandbox local:"
                  + holder.substring(prefix.length())
                  + ", which no longer exists");
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException("gc cannot read " + claims + ": " + e, e);
    }
    return removed;
  }

  private static String owner(Path home, String id) {
    return home.toAbsolutePath().normalize() + "\n" + id;
  }

  private static String readClaim(Path claim) throws IOException {
    try {
      return Files.readString(claim);
    } catch (NoSuchFileException e) {
      return null;
    }
  }

  /**
   * Whether the sandbox a claim names no longer exists: neither being reserved ({@code .new-<id>},
   * looked at first: it is renamed to {@code <id>}) nor under its id. Called under the lock.
   */
  private static boolean isStale(String holder) {
    int nl = holder.lastIndexOf('\n');
    if (nl <= 0) {
      return true; // torn: nothing can have run in it
    }
    Path sandboxes = Path.of(holder.substring(0, nl)).resolve("sandboxes");
    String id = holder.substring(nl + 1);
    if (!SandboxHome.isId(id)) {
      return true;
    }
    return !Files.exists(sandboxes.resolve(".new-" + id)) && !Files.exists(sandboxes.resolve(id));
  }

  private static boolean overlaps(List<long[]> ranges, long base) {
    for (long[] r : ranges) {
      if (r[0] < base + Image.ID_RANGE && base < r[0] + r[1]) {
        return true;
      }
    }
    return false;
  }

  /** {start, count} of every /etc/subuid and /etc/subgid entry (unreadable files: none). */
  static List<long[]> subordinateRanges() {
    List<long[]> ranges = new ArrayList<>();
    for (String file : List.of("/etc/subuid", "/etc/subgid")) {
      try {
        for (String line : Files.readAllLines(Path.of(file))) {
          String[] f = line.strip().split(":");
          if (f.length == 3) {
            try {
              ranges.add(new long[] {Long.parseLong(f[1]), Long.parseLong(f[2])});
            } catch (NumberFormatException e) {
              // not an entry
            }
          }
        }
      } catch (IOException e) {
        // no such file
      }
    }
    return ranges;
  }
}
