package dev.sandbox4j.runtime.internal.image;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.linux.OverlayMarks;
import dev.sandbox4j.runtime.internal.linux.Trees;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.regex.Pattern;

/**
 * Imports an archive into layers of an {@link ImageStore}: a root filesystem tarball, a {@code
 * docker save} archive, or an OCI image layout archive.
 *
 * <p><b>Formats.</b> GNU tar lists the archive (it recognizes gzip, bzip2, xz and zstd by their
 * magic bytes): {@code oci-layout} + {@code index.json} at the top make it an OCI layout ({@code
 * index.json} → the manifest for linux on this machine's architecture → layer blobs of media type
 * {@code application/vnd.oci.image.layer.v1.tar}, {@code +gzip} or {@code +zstd}, or Docker's
 * equivalents; each blob's sha256 is checked against its digest); else a {@code manifest.json} with
 * {@code Layers} makes it a {@code docker save} archive; anything else is a root filesystem. The
 * image config of an OCI layout or {@code docker save} archive is read ({@link ImageConfig}) and
 * kept as the image's {@link ImageStore.Origin}: its sandboxes run as its {@code User}, in its
 * {@code WorkingDir}, with its {@code Env} (the engine's {@code SandboxIdentity}). A root
 * filesystem has none, and its sandboxes run as Sandbox4j's own images' do (uid 1000 in {@code
 * /home/sandbox}).
 *
 * <p><b>Layers.</b> Each image layer becomes a layer of the store, its id the sha256 of its bytes
 * (so importing two images with a common base stores the base once, and importing again extracts
 * nothing). OCI whiteouts are turned into overlayfs' own markers: {@code .wh.NAME} into a whiteout
 * (character device 0/0) {@code NAME}, {@code .wh..wh..opq} into the opaque attribute on its
 * directory; overlayfs then stacks them as the lower layers of a sandbox exactly as an OCI runtime
 * would apply them. A root filesystem tarball becomes one layer, as it is.
 *
 * <p><b>Safety.</b> Archives are untrusted. Everything is extracted by GNU tar as root into a
 * directory only root can reach, with numeric ids and modes kept and no extended attributes (so no
 * archive can set {@code trusted.overlay.*} or capabilities). GNU tar strips a leading {@code /}
 * from member and hard link names, refuses members with {@code ..}, and creates a symlink that
 * points up or out only after everything else is extracted, so no member is written through it; any
 * error of tar fails the import. Then device nodes are deleted (but whiteouts), and ownership is
 * shifted into the sandboxes' range; an id the user namespace cannot map (65536 or more) fails the
 * import. Paths the archive's own JSON names are resolved and must stay inside it.
 */
public final class ImageArchive {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;
  private static final Pattern HEX64 = Pattern.compile("[0-9a-f]{64}");
  private static final int TAIL_LINES = 20;
  static final int MAX_LAYERS = 256;
  static final int MAX_INDEX_ENTRIES = 1024;
  private static final long TAR_TIMEOUT_MINUTES = 60;

  private static final String WHITEOUT = ".wh.";
  private static final String OPAQUE_MARKER = ".wh..wh..opq";
  private static final String WHITEOUT_META = ".wh..wh.";

  static final Set<String> INDEX_TYPES =
      Set.of(
          "application/vnd.oci.image.index.v1+json",
          "application/vnd.docker.distribution.manifest.list.v2+json");
  static final Set<String> MANIFEST_TYPES =
      Set.of(
          "application/vnd.oci.image.manifest.v1+json",
          "application/vnd.docker.distribution.manifest.v2+json");
  private static final Set<String> LAYER_TYPES =
      Set.of(
          "application/vnd.oci.image.layer.v1.tar",
          "application/vnd.oci.image.layer.v1.tar+gzip",
          "application/vnd.oci.image.layer.v1.tar+zstd",
          "application/vnd.oci.image.layer.nondistributable.v1.tar",
          "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
          "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
          "application/vnd.docker.image.rootfs.diff.tar",
          "application/vnd.docker.image.rootfs.diff.tar.gzip",
          "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip");

  /** What the archive is. */
  enum Format {
    ROOTFS("root filesystem tarball"),
    DOCKER("docker save archive"),
    OCI("OCI image layout");

    final String description;

    Format(String description) {
      this.description = description;
    }
  }

  /** The store layers an archive became, bottom first, and what to say about them. */
  public record Imported(
      List<String> layerIds, long sizeBytes, String description, ImageStore.Origin origin) {}

  private ImageArchive() {}

  /**
   * Imports {@code archive}'s layers into {@code store}, pinned for {@code build}, and returns
   * their ids bottom first. Publishes no image: the caller does.
   */
  public static Imported importLayers(
      ImageStore store, ImageStore.Build build, Path archive, Consumer<String> progress)
      throws IOException {
    Format format = detect(archive);
    progress.accept("importing " + archive + ": " + format.description);
    List<String> ids = new ArrayList<>();
    long size = 0;
    String from = archive.getFileName().toString();
    if (format == Format.ROOTFS) {
      String digest = sha256File(archive);
      String id = layerId("rootfs", digest);
      size += importLayer(store, build, archive, id, false, "root filesystem", progress);
      ids.add(id);
      return new Imported(
          ids, size, "imported from " + from + " (" + format.description + ")", null);
    }
    Path outer = build.newScratchDirectory();
    progress.accept("unpacking " + archive);
    tar(
        List.of(
            "-x",
            "-f",
            archive.toString(),
            "-C",
            outer.toString(),
            "--no-same-owner",
            "--no-same-permissions",
            "--no-xattrs"),
        "unpacking " + archive);
    Unpacked unpacked = format == Format.OCI ? ociLayers(outer) : dockerLayers(outer);
    List<Blob> blobs = unpacked.layers();
    for (int i = 0; i < blobs.size(); i++) {
      Path blob = blobs.get(i).path();
      String digest = sha256File(blob);
      if (blobs.get(i).digest() != null && !blobs.get(i).digest().equals(digest)) {
        throw new ImageBuildException(
            "layer "
                + (i + 1)
                + " of "
                + archive
                + " does not match its digest sha256:"
                + blobs.get(i).digest());
      }
      String id = layerId("layer", digest);
      String what =
          "layer " + (i + 1) + "/" + blobs.size() + " (sha256:" + digest.substring(0, 12) + ")";
      size += importLayer(store, build, blob, id, true, what, progress);
      ids.add(id);
    }
    Trees.delete(outer);
    return new Imported(
        ids,
        size,
        "imported from " + from + " (" + format.description + ", " + ids.size() + " layers)",
        new ImageStore.Origin(null, unpacked.manifestDigest(), unpacked.config()));
  }

  /** The archive's format, from the names at its top. */
  static Format detect(Path archive) throws IOException {
    Set<String> top = new java.util.HashSet<>();
    Process p =
        new ProcessBuilder("tar", "-t", "-f", archive.toString())
            .redirectError(ProcessBuilder.Redirect.DISCARD)
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
            .start();
    try (BufferedReader out = p.inputReader(StandardCharsets.UTF_8)) {
      String line;
      while ((line = out.readLine()) != null) {
        String name = line.startsWith("./") ? line.substring(2) : line;
        if (name.equals("oci-layout")
            || name.equals("index.json")
            || name.equals("manifest.json")) {
          top.add(name);
        }
      }
      if (p.waitFor() != 0) {
        throw new ImageBuildException(
            archive + " is not a tar archive (plain, or compressed with gzip, xz or zstd)");
      }
    } catch (InterruptedException e) {
      p.destroyForcibly();
      Thread.currentThread().interrupt();
      throw new ImageBuildException("interrupted while reading " + archive, e);
    }
    if (top.contains("oci-layout") && top.contains("index.json")) {
      return Format.OCI;
    }
    return top.contains("manifest.json") ? Format.DOCKER : Format.ROOTFS;
  }

  // ---- docker save ----------------------------------------------------------------------------

  /** A layer file in the unpacked archive, and the sha256 hex it must have (null: unknown). */
  private record Blob(Path path, String digest) {}

  /** What an unpacked archive holds: its layers, its config, its manifest's digest if known. */
  private record Unpacked(List<Blob> layers, ImageConfig config, String manifestDigest) {}

  private static Unpacked dockerLayers(Path outer) throws IOException {
    JsonNode manifest = JSON.readTree(inside(outer, "manifest.json").toFile());
    if (!manifest.isArray() || manifest.isEmpty()) {
      throw new ImageBuildException("manifest.json of the docker archive lists no image");
    }
    if (manifest.size() > 1) {
      throw new ImageBuildException(
          "the docker archive holds "
              + manifest.size()
              + " images; import an archive of one (docker save IMAGE)");
    }
    JsonNode layers = manifest.get(0).path("Layers");
    if (!layers.isArray() || layers.isEmpty()) {
      throw new ImageBuildException("manifest.json of the docker archive lists no Layers");
    }
    List<Blob> blobs = new ArrayList<>();
    for (JsonNode layer : layers) {
      blobs.add(new Blob(inside(outer, layer.asText()), null));
    }
    JsonNode configFile = manifest.get(0).path("Config");
    ImageConfig config =
        configFile.isTextual()
            ? ImageConfig.fromImageConfigJson(
                JSON.readTree(inside(outer, configFile.asText()).toFile()))
            : ImageConfig.NONE;
    return new Unpacked(blobs, config, null);
  }

  // ---- OCI image layout -----------------------------------------------------------------------

  private static Unpacked ociLayers(Path outer) throws IOException {
    JsonNode layout = JSON.readTree(inside(outer, "oci-layout").toFile());
    if (!layout.path("imageLayoutVersion").isTextual()) {
      throw new ImageBuildException("oci-layout has no imageLayoutVersion");
    }
    JsonNode[] picked = new JsonNode[2]; // the manifest's descriptor and content
    pickManifest(outer, JSON.readTree(inside(outer, "index.json").toFile()), 0, picked);
    JsonNode manifest = picked[1];
    List<Blob> blobs = new ArrayList<>();
    for (JsonNode layer : layersOf(manifest)) {
      String digest = layer.path("digest").asText("");
      blobs.add(new Blob(blob(outer, digest), digest.substring(digest.indexOf(':') + 1)));
    }
    JsonNode configDescriptor = manifest.path("config");
    ImageConfig config =
        configDescriptor.path("digest").isTextual()
            ? ImageConfig.fromImageConfigJson(
                JSON.readTree(blob(outer, configDescriptor.path("digest").asText()).toFile()))
            : ImageConfig.NONE;
    return new Unpacked(blobs, config, picked[0].path("digest").asText(null));
  }

  /**
   * The layer descriptors of image manifest {@code manifest}, bottom first, each of a supported
   * media type with a sha256 digest.
   */
  static List<JsonNode> layersOf(JsonNode manifest) {
    JsonNode layers = manifest.path("layers");
    if (!layers.isArray() || layers.isEmpty()) {
      throw new ImageBuildException("the image manifest lists no layers");
    }
    if (layers.size() > MAX_LAYERS) {
      throw new ImageBuildException(
          "the image manifest lists " + layers.size() + " layers (at most " + MAX_LAYERS + ")");
    }
    List<JsonNode> out = new ArrayList<>();
    for (JsonNode layer : layers) {
      String type = layer.path("mediaType").asText("");
      if (!LAYER_TYPES.contains(type)) {
        throw new ImageBuildException(
            "unsupported layer media type '" + type + "': supported are " + LAYER_TYPES);
      }
      checkDigest(layer.path("digest").asText(""));
      out.add(layer);
    }
    return out;
  }

  /**
   * The image manifest for linux on this architecture, following nested indexes: its descriptor
   * into {@code picked[0]}, its content into {@code picked[1]}.
   */
  private static void pickManifest(Path outer, JsonNode index, int depth, JsonNode[] picked)
      throws IOException {
    if (depth > 4) {
      throw new ImageBuildException("the OCI index nests too deeply");
    }
    JsonNode descriptor = choosePlatform(index, "the OCI layout");
    String type = descriptor.path("mediaType").asText("");
    JsonNode content = JSON.readTree(blob(outer, descriptor.path("digest").asText("")).toFile());
    if (INDEX_TYPES.contains(type) || (type.isEmpty() && content.has("manifests"))) {
      pickManifest(outer, content, depth + 1, picked);
      return;
    }
    if (!type.isEmpty() && !MANIFEST_TYPES.contains(type)) {
      throw new ImageBuildException("unsupported OCI manifest media type '" + type + "'");
    }
    picked[0] = descriptor;
    picked[1] = content;
  }

  /**
   * The one descriptor of image index {@code index} for linux on this machine's architecture (a
   * descriptor without a platform fits any); {@code where} names the index in errors.
   */
  static JsonNode choosePlatform(JsonNode index, String where) {
    String arch = ociArchitecture();
    JsonNode manifests = index.path("manifests");
    if (manifests.size() > MAX_INDEX_ENTRIES) {
      throw new ImageBuildException(
          where + " lists " + manifests.size() + " manifests (at most " + MAX_INDEX_ENTRIES + ")");
    }
    List<JsonNode> candidates = new ArrayList<>();
    List<String> platforms = new ArrayList<>();
    for (JsonNode d : manifests) {
      JsonNode platform = d.path("platform");
      platforms.add(
          platform.path("os").asText("?") + "/" + platform.path("architecture").asText("?"));
      boolean fits =
          platform.isMissingNode()
              || (platform.path("os").asText("linux").equals("linux")
                  && platform.path("architecture").asText(arch).equals(arch));
      if (fits) {
        candidates.add(d);
      }
    }
    if (candidates.isEmpty()) {
      throw new ImageBuildException(
          where + " has no image for linux/" + arch + " (it has " + platforms + ")");
    }
    if (candidates.size() > 1) {
      throw new ImageBuildException(
          where + " holds " + candidates.size() + " images for linux/" + arch + "; expected one");
    }
    return candidates.getFirst();
  }

  static String ociArchitecture() {
    String arch = System.getProperty("os.arch");
    return switch (arch) {
      case "amd64", "x86_64" -> "amd64";
      case "aarch64" -> "arm64";
      default -> arch;
    };
  }

  private static Path blob(Path outer, String digest) throws IOException {
    return inside(outer, "blobs/sha256/" + checkDigest(digest));
  }

  /** The hex of {@code sha256:HEX} {@code digest}; fails for any other form or algorithm. */
  static String checkDigest(String digest) {
    int colon = digest.indexOf(':');
    if (colon < 0
        || !digest.substring(0, colon).equals("sha256")
        || !HEX64.matcher(digest.substring(colon + 1)).matches()) {
      throw new ImageBuildException("unsupported digest '" + digest + "' (only sha256)");
    }
    return digest.substring(colon + 1);
  }

  /**
   * The regular file {@code relative} names inside the unpacked archive {@code outer}, all symlinks
   * resolved; fails if it is missing, not a regular file, or resolves outside.
   */
  private static Path inside(Path outer, String relative) throws IOException {
    Path candidate = outer.resolve(relative).normalize();
    if (relative.startsWith("/") || !candidate.startsWith(outer)) {
      throw new ImageBuildException("the archive names a file outside itself: " + relative);
    }
    if (!Files.exists(candidate)) {
      throw new ImageBuildException("the archive lacks " + relative);
    }
    Path real = candidate.toRealPath();
    if (!real.startsWith(outer.toRealPath()) || !Files.isRegularFile(real, NOFOLLOW)) {
      throw new ImageBuildException(
          "the archive's " + relative + " is not a regular file inside the archive");
    }
    return real;
  }

  // ---- one layer ------------------------------------------------------------------------------

  /** Adds the layer in tar file {@code tarball} as {@code id}, unless the store has it. */
  static long importLayer(
      ImageStore store,
      ImageStore.Build build,
      Path tarball,
      String id,
      boolean ociWhiteouts,
      String what,
      Consumer<String> progress)
      throws IOException {
    if (store.pinIfPresent(build, id)) {
      progress.accept(what + ": already in the store");
      return RootfsOwnership.sizeOf(store.layerPath(id));
    }
    progress.accept(what + ": extracting");
    Path dir = build.newScratchDirectory();
    Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
    extract(tarball, dir);
    if (ociWhiteouts) {
      convertWhiteouts(dir);
    }
    long size = RootfsOwnership.shiftImported(dir);
    store.addLayer(build, dir, id);
    return size;
  }

  /**
   * The bytes the files of tar file {@code tarball} (plain or compressed) hold, as GNU tar lists
   * them without extracting anything: what extracting it would write, but for metadata. A sparse
   * file counts its full size.
   */
  static long extractedSize(Path tarball) throws IOException {
    Process p =
        new ProcessBuilder("tar", "-t", "-v", "--numeric-owner", "-f", tarball.toString())
            .redirectError(ProcessBuilder.Redirect.DISCARD)
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
            .start();
    long total = 0;
    try (BufferedReader out = p.inputReader(StandardCharsets.UTF_8)) {
      String line;
      while ((line = out.readLine()) != null) {
        // "-rw-r--r-- 0/0 5000000 2026-12-03 10:40 name": a device shows "major,minor" there
        String[] fields = line.trim().split("\\s+", 4);
        if (fields.length >= 3 && SIZE_FIELD.matcher(fields[2]).matches()) {
          total = Math.addExact(total, Long.parseLong(fields[2]));
        }
      }
      if (p.waitFor() != 0) {
        throw new ImageBuildException(tarball + " is not a tar archive, or a damaged one");
      }
    } catch (ArithmeticException | NumberFormatException e) {
      p.destroyForcibly();
      throw new ImageBuildException(tarball + " lists sizes beyond what a file can hold", e);
    } catch (InterruptedException e) {
      p.destroyForcibly();
      Thread.currentThread().interrupt();
      throw new ImageBuildException("interrupted while reading " + tarball, e);
    }
    return total;
  }

  private static final Pattern SIZE_FIELD = Pattern.compile("[0-9]{1,19}");

  /** Extracts an untrusted tar file into {@code dir} (see the class comment). */
  static void extract(Path tarball, Path dir) throws IOException {
    tar(
        List.of(
            "-x",
            "-f",
            tarball.toString(),
            "-C",
            dir.toString(),
            "--numeric-owner",
            "--same-owner",
            "--same-permissions",
            "--no-xattrs",
            "--no-acls",
            "--no-selinux"),
        "extracting " + tarball);
  }

  /**
   * Turns OCI whiteout files into overlayfs markers, in place. A whiteout for a name the same layer
   * also has (replaced in this layer) needs no marker, but a directory so replaced must hide the
   * old one's contents: it is made opaque.
   */
  static void convertWhiteouts(Path layer) throws IOException {
    List<Path> markers = new ArrayList<>();
    Files.walkFileTree(
        layer,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) {
            if (!dir.equals(layer) && dir.getFileName().toString().startsWith(WHITEOUT)) {
              markers.add(dir); // aufs metadata (.wh..wh.plnk) or a malformed whiteout
              return FileVisitResult.SKIP_SUBTREE;
            }
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
            if (file.getFileName().toString().startsWith(WHITEOUT)) {
              markers.add(file);
            }
            return FileVisitResult.CONTINUE;
          }
        });
    for (Path marker : markers) {
      String name = marker.getFileName().toString();
      Path dir = marker.getParent();
      Trees.delete(marker);
      if (name.equals(OPAQUE_MARKER)) {
        OverlayMarks.setOpaque(dir);
      } else if (name.startsWith(WHITEOUT_META)) {
        continue; // other aufs metadata: meaningless to overlayfs
      } else {
        String hidden = name.substring(WHITEOUT.length());
        if (hidden.isEmpty() || hidden.equals(".") || hidden.equals("..")) {
          continue;
        }
        Path target = dir.resolve(hidden);
        if (Files.isDirectory(target, NOFOLLOW)) {
          OverlayMarks.setOpaque(target);
        } else if (!Files.exists(target, NOFOLLOW)) {
          OverlayMarks.mknodWhiteout(target);
        }
      }
    }
  }

  // ---- helpers --------------------------------------------------------------------------------

  static String layerId(String kind, String digest) {
    return ImageStore.sha256Hex(
        ("sandbox4j " + kind + " v1\n" + digest).getBytes(StandardCharsets.UTF_8));
  }

  public static String sha256File(Path file) throws IOException {
    MessageDigest digest = ImageStore.sha256();
    try (InputStream in = Files.newInputStream(file)) {
      byte[] buffer = new byte[1 << 20];
      int n;
      while ((n = in.read(buffer)) > 0) {
        digest.update(buffer, 0, n);
      }
    }
    return HexFormat.of().formatHex(digest.digest());
  }

  /** Runs GNU tar; fails with its last lines of output unless it exits 0. */
  private static void tar(List<String> args, String what) throws IOException {
    List<String> argv = new ArrayList<>();
    argv.add("tar");
    argv.addAll(args);
    Process p =
        new ProcessBuilder(argv)
            .redirectErrorStream(true)
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
            .start();
    Deque<String> tail = new ArrayDeque<>();
    try (BufferedReader out = p.inputReader(StandardCharsets.UTF_8)) {
      String line;
      while ((line = out.readLine()) != null) {
        tail.addLast(line);
        if (tail.size() > TAIL_LINES) {
          tail.removeFirst();
        }
      }
      if (!p.waitFor(TAR_TIMEOUT_MINUTES, TimeUnit.MINUTES)) {
        throw new ImageBuildException(what + " took over " + TAR_TIMEOUT_MINUTES + " minutes");
      }
      if (p.exitValue() != 0) {
        throw new ImageBuildException(
            what
                + " failed (tar exit "
                + p.exitValue()
                + "); the archive is refused:\n"
                + String.join("\n", tail));
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ImageBuildException("interrupted while " + what.toLowerCase(Locale.ROOT), e);
    } finally {
      p.destroyForcibly();
    }
  }
}
