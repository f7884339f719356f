package dev.sandbox4j.runtime.internal.image;

import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Where everything of one image store lives under its directory, and which names are valid there:
 * image names, layer ids (sha256 hex), and the prefixes of builds, removals, locks and trash (see
 * {@link ImageStore} for the layout). Reads directories; changes nothing but {@code layers/}'s
 * creation.
 */
final class StoreLayout {
  static final Pattern NAME = Pattern.compile("[a-z0-9][a-z0-9._-]{0,62}");
  static final Pattern LAYER_ID = Pattern.compile("[0-9a-f]{64}");
  static final String BUILD_PREFIX = ".build-";
  static final String OLD_PREFIX = ".old-";
  static final String LOCK_PREFIX = ".lock-";
  static final String STORE_LOCK = ".lock";
  static final String TRASH_PREFIX = ".trash-";
  static final String MANIFEST = "image.json";
  static final String ROOTFS = "rootfs";
  static final String LAYERS = "layers";
  static final String PINS = "pins";
  static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;

  private final Path imagesDir;
  private final Path layersDir;

  StoreLayout(Path imagesDir) {
    this.imagesDir = imagesDir;
    this.layersDir = imagesDir.resolve(LAYERS);
  }

  Path imagesDir() {
    return imagesDir;
  }

  Path layersDir() {
    return layersDir;
  }

  /** Where layer {@code id} lives (whether or not it exists). */
  Path layerPath(String id) {
    if (id == null || !LAYER_ID.matcher(id).matches()) {
      throw new IllegalArgumentException("malformed layer id: " + id);
    }
    return layersDir.resolve(id);
  }

  /** The manifest of image {@code name} (whether or not it exists). */
  Path manifestFile(String name) {
    return imagesDir.resolve(name).resolve(MANIFEST);
  }

  /** The layer that format-1 image {@code name}'s root filesystem becomes. */
  static String legacyLayerId(String name) {
    return sha256Hex(
        ("sandbox4j legacy rootfs of image\n" + name).getBytes(StandardCharsets.UTF_8));
  }

  void ensureLayersDir() throws IOException {
    if (!Files.isDirectory(layersDir, NOFOLLOW)) {
      PrivateFiles.createPrivateDirectories(imagesDir);
      try {
        Files.createDirectory(
            layersDir,
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
      } catch (java.nio.file.FileAlreadyExistsException e) {
        // made meanwhile
      }
    }
  }

  /** The names of the store's images, complete or not, sorted. */
  List<String> imageNames() {
    if (!Files.isDirectory(imagesDir)) {
      return List.of();
    }
    try (Stream<Path> entries = Files.list(imagesDir)) {
      return entries
          .map(p -> p.getFileName().toString())
          .filter(n -> NAME.matcher(n).matches() && !n.equals(LAYERS))
          .sorted()
          .toList();
    } catch (IOException e) {
      throw new WorkspaceException("cannot list images in " + imagesDir, e);
    }
  }

  /** The staging areas of builds ({@code .build-*}) and removed images ({@code .old-*}). */
  List<Path> leftovers() {
    if (!Files.isDirectory(imagesDir)) {
      return List.of();
    }
    try (Stream<Path> entries = Files.list(imagesDir)) {
      return entries
          .filter(
              p -> {
                String n = p.getFileName().toString();
                return n.startsWith(BUILD_PREFIX) || n.startsWith(OLD_PREFIX);
              })
          .toList();
    } catch (IOException e) {
      throw new WorkspaceException("cannot list " + imagesDir, e);
    }
  }

  /** The image name in {@code .build-<name>-<hex>} or {@code .old-<name>-<hex>}. */
  static Optional<String> ownerOf(Path leftover) {
    String n = leftover.getFileName().toString();
    String rest = n.substring((n.startsWith(BUILD_PREFIX) ? BUILD_PREFIX : OLD_PREFIX).length());
    int dash = rest.lastIndexOf('-');
    if (dash < 0) {
      return Optional.empty();
    }
    String name = rest.substring(0, dash);
    return NAME.matcher(name).matches() ? Optional.of(name) : Optional.empty();
  }

  /** The ids of every layer in {@code layers/}. */
  List<String> allLayerIds() throws IOException {
    try (Stream<Path> entries = Files.list(layersDir)) {
      return entries
          .map(p -> p.getFileName().toString())
          .filter(n -> LAYER_ID.matcher(n).matches())
          .toList();
    }
  }

  /** Layers renamed to {@code .trash-*} whose deletion did not finish. */
  List<Path> trashLeftovers() {
    try (Stream<Path> entries = Files.list(layersDir)) {
      return entries.filter(p -> p.getFileName().toString().startsWith(TRASH_PREFIX)).toList();
    } catch (IOException e) {
      throw new WorkspaceException("cannot list " + layersDir, e);
    }
  }

  static String sha256Hex(byte[] bytes) {
    return HexFormat.of().formatHex(sha256().digest(bytes));
  }

  static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("no SHA-256 in this JVM", e);
    }
  }

  static String randomSuffix() {
    return HexFormat.of().toHexDigits(ThreadLocalRandom.current().nextLong());
  }

  static void checkName(String name) {
    if (name == null || !NAME.matcher(name).matches() || name.equals(LAYERS)) {
      throw new WorkspaceException(
          "invalid image name "
              + (name == null ? "null" : "\"" + name + "\"")
              + ": use 1 to 63 characters from a-z, 0-9, '.', '_' and '-', starting with a"
              + " letter or digit (and not \"layers\")");
    }
  }
}
