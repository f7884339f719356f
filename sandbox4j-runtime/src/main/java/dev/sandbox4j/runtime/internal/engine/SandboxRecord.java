package dev.sandbox4j.runtime.internal.engine;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import java.io.IOException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Instant;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.stream.Stream;

/**
 * What {@code state.json} of a sandbox holds. A sandbox whose record says {@code CREATING} or
 * {@code DESTROYING} while nobody holds its lock was interrupted by a crash, and {@code gc} removes
 * it. Every record but the first is written atomically and durably, so a record that is not whole
 * JSON can only be a first ({@code CREATING}) record that a power loss cut short: gc removes that
 * sandbox too.
 *
 * <p>{@code layers} are the ids of the image layers the sandbox was created on, bottom first: it
 * keeps them however its image is rebuilt or removed (the image store deletes no layer a record
 * names). Null in records written before layers existed: their sandbox runs on the one layer that
 * the image's old root filesystem became ({@link ImageStore#legacyLayerId}).
 *
 * <p>{@code diskBytes} and {@code diskInodes} are the quota of its writable layer ({@link
 * SandboxDisk}); 0 in records of sandboxes made before disks existed, which have none.
 *
 * <p>{@code idBase} is the first host id of the sandbox's own block ({@link IdBlocks}): its user
 * namespace maps container ids {@code 0..65535} there. 0 in records of sandboxes made before blocks
 * existed, which keep running in the canonical block {@link Image#UID_SHIFT}.
 *
 * <p>{@code isolation} is the runtime its container runs under, for its whole life ({@link
 * Isolation}); {@code CONTAINER} in records written before there was a choice.
 *
 * <p>{@code identity} is who its commands and file operations run as, where commands start and the
 * environment they start from, resolved when it was created ({@link SandboxIdentity}); the seeds'
 * ({@link SandboxIdentity#SEED}) in records written before sandboxes had one.
 */
public record SandboxRecord(
    int formatVersion,
    String id,
    Status status,
    String image,
    String created,
    Map<String, String> labels,
    int cpus,
    long memoryBytes,
    int pids,
    List<String> layers,
    long diskBytes,
    long diskInodes,
    long idBase,
    Isolation isolation,
    SandboxIdentity identity) {

  public static final int FORMAT_VERSION = 1;

  private static final ObjectMapper JSON =
      new ObjectMapper()
          .enable(SerializationFeature.INDENT_OUTPUT)
          .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);

  /**
   * Where a sandbox is in its life. {@code SUSPENDED} and {@code STOPPED} are written before the
   * processes are frozen or ended, {@code RUNNING} after they are thawed or started: a record that
   * says {@code RUNNING} always means running, and one interrupted on its way to sleep says where
   * it was going (see {@link Lifecycle}).
   */
  public enum Status {
    CREATING,
    RUNNING,
    DESTROYING,
    /** Every process frozen, memory kept. */
    SUSPENDED,
    /** Every process ended, the overlay unmounted, the writable layer kept. */
    STOPPED,
    /**
     * Every process checkpointed to {@code checkpoint/} (CRIU) and ended, memory freed; waking
     * restores them (see {@link Lifecycle#hibernate}). Written before the dump.
     */
    HIBERNATED;

    /** Whether a sandbox in this state exists for its users (any operation wakes it). */
    public boolean isUsable() {
      return this == RUNNING || this == SUSPENDED || this == STOPPED || this == HIBERNATED;
    }
  }

  public SandboxRecord {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(status, "status");
    labels = labels == null ? Map.of() : Map.copyOf(labels);
    layers = layers == null ? null : List.copyOf(layers);
    isolation = isolation == null ? Isolation.CONTAINER : isolation; // records from before gVisor
    identity = identity == null ? SandboxIdentity.SEED : identity; // records from before identities
  }

  /** A record of a sandbox that runs as the seeds' identity ({@link SandboxIdentity#SEED}). */
  public SandboxRecord(
      int formatVersion,
      String id,
      Status status,
      String image,
      String created,
      Map<String, String> labels,
      int cpus,
      long memoryBytes,
      int pids,
      List<String> layers,
      long diskBytes,
      long diskInodes,
      long idBase,
      Isolation isolation) {
    this(
        formatVersion,
        id,
        status,
        image,
        created,
        labels,
        cpus,
        memoryBytes,
        pids,
        layers,
        diskBytes,
        diskInodes,
        idBase,
        isolation,
        null);
  }

  /** A record of a container sandbox ({@link Isolation#CONTAINER}). */
  public SandboxRecord(
      int formatVersion,
      String id,
      Status status,
      String image,
      String created,
      Map<String, String> labels,
      int cpus,
      long memoryBytes,
      int pids,
      List<String> layers,
      long diskBytes,
      long diskInodes,
      long idBase) {
    this(
        formatVersion,
        id,
        status,
        image,
        created,
        labels,
        cpus,
        memoryBytes,
        pids,
        layers,
        diskBytes,
        diskInodes,
        idBase,
        Isolation.CONTAINER);
  }

  /** A record without a disk or a block of host ids of its own (as written before either). */
  public SandboxRecord(
      int formatVersion,
      String id,
      Status status,
      String image,
      String created,
      Map<String, String> labels,
      int cpus,
      long memoryBytes,
      int pids,
      List<String> layers) {
    this(
        formatVersion,
        id,
        status,
        image,
        created,
        labels,
        cpus,
        memoryBytes,
        pids,
        layers,
        0,
        0,
        0);
  }

  /** The host id its container id 0 maps to: its own block, or the canonical one. */
  public int hostBase() {
    return IdBlocks.hostBase(idBase);
  }

  public SandboxRecord withStatus(Status next) {
    return with(next, created, labels);
  }

  /**
   * The record of a sandbox whose create finishes now, {@code finalLabels} its labels: a warm
   * pool's member is created long before it is claimed, and says when it was claimed.
   */
  SandboxRecord running(Instant now, Map<String, String> finalLabels) {
    return with(Status.RUNNING, now.toString(), finalLabels);
  }

  private SandboxRecord with(Status next, String createdAt, Map<String, String> withLabels) {
    return new SandboxRecord(
        formatVersion,
        id,
        next,
        image,
        createdAt,
        withLabels,
        cpus,
        memoryBytes,
        pids,
        layers,
        diskBytes,
        diskInodes,
        idBase,
        isolation,
        identity);
  }

  /** This record with {@code next} as its sandbox's identity. */
  SandboxRecord withIdentity(SandboxIdentity next) {
    return new SandboxRecord(
        formatVersion,
        id,
        status,
        image,
        created,
        labels,
        cpus,
        memoryBytes,
        pids,
        layers,
        diskBytes,
        diskInodes,
        idBase,
        isolation,
        next);
  }

  /** The quota of its writable layer, or null if it has no disk of its own. */
  SandboxDisk.Limit diskLimit() {
    return diskBytes == 0 ? null : new SandboxDisk.Limit(diskBytes, diskInodes);
  }

  /** Replaces {@code file} atomically and durably (temp file, fsync, rename, fsync). */
  public void write(Path file) throws IOException {
    AtomicFiles.write(file, JSON.writeValueAsBytes(this));
  }

  /**
   * Writes the record as the new file {@code file}, neither atomically nor durably: for the first
   * record of a directory no one else sees yet. A power loss may leave it empty or partial, which
   * {@link #isTorn} recognizes.
   */
  void writeNew(Path file) throws IOException {
    PrivateFiles.writeNew(file, JSON.writeValueAsBytes(this));
  }

  /**
   * Whether {@code file} is torn: empty, or not syntactically whole JSON (cut short, or zeros where
   * its data never reached the disk). A whole record that this version cannot map (a status it does
   * not know) is not torn.
   */
  static boolean isTorn(Path file) throws IOException {
    byte[] content = java.nio.file.Files.readAllBytes(file);
    if (content.length == 0) {
      return true;
    }
    try {
      JSON.readTree(content);
      return false;
    } catch (com.fasterxml.jackson.core.exc.StreamReadException e) {
      return true;
    }
  }

  public static SandboxRecord read(Path file) throws IOException {
    return JSON.readValue(java.nio.file.Files.readAllBytes(file), SandboxRecord.class);
  }

  /** The layers it runs on, bottom first: those it names, or its legacy image's one. */
  public List<String> layerIds() {
    return ImageStore.layersOf(image, layers);
  }

  /**
   * Every layer a sandbox under {@code sandboxesDir} runs on, read from their records: the image
   * store's {@link ImageStore.LayerUsers}. A destroyed sandbox's renamed files are skipped
   * (unmounted before they were renamed); a sandbox with no record yet records its layers under the
   * store lock before mounting them. Any other unreadable record fails the read.
   */
  public static Set<String> layersInUse(Path sandboxesDir) throws IOException {
    Set<String> used = new HashSet<>();
    if (!java.nio.file.Files.isDirectory(sandboxesDir)) {
      return used;
    }
    try (Stream<Path> dirs = java.nio.file.Files.list(sandboxesDir)) {
      for (Path dir : dirs.toList()) {
        if (dir.getFileName().toString().startsWith(".destroyed-")) {
          continue;
        }
        try {
          used.addAll(read(dir.resolve("state.json")).layerIds());
        } catch (NoSuchFileException e) {
          // not recorded yet
        }
      }
    }
    return used;
  }
}
