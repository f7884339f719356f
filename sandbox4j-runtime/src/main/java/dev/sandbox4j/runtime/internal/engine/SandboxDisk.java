package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.runtime.InsufficientDiskException;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.internal.linux.LoopDisk;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;

/**
 * A sandbox's writable layer on a file system of its own, so that its size and its number of files
 * are bounded: {@code sandboxes/<id>/disk.img}, a sparse ext4 image as large as the sandbox's byte
 * quota (plus the file system's own overhead) with as many inodes as its inode quota, mounted
 * ({@code nosuid,nodev}, through a loop device) at {@code sandboxes/<id>/disk/}, which holds the
 * overlay's {@code upper/} and {@code work/}. Past either limit a write inside fails with ENOSPC,
 * and the host's file system and other sandboxes are untouched: no other file lives on that file
 * system.
 *
 * <p>Why not project quotas on one shared file system: this kind of host's kernel has neither
 * ext4's quota format (QFMT_V2) nor XFS quotas nor tmpfs quotas, so a quota can only be a file
 * system's size. A fresh image costs no {@code mkfs} per create: {@code mkfs.ext4} makes one
 * template per (bytes, inodes) in {@code disks/} once, and each sandbox gets a sparse copy of it
 * (about 400 KB written) mounted with a few system calls ({@link LoopDisk}).
 *
 * <p>The disk stays mounted while the sandbox exists (stopped or hibernated too); a host reboot
 * loses the mount, not the data: {@link #upper} mounts it again on first use. Sandboxes made before
 * disks existed, and image build steps, keep their layer in {@code sandboxes/<id>/upper/}: no disk,
 * no quota ({@link #has}).
 */
public final class SandboxDisk {
  private SandboxDisk() {}

  public static final String IMAGE = "disk.img";
  public static final String MOUNT = "disk";
  public static final String TEMPLATES = "disks";

  private static final long MIB = 1L << 20;
  private static final long GIB = 1L << 30;

  /** Default byte quota of a sandbox's writable layer. */
  public static final long DEFAULT_BYTES = 10 * GIB;

  /** Default inode quota (files, directories, links) of a sandbox's writable layer. */
  public static final long DEFAULT_INODES = 1_000_000;

  /**
   * Default {@link Budget#overcommit}: the home's disks may promise 4 times the free space above
   * the reserve (on a host with 65 GB above it, 25 sandboxes of the default 10 GiB at once). Not a
   * guarantee: set 1 for one ({@link LocalSandbox.Builder#diskOvercommit}).
   */
  public static final double DEFAULT_OVERCOMMIT = 4;

  static final long MIN_BYTES = 64 * MIB;
  static final long MAX_BYTES = 16L << 40;
  static final long MIN_INODES = 1024;
  static final long MAX_INODES = 1L << 31;

  private static final int INODE_SIZE = 256;
  private static final long JOURNAL = 4 * MIB;

  /** A writable layer's quota: bytes and inodes. */
  public record Limit(long bytes, long inodes) {
    public Limit {
      if (bytes < MIN_BYTES || bytes > MAX_BYTES) {
        throw new IllegalArgumentException(
            "disk must be from 64 MiB to 16 TiB, was " + bytes + " bytes");
      }
      if (inodes < MIN_INODES || inodes > MAX_INODES) {
        throw new IllegalArgumentException(
            "diskInodes must be from 1024 to 2147483648, was " + inodes);
      }
    }

    public static final Limit DEFAULT = new Limit(DEFAULT_BYTES, DEFAULT_INODES);

    /**
     * The image's size: the quota plus what ext4 keeps for itself (inode tables, journal, bitmaps,
     * lost+found), so that about {@code bytes} are free for the sandbox's files.
     */
    public long imageBytes() {
      long size = bytes + inodes * INODE_SIZE + JOURNAL + bytes / 256 + 8 * MIB;
      return (size + MIB - 1) / MIB * MIB;
    }
  }

  /**
   * The quota of a sandbox made from a snapshot that saved {@code bytes} and {@code inodes}: those,
   * or the default for a snapshot saved before disks (0 bytes).
   */
  public static Limit limitOf(long bytes, long inodes) {
    return bytes == 0 ? Limit.DEFAULT : new Limit(bytes, inodes);
  }

  /** Whether the sandbox in {@code dir} has a disk of its own (else its layer is in the dir). */
  static boolean has(Path dir) {
    return Files.exists(dir.resolve(IMAGE));
  }

  /**
   * The sandbox's writable layer: on its disk, mounted first if a reboot unmounted it; in {@code
   * dir} itself for a sandbox without a disk.
   */
  public static Path upper(Path dir) {
    if (!has(dir)) {
      return dir.resolve("upper");
    }
    ensureMounted(dir);
    return dir.resolve(MOUNT).resolve("upper");
  }

  /** The overlay's work directory, on the same file system as {@link #upper}. */
  static Path work(Path dir) {
    if (!has(dir)) {
      return dir.resolve("work");
    }
    ensureMounted(dir);
    return dir.resolve(MOUNT).resolve("work");
  }

  /**
   * Gives the new sandbox in {@code dir} its disk: a sparse copy of the template for {@code limit}
   * (made on first use), mounted, with empty {@code upper/} and {@code work/}.
   */
  static void create(Path home, Path dir, Limit limit) throws IOException {
    create(home, dir, limit, null);
  }

  /**
   * {@link #create(Path, Path, Limit)} admitted against {@code budget} (null: none): what the
   * home's disks may still take from its file system, this one included, must fit the budget. The
   * check and the new disk's creation hold {@code disks/admission.lock}, so that two creates never
   * both count the same free space.
   */
  static void create(Path home, Path dir, Limit limit, Budget budget) throws IOException {
    if (budget == null || budget.unbounded()) {
      makeDisk(home, dir, limit);
      return;
    }
    PrivateFiles.createPrivateDirectories(home.resolve(TEMPLATES));
    try (FileLock lock = FileLock.acquire(home.resolve(TEMPLATES).resolve("admission.lock"))) {
      budget.admit(home, dir, limit);
      makeDisk(home, dir, limit);
    }
  }

  private static void makeDisk(Path home, Path dir, Limit limit) throws IOException {
    Path template = template(home, limit);
    if (!SpareDisks.claim(home, limit, dir)) { // a spare made ahead of time, mounted: see there
      Path image = dir.resolve(IMAGE);
      try {
        LoopDisk.sparseCopy(template, image);
      } catch (LoopDisk.Failure e) {
        throw new IOException("cannot copy the disk template " + template + ": " + e.getMessage());
      }
      mount(dir);
    }
    Files.createDirectories(dir.resolve(MOUNT).resolve("upper"));
    Files.createDirectories(dir.resolve(MOUNT).resolve("work"));
  }

  /**
   * Mounts the sandbox's disk unless mounted. Callers hold the sandbox's lock (every path to its
   * layer does), so two JVMs never mount one image twice, which would corrupt it; the JVM-wide lock
   * covers threads of this one.
   */
  public static void ensureMounted(Path dir) {
    if (isMounted(dir)) {
      return;
    }
    synchronized (SandboxDisk.class) {
      if (isMounted(dir)) {
        return;
      }
      try {
        mount(dir);
      } catch (IOException e) {
        throw new WorkspaceException("cannot mount the disk of " + dir + ": " + e.getMessage(), e);
      }
    }
  }

  /**
   * Whether {@code dir/disk} is a mount: it is on another device than {@code dir}. Two stat calls,
   * where reading {@code /proc/self/mountinfo} would cost a scan of every mount on every use.
   */
  public static boolean isMounted(Path dir) {
    try {
      Object inner = Files.getAttribute(dir.resolve(MOUNT), "unix:dev", LinkOption.NOFOLLOW_LINKS);
      Object outer = Files.getAttribute(dir, "unix:dev", LinkOption.NOFOLLOW_LINKS);
      return !inner.equals(outer);
    } catch (IOException e) {
      return false; // no mount point yet
    }
  }

  private static void mount(Path dir) throws IOException {
    Path target = Files.createDirectories(dir.resolve(MOUNT));
    try {
      LoopDisk.mount(
          dir.resolve(IMAGE),
          target,
          LoopDisk.MS_NOSUID | LoopDisk.MS_NODEV | LoopDisk.MS_NOATIME,
          // discard: a deleted file's blocks become holes in the image again; noinit_itable: the
          // inode tables of a sparse image read as zeros already, so no background zeroing.
          "discard,noinit_itable,errors=remount-ro");
    } catch (LoopDisk.Failure e) {
      throw new IOException("cannot mount " + dir.resolve(IMAGE) + ": " + e.getMessage());
    }
  }

  /** {@code image} mounted as {@link #mount} does, but attached nowhere ({@link SpareDisks}). */
  static int mountDetached(Path image) throws LoopDisk.Failure {
    return LoopDisk.mountDetached(
        image,
        LoopDisk.MOUNT_ATTR_NOSUID | LoopDisk.MOUNT_ATTR_NODEV | LoopDisk.MOUNT_ATTR_NOATIME,
        List.of("discard", "noinit_itable"),
        java.util.Map.of("errors", "remount-ro"));
  }

  /** Unmounts the sandbox's disk (after its overlay); its loop device frees itself. */
  public static void unmount(Path dir) {
    if (isMounted(dir)) {
      Overlay.unmount(dir.resolve(MOUNT));
    }
  }

  /**
   * Takes the disk of a sandbox being destroyed out of the mount table at once, and finishes its
   * unmount off the caller's path ({@link SpareDisks.Release}): that unmount (the journal flushed,
   * the loop device freed, the deleted image's blocks released) is what made a destroy 80 to 120 ms
   * slower. Nothing can reach the disk meanwhile: it is in no mount table, and only the releasing
   * thread holds it. The image must never be mounted again (it would be twice for a moment); a
   * destroy deletes it right after. An end of the JVM finishes the unmount too.
   */
  static void release(Path dir) {
    if (!isMounted(dir)) {
      return;
    }
    try {
      SpareDisks.Release.close(LoopDisk.detach(dir.resolve(MOUNT)));
    } catch (LoopDisk.Failure e) {
      unmount(dir); // as before: on this path
    }
  }

  /**
   * The empty ext4 image for {@code limit} in {@code home/disks/}, made once with {@code mkfs.ext4}
   * (renamed into place, so a concurrent maker wins or loses whole).
   */
  public static Path template(Path home, Limit limit) throws IOException {
    Path dir = home.resolve(TEMPLATES);
    Path template = templatePath(home, limit);
    if (Files.exists(template)) {
      return template;
    }
    PrivateFiles.createPrivateDirectories(dir); // 0700, like the rest of the home
    Path partial = dir.resolve(".partial-" + Engine.newId());
    try {
      HostCommand.check(
          List.of(
              "mkfs.ext4",
              "-q",
              "-F",
              "-m",
              "0",
              "-N",
              Long.toString(limit.inodes()),
              "-I",
              Integer.toString(INODE_SIZE),
              "-J",
              "size=" + JOURNAL / MIB,
              "-O",
              "^resize_inode",
              "-E",
              "nodiscard,lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0",
              "-L",
              "sandbox4j",
              partial.toString(),
              limit.imageBytes() / 1024 + "k"));
      Files.move(partial, template, StandardCopyOption.ATOMIC_MOVE);
    } catch (WorkspaceException e) {
      Files.deleteIfExists(partial);
      throw new IOException(
          "cannot make a disk template with mkfs.ext4 (e2fsprogs): " + e.getMessage(), e);
    }
    return template;
  }

  /** Where the template for {@code limit} is, made or not. */
  static Path templatePath(Path home, Limit limit) {
    return home.resolve(TEMPLATES).resolve("ext4-" + limit.bytes() + "-" + limit.inodes() + ".img");
  }

  /**
   * How much the home's sandboxes' disks may still take from its file system, together: {@code
   * overcommit} times the free space above {@code reserve}. What a disk may still take is its
   * image's size minus what is allocated to it (exact: the image cannot grow past its size,
   * whatever the sandbox writes, metadata included). At {@code overcommit} 1 no sandbox's write can
   * take the file system below the reserve, whatever all of them write (other processes writing
   * there aside); above 1 more sandboxes fit, and their writes together can take up to that factor
   * of the space above the reserve. {@link Double#POSITIVE_INFINITY}: no bound (the reserve only
   * refuses creates).
   */
  public record Budget(long reserve, double overcommit) {
    public Budget {
      if (!(overcommit > 0)) { // also NaN
        throw new IllegalArgumentException("diskOvercommit must be more than 0, was " + overcommit);
      }
    }

    boolean unbounded() {
      return overcommit == Double.POSITIVE_INFINITY;
    }

    /** Refuses the disk {@code limit} for {@code dir} if it does not fit; caller holds the lock. */
    void admit(Path home, Path dir, Limit limit) throws IOException {
      long free = usableSpace(home);
      long committed = 0;
      int disks = 0;
      Path sandboxes = home.resolve("sandboxes");
      try (var dirs = Files.list(sandboxes)) {
        for (Path d : dirs.toList()) {
          if (d.equals(dir) || !SandboxHome.isId(d.getFileName().toString())) {
            continue; // .destroyed- directories are going; .new- ones have no disk yet
          }
          try {
            committed += LoopDisk.unallocatedBytes(d.resolve(IMAGE));
            disks++;
          } catch (LoopDisk.Failure e) {
            // no disk: a sandbox made before disks (unbounded, see docs/security.md), or gone
          }
        }
      }
      long asked = limit.imageBytes();
      double budget = overcommit * Math.max(0, free - reserve);
      if (committed + asked > budget) {
        throw new InsufficientDiskException(
            "cannot create a sandbox: its disk (up to "
                + asked / MIB
                + " MiB) and what the "
                + disks
                + " disks of "
                + home
                + " may still write ("
                + committed / MIB
                + " MiB) exceed "
                + overcommit
                + " times the "
                + Math.max(0, free - reserve) / MIB
                + " MiB free above the reserve of "
                + reserve / MIB
                + " MiB (diskOvercommit); destroy sandboxes, ask for a smaller disk, or raise"
                + " diskOvercommit",
            free,
            reserve);
      }
    }
  }

  private static long usableSpace(Path home) {
    try {
      Path existing = home;
      while (existing != null && !Files.exists(existing)) {
        existing = existing.getParent();
      }
      return Files.getFileStore(existing == null ? Path.of("/") : existing).getUsableSpace();
    } catch (IOException e) {
      throw new WorkspaceException("cannot read the free space under " + home + ": " + e, e);
    }
  }

  /**
   * Refuses a create when the file system of {@code home} has less than {@code reserve} bytes free:
   * sandboxes' disks are sparse and grow as they are written, so the host keeps this much.
   */
  static void checkReserve(Path home, long reserve) {
    long free = usableSpace(home);
    if (free < reserve) {
      throw new InsufficientDiskException(
          "cannot create a sandbox: the file system of "
              + home
              + " has "
              + free / MIB
              + " MiB free, below the reserve of "
              + reserve / MIB
              + " MiB that the host keeps; free some space (destroy sandboxes, `sandbox4j gc`)",
          free,
          reserve);
    }
  }

  /**
   * What {@code doctor} says about disks in {@code home}: the tools a disk needs ({@code mkfs.ext4}
   * from e2fsprogs, loop devices, ext4), the free space against the reserve, and how many sandboxes
   * have no disk (made before disks existed: no quota until forked onto one).
   */
  public static HostCheck check(Path home, long reserve) {
    String name = "disk quotas";
    if (!HostCommand.onPath("mkfs.ext4")) {
      return HostCheck.missing(name, "mkfs.ext4 is not installed", "apt-get install -y e2fsprogs");
    }
    if (!Files.exists(Path.of("/dev/loop-control"))) {
      return HostCheck.missing(
          name, "/dev/loop-control is missing: no loop devices", "modprobe loop");
    }
    try {
      checkReserve(home, reserve);
    } catch (InsufficientDiskException e) {
      return HostCheck.missing(name, e.getMessage(), "free space under " + home);
    }
    long without = 0;
    long mounted = 0;
    Path sandboxes = home.resolve("sandboxes");
    if (Files.isDirectory(sandboxes)) {
      try (var dirs = Files.list(sandboxes)) {
        for (Path dir : dirs.filter(d -> SandboxHome.isId(d.getFileName().toString())).toList()) {
          if (has(dir)) {
            mounted += isMounted(dir) ? 1 : 0;
          } else if (Files.isDirectory(dir.resolve("upper"))) {
            without++;
          }
        }
      } catch (IOException e) {
        return HostCheck.missing(name, "cannot read " + sandboxes + ": " + e, "check " + sandboxes);
      }
    }
    return HostCheck.ok(
        name,
        "each sandbox's writable layer is an ext4 image of its own (default "
            + DEFAULT_BYTES / GIB
            + " GiB, "
            + DEFAULT_INODES
            + " inodes); creates are refused below "
            + reserve / MIB
            + " MiB free; "
            + mounted
            + " disks mounted"
            + (without == 0
                ? ""
                : "; "
                    + without
                    + " sandboxes made before disks have no quota (a fork of one gets a disk)"));
  }

  /**
   * Mounts the disk of every sandbox of {@code home} that has one and lost its mount (a host
   * reboot): what {@code setup} does, so that nothing waits for a sandbox's next use. Returns how
   * many it mounted.
   */
  public static int mountAll(Path home) {
    Path sandboxes = home.resolve("sandboxes");
    int n = 0;
    if (!Files.isDirectory(sandboxes)) {
      return 0;
    }
    try (var dirs = Files.list(sandboxes)) {
      for (Path dir : dirs.filter(d -> SandboxHome.isId(d.getFileName().toString())).toList()) {
        if (has(dir) && !isMounted(dir)) {
          try (FileLock lock = FileLock.acquire(dir.resolve("lock"))) {
            if (has(dir) && !isMounted(dir)) { // under its lock, as every other mount
              ensureMounted(dir);
              n++;
            }
          } catch (java.nio.file.NoSuchFileException destroyedMeanwhile) {
            // nothing to mount
          }
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException("cannot read " + sandboxes + ": " + e, e);
    }
    return n;
  }

  /** The reserve by default: 5% of the home's file system, at least 1 GiB, at most 20 GiB. */
  public static long defaultReserve(Path home) {
    try {
      Path existing = home;
      while (existing != null && !Files.exists(existing)) {
        existing = existing.getParent();
      }
      long total = Files.getFileStore(existing == null ? Path.of("/") : existing).getTotalSpace();
      return Math.clamp(total / 20, GIB, 20 * GIB);
    } catch (IOException e) {
      return GIB;
    }
  }
}
