package dev.sandbox4j.runtime.internal.image;

import dev.sandbox4j.runtime.internal.linux.OverlayMarks;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.security.DigestOutputStream;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import java.util.zip.Deflater;
import java.util.zip.GZIPOutputStream;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveOutputStream;
import org.apache.commons.compress.archivers.tar.TarConstants;

/**
 * Writes a layer of the store as an OCI image layer: a gzip-compressed tar file, the inverse of
 * what {@link ImageArchive} does to an imported layer.
 *
 * <p><b>What is written.</b> Every file under the layer directory, never following a symlink:
 * directories, regular files, symlinks (their target as it is), hard links (a second name of an
 * inode already written becomes a tar hard link to the first), and FIFOs, each with its mode
 * (setuid, setgid and sticky bits included), its owner and its modification time in whole seconds.
 * Owners are shifted back from the store's host ids to the image's ({@link Image#UID_SHIFT} + n
 * becomes n); a file owned by an id outside that block fails the export, as it has no owner inside
 * an image. overlayfs' markers become OCI's: a whiteout (character device 0/0) {@code NAME} becomes
 * an empty file {@code .wh.NAME}, an opaque directory gets an empty {@code .wh..wh..opq} inside.
 *
 * <p>Names are written in UTF-8 as the JVM reads them ({@code sun.jnu.encoding}, UTF-8 in a UTF-8
 * locale); a name it cannot read as it is (bytes not valid in that encoding) fails the export
 * rather than go out changed.
 *
 * <p><b>What is not.</b> Sockets and device nodes other than whiteouts are skipped (counted in
 * {@link Exported#skipped()}): a socket is only a name without its listener, and an imported layer
 * never keeps device nodes anyway. Extended attributes are not written, file capabilities ({@code
 * security.capability}) included: the store's import extracts without them, so a pushed image
 * pulled back would lose them anyway. A directory that overlayfs renamed with {@code redirect_dir}
 * (a {@code trusted.overlay.redirect} attribute, which the engine's mounts do not enable) fails the
 * export: its content would be wrong without the lower layers.
 *
 * <p><b>Deterministic.</b> Names are written sorted, with no user or group names, no access or
 * change times, and gzip's header without a time: the same layer always gives the same bytes, so
 * pushing it again finds its blob in the registry.
 */
final class LayerExport {
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;
  private static final int S_IFMT = 0170000;
  private static final int S_IFREG = 0100000;
  private static final int S_IFDIR = 0040000;
  private static final int S_IFLNK = 0120000;
  private static final int S_IFCHR = 0020000;
  private static final int S_IFIFO = 0010000;
  private static final int PERMISSIONS = 07777;
  private static final String WHITEOUT = ".wh.";
  private static final String OPAQUE_MARKER = ".wh..wh..opq";
  private static final int BUFFER = 1 << 20;

  /** What the JVM decodes bytes of a file name to when they are not valid in its encoding. */
  private static final char UNREADABLE = '\uFFFD';

  /**
   * An exported layer.
   *
   * @param file the gzip-compressed tar file
   * @param digest {@code sha256:...} of {@code file}: the layer's descriptor digest
   * @param size the size of {@code file} in bytes
   * @param diffId {@code sha256:...} of the uncompressed tar: the image config's {@code
   *     rootfs.diff_ids} entry
   * @param skipped how many sockets and device nodes were left out
   */
  record Exported(Path file, String digest, long size, String diffId, int skipped) {}

  private final TarArchiveOutputStream tar;
  private final byte[] buffer = new byte[BUFFER];

  /** The first name written of each inode with more than one link: (dev, ino) → name. */
  private final Map<List<Long>, String> linked = new HashMap<>();

  private int skipped;

  private LayerExport(TarArchiveOutputStream tar) {
    this.tar = tar;
  }

  /**
   * Writes layer directory {@code layer} to {@code file} (created, or replaced) as a
   * gzip-compressed OCI layer tar, computing both digests in the same pass.
   *
   * @throws ImageBuildException if a file has an owner outside the image's ids, or the layer holds
   *     a renamed directory overlayfs redirects
   */
  static Exported export(Path layer, Path file) throws IOException {
    MessageDigest compressed = ImageStore.sha256();
    MessageDigest uncompressed = ImageStore.sha256();
    LayerExport export;
    try (OutputStream out =
            Files.newOutputStream(
                file,
                StandardOpenOption.CREATE,
                StandardOpenOption.TRUNCATE_EXISTING,
                StandardOpenOption.WRITE);
        DigestOutputStream gzipped =
            new DigestOutputStream(new BufferedOutputStream(out, BUFFER), compressed);
        GZIPOutputStream gzip = fastGzip(gzipped);
        DigestOutputStream plain = new DigestOutputStream(gzip, uncompressed);
        TarArchiveOutputStream tar =
            new TarArchiveOutputStream(
                new BufferedOutputStream(plain, BUFFER), StandardCharsets.UTF_8.name())) {
      tar.setLongFileMode(TarArchiveOutputStream.LONGFILE_POSIX);
      tar.setBigNumberMode(TarArchiveOutputStream.BIGNUMBER_POSIX);
      tar.setAddPaxHeadersForNonAsciiNames(true);
      export = new LayerExport(tar);
      export.directoryContents(layer, "");
      tar.finish();
    }
    return new Exported(
        file, digestOf(compressed), Files.size(file), digestOf(uncompressed), export.skipped);
  }

  /** Writes the entries of directory {@code dir}, named below {@code prefix}, sorted by name. */
  private void directoryContents(Path dir, String prefix) throws IOException {
    if (!prefix.isEmpty() && OverlayMarks.isOpaque(dir)) {
      TarArchiveEntry marker = newEntry(prefix + OPAQUE_MARKER, TarConstants.LF_NORMAL);
      marker.setMode(S_IFREG);
      tar.putArchiveEntry(marker);
      tar.closeArchiveEntry();
    }
    List<Path> children;
    try (Stream<Path> list = Files.list(dir)) {
      children =
          new ArrayList<>(
              list.sorted(
                      (a, b) -> a.getFileName().toString().compareTo(b.getFileName().toString()))
                  .toList());
    }
    for (Path child : children) {
      String name = child.getFileName().toString();
      if (name.indexOf(UNREADABLE) >= 0) {
        throw new ImageBuildException(
            "cannot export "
                + child
                + ": its name is not valid "
                + System.getProperty("sun.jnu.encoding")
                + " (the JVM's encoding of file names), so it cannot be written as it is");
      }
      entry(child, prefix + name);
    }
  }

  private void entry(Path path, String name) throws IOException {
    Map<String, Object> unix =
        Files.readAttributes(
            path, "unix:mode,uid,gid,dev,ino,nlink,rdev,size,lastModifiedTime", NOFOLLOW);
    int mode = (Integer) unix.get("mode");
    int type = mode & S_IFMT;
    if (type == S_IFCHR && (Long) unix.get("rdev") == 0) {
      whiteout(name);
      return;
    }
    TarArchiveEntry entry;
    switch (type) {
      case S_IFDIR -> {
        if (OverlayMarks.isRedirected(path)) {
          throw new ImageBuildException(
              "cannot export "
                  + path
                  + ": overlayfs redirects this renamed directory to one of the layers below, which"
                  + " a layer tarball cannot express");
        }
        entry = newEntry(name + "/", TarConstants.LF_DIR);
      }
      case S_IFREG -> {
        String first = firstName(unix, name);
        if (first != null) {
          entry = newEntry(name, TarConstants.LF_LINK);
          entry.setLinkName(first);
        } else {
          entry = newEntry(name, TarConstants.LF_NORMAL);
          entry.setSize((Long) unix.get("size"));
        }
      }
      case S_IFLNK -> {
        entry = newEntry(name, TarConstants.LF_SYMLINK);
        entry.setLinkName(Files.readSymbolicLink(path).toString());
      }
      case S_IFIFO -> entry = newEntry(name, TarConstants.LF_FIFO);
      default -> {
        skipped++; // a socket or a device node (see the class comment)
        return;
      }
    }
    entry.setMode(type | (mode & PERMISSIONS));
    entry.setUserId(imageId(path, (Integer) unix.get("uid"), "uid"));
    entry.setGroupId(imageId(path, (Integer) unix.get("gid"), "gid"));
    FileTime mtime = (FileTime) unix.get("lastModifiedTime");
    entry.setModTime(FileTime.fromMillis(Math.floorDiv(mtime.toMillis(), 1000) * 1000));
    tar.putArchiveEntry(entry);
    if (type == S_IFREG && !entry.isLink()) {
      copy(path, entry.getSize());
    }
    tar.closeArchiveEntry();
    if (type == S_IFDIR) {
      directoryContents(path, name + "/");
    }
  }

  /** An overlayfs whiteout {@code name}: the OCI whiteout file {@code .wh.NAME}, empty. */
  private void whiteout(String name) throws IOException {
    int slash = name.lastIndexOf('/');
    TarArchiveEntry entry =
        newEntry(
            name.substring(0, slash + 1) + WHITEOUT + name.substring(slash + 1),
            TarConstants.LF_NORMAL);
    entry.setMode(S_IFREG);
    tar.putArchiveEntry(entry);
    tar.closeArchiveEntry();
  }

  /**
   * The name an inode with more than one link was first written under, or null if this is its first
   * (then remembered).
   */
  private String firstName(Map<String, Object> unix, String name) {
    if ((Integer) unix.get("nlink") < 2) {
      return null;
    }
    List<Long> inode = List.of((Long) unix.get("dev"), (Long) unix.get("ino"));
    return linked.putIfAbsent(inode, name);
  }

  private void copy(Path file, long size) throws IOException {
    long left = size;
    try (InputStream in = Files.newInputStream(file, NOFOLLOW)) {
      while (left > 0) {
        int n = in.read(buffer, 0, (int) Math.min(buffer.length, left));
        if (n < 0) {
          throw new IOException(file + " shrank while being exported");
        }
        tar.write(buffer, 0, n);
        left -= n;
      }
    }
  }

  /** An entry without user or group names (what the constructor would take from this JVM). */
  private static TarArchiveEntry newEntry(String name, byte type) {
    TarArchiveEntry entry = new TarArchiveEntry(name, type);
    entry.setUserName("");
    entry.setGroupName("");
    entry.setModTime(0);
    return entry;
  }

  /** Host id {@code id} of a store layer as the image's id (see {@link Image#UID_SHIFT}). */
  private int imageId(Path path, int id, String kind) {
    int shifted = id - Image.UID_SHIFT;
    if (shifted < 0 || shifted >= Image.ID_RANGE) {
      throw new ImageBuildException(
          "cannot export "
              + path
              + ": it is owned by host "
              + kind
              + " "
              + id
              + ", outside the block that images' ids map to ("
              + Image.UID_SHIFT
              + ".."
              + (Image.UID_SHIFT + Image.ID_RANGE - 1)
              + ")");
    }
    return shifted;
  }

  /**
   * gzip at its fastest level: compressing is what a push spends most of its time on. For the
   * default image (357 MiB) it took 7.5 s instead of 20 s at the default level, for a layer of 150
   * MiB instead of 137.
   */
  private static GZIPOutputStream fastGzip(OutputStream out) throws IOException {
    return new GZIPOutputStream(out, BUFFER) {
      {
        def.setLevel(Deflater.BEST_SPEED);
      }
    };
  }

  private static String digestOf(MessageDigest sha) {
    return "sha256:" + HexFormat.of().formatHex(sha.digest());
  }
}
