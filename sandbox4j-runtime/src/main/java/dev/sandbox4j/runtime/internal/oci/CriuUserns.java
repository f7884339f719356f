package dev.sandbox4j.runtime.internal.oci;

import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

/**
 * Moves a checkpoint's user namespace to another block of host ids, for a live fork: CRIU 4.1.1
 * restores a dumped user namespace by writing the {@code uid_map} and {@code gid_map} it saved in
 * {@code userns-<id>.img} ({@code prepare_userns} in criu/namespaces.c); crun 1.21's restore does
 * not make the namespace itself (it passes CRIU only the network and pid namespaces it made, and
 * joins time, ipc and uts), and nothing else in the images holds host ids (creds, ghost files,
 * ttys, IPC and sockets are saved as the namespace sees them). So a fork restored from a copy of
 * its parent's images would run in its parent's block unless that image is rewritten: {@link
 * #moveTo} rewrites it before every restore.
 *
 * <p>The image is CRIU's: two magic numbers ({@code IMG_COMMON_MAGIC}, {@code USERNS_MAGIC}), then
 * one entry, a little-endian u32 size and a protobuf {@code userns_entry} (images/userns.proto:
 * repeated {@code uid_gid_extent uid_map = 1}, {@code gid_map = 2}, each {@code first = 1}, {@code
 * lower_first = 2}, {@code count = 3}, all uint32). Anything else in the file fails the rewrite.
 */
public final class CriuUserns {
  static final int IMG_COMMON_MAGIC = 0x54564319;
  static final int USERNS_MAGIC = 0x55474906;

  private CriuUserns() {}

  /** One extent of a map: container ids {@code first..+count} are host ids {@code lowerFirst..}. */
  record Extent(long first, long lowerFirst, long count) {}

  /** Both maps of a user namespace image. */
  record Maps(List<Extent> uid, List<Extent> gid) {}

  /**
   * Makes every user namespace image in {@code images} map container ids {@code 0..65535} to host
   * ids from {@code toBase} (the block of the sandbox about to be restored from them), whichever
   * block the dumped sandbox had: a wake keeps its own, a fork gets its own. Fails, naming the
   * image, if there is no such image (every sandbox's dump has one: restored without, its tasks
   * would not be in a user namespace of its own) or a map is other than one extent of {@value
   * Image#ID_RANGE} ids from container 0, uids and gids alike.
   */
  public static void moveTo(Path images, int toBase) {
    try {
      List<Path> found;
      try (Stream<Path> files = Files.list(images)) {
        found =
            files.filter(f -> f.getFileName().toString().matches("userns-[0-9]+\\.img")).toList();
      }
      if (found.isEmpty()) {
        throw new WorkspaceException(
            "the checkpoint in " + images + " has no user namespace image: refusing to restore it");
      }
      for (Path image : found) {
        Maps maps = read(Files.readAllBytes(image));
        if (maps.uid().size() != 1
            || !maps.uid().equals(maps.gid())
            || maps.uid().getFirst().first() != 0
            || maps.uid().getFirst().count() != Image.ID_RANGE) {
          throw new WorkspaceException(
              "the checkpoint's user namespace ("
                  + image
                  + ") maps "
                  + maps
                  + ", not one block of "
                  + Image.ID_RANGE
                  + " ids from container 0: refusing to restore it");
        }
        if (maps.uid().getFirst().lowerFirst() != toBase) {
          Extent moved = new Extent(0, toBase, Image.ID_RANGE);
          AtomicFiles.write(image, write(new Maps(List.of(moved), List.of(moved))));
        }
      }
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot give the restored sandbox its own ids in " + images + ": " + e, e);
    }
  }

  /** The maps of a {@code userns-<id>.img}. */
  static Maps read(byte[] file) throws IOException {
    ByteBuffer b = ByteBuffer.wrap(file).order(ByteOrder.LITTLE_ENDIAN);
    if (file.length < 12 || b.getInt() != IMG_COMMON_MAGIC || b.getInt() != USERNS_MAGIC) {
      throw new IOException("not a CRIU user namespace image");
    }
    long size = b.getInt() & 0xffffffffL;
    if (size != b.remaining()) {
      throw new IOException("a user namespace image of one entry expected");
    }
    List<Extent> uid = new java.util.ArrayList<>();
    List<Extent> gid = new java.util.ArrayList<>();
    while (b.hasRemaining()) {
      long key = varint(b);
      if ((key & 7) != 2 || (key >> 3) < 1 || (key >> 3) > 2) {
        throw new IOException("unexpected field " + (key >> 3) + " in a user namespace entry");
      }
      int length = Math.toIntExact(varint(b));
      ByteBuffer e = b.slice(b.position(), length).order(ByteOrder.LITTLE_ENDIAN);
      b.position(b.position() + length);
      long[] f = new long[4];
      boolean[] seen = new boolean[4];
      while (e.hasRemaining()) {
        long k = varint(e);
        int field = (int) (k >> 3);
        if ((k & 7) != 0 || field < 1 || field > 3) {
          throw new IOException("unexpected field " + field + " in a uid/gid extent");
        }
        f[field] = varint(e);
        seen[field] = true;
      }
      if (!seen[1] || !seen[2] || !seen[3]) {
        throw new IOException("a uid/gid extent without all of its fields");
      }
      ((key >> 3) == 1 ? uid : gid).add(new Extent(f[1], f[2], f[3]));
    }
    return new Maps(uid, gid);
  }

  /** A {@code userns-<id>.img} holding {@code maps}. */
  static byte[] write(Maps maps) {
    ByteArrayOutputStream entry = new ByteArrayOutputStream();
    for (int field = 1; field <= 2; field++) {
      for (Extent x : field == 1 ? maps.uid() : maps.gid()) {
        ByteArrayOutputStream e = new ByteArrayOutputStream();
        varint(e, 1 << 3);
        varint(e, x.first());
        varint(e, 2 << 3);
        varint(e, x.lowerFirst());
        varint(e, 3 << 3);
        varint(e, x.count());
        varint(entry, (field << 3) | 2);
        varint(entry, e.size());
        entry.writeBytes(e.toByteArray());
      }
    }
    ByteBuffer b = ByteBuffer.allocate(12 + entry.size()).order(ByteOrder.LITTLE_ENDIAN);
    b.putInt(IMG_COMMON_MAGIC).putInt(USERNS_MAGIC).putInt(entry.size()).put(entry.toByteArray());
    return b.array();
  }

  private static long varint(ByteBuffer b) throws IOException {
    long v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!b.hasRemaining()) {
        throw new IOException("a truncated user namespace image");
      }
      int x = b.get() & 0xff;
      v |= (long) (x & 0x7f) << shift;
      if ((x & 0x80) == 0) {
        return v;
      }
    }
    throw new IOException("a malformed varint in a user namespace image");
  }

  private static void varint(ByteArrayOutputStream out, long v) {
    while ((v & ~0x7fL) != 0) {
      out.write((int) ((v & 0x7f) | 0x80));
      v >>>= 7;
    }
    out.write((int) v);
  }
}
