package dev.sandbox4j.runtime;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.DigestInputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

/**
 * OCI image layouts for {@link TestRegistry}: made here from busybox ({@link
 * TestImages#busyboxRootfs}), each with what a test pulling it should find. They are pushed with
 * {@link TestRegistry#push}; skopeo copies their blobs and manifests as they are, so the digests
 * here are the registry's.
 */
public final class RegistryImages {
  public static final String MANIFEST = "application/vnd.oci.image.manifest.v1+json";
  public static final String INDEX = "application/vnd.oci.image.index.v1+json";
  public static final String CONFIG = "application/vnd.oci.image.config.v1+json";
  public static final String LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip";
  public static final String LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd";

  /** A user by uid:gid, present in no /etc/passwd. */
  public static final String NUMERIC_USER = "1234:1234";

  /** A user by name, in the busybox layer's /etc/passwd as uid 1000. */
  public static final String NAMED_USER = "sandbox";

  private static final ObjectMapper JSON = new ObjectMapper();

  private RegistryImages() {}

  /** A layer as a manifest lists it. */
  public record Layer(String digest, String mediaType, long size) {}

  /**
   * An image in the OCI layout {@code layout}: {@code digest} is its manifest's (or, for several
   * platforms, its index's); {@code files} maps paths to the content they must have in the root
   * filesystem a client assembles, and {@code absent} lists paths that must not exist there.
   */
  public record Image(
      Path layout,
      String digest,
      List<Layer> layers,
      Map<String, String> files,
      Set<String> absent) {}

  /** The process settings of {@link #configured}'s image config. */
  public record ProcessConfig(
      List<String> env,
      String workingDir,
      String user,
      List<String> entrypoint,
      List<String> cmd) {}

  /** An image whose config sets {@code config}. */
  public record Configured(Image image, ProcessConfig config) {}

  /** An index with one manifest per platform; {@code byArchitecture}'s images are its manifests. */
  public record MultiPlatform(Path layout, String indexDigest, Map<String, Image> byArchitecture) {}

  /** A file {@code size} bytes of random data at {@code path} in its image, and its sha256 hex. */
  public record LargeFile(Image image, String path, long size, String sha256) {}

  /** Two images whose bottom layer is the same blob, {@code sharedLayer}. */
  public record SharingBase(Image first, Image second, Layer sharedLayer) {}

  /**
   * One busybox layer (with /srv/app/hello.txt) and a config with Env, WorkingDir /srv/app, {@code
   * user} ({@link #NUMERIC_USER} or {@link #NAMED_USER}), Entrypoint and Cmd.
   */
  public static Configured configured(Path dir, String user)
      throws IOException, InterruptedException {
    Path rootfs = TestImages.busyboxRootfs(dir.resolve("rootfs"));
    Files.createDirectories(rootfs.resolve("srv/app"));
    Files.writeString(rootfs.resolve("srv/app/hello.txt"), "hello from /srv/app\n");
    ProcessConfig config =
        new ProcessConfig(
            List.of("PATH=/usr/local/bin:/usr/bin:/bin", "GREETING=hello"),
            "/srv/app",
            user,
            List.of("/bin/sh", "-c"),
            List.of("echo \"$GREETING from $(pwd) as $(id -u)\""));
    Layout layout = new Layout(dir.resolve("layout"));
    LayerBlob layer = layout.layer(rootfs, "gzip");
    ObjectNode process = JSON.createObjectNode();
    ArrayNode env = process.putArray("Env");
    config.env().forEach(env::add);
    process.put("WorkingDir", config.workingDir());
    process.put("User", config.user());
    ArrayNode entrypoint = process.putArray("Entrypoint");
    config.entrypoint().forEach(entrypoint::add);
    ArrayNode cmd = process.putArray("Cmd");
    config.cmd().forEach(cmd::add);
    Image image =
        layout.image(
            hostArchitecture(),
            process,
            List.of(layer),
            Map.of("/srv/app/hello.txt", "hello from /srv/app\n"),
            Set.of());
    return new Configured(image, config);
  }

  /**
   * Two layers: busybox with /srv/deleted.txt, /srv/kept.txt and /opaque/old.txt below; above,
   * {@code /srv/.wh.deleted.txt} deletes the file and {@code /opaque/.wh..wh..opq} hides the
   * directory's old content while the layer adds /opaque/new.txt.
   */
  public static Image withWhiteouts(Path dir) throws IOException, InterruptedException {
    Path lower = TestImages.busyboxRootfs(dir.resolve("lower"));
    Files.createDirectories(lower.resolve("srv"));
    Files.writeString(lower.resolve("srv/deleted.txt"), "deleted by the upper layer\n");
    Files.writeString(lower.resolve("srv/kept.txt"), "kept\n");
    Files.createDirectories(lower.resolve("opaque"));
    Files.writeString(lower.resolve("opaque/old.txt"), "hidden by the opaque directory\n");
    Path upper = Files.createDirectories(dir.resolve("upper"));
    Files.createDirectories(upper.resolve("srv"));
    Files.createFile(upper.resolve("srv/.wh.deleted.txt"));
    Files.createDirectories(upper.resolve("opaque"));
    Files.createFile(upper.resolve("opaque/.wh..wh..opq"));
    Files.writeString(upper.resolve("opaque/new.txt"), "new in the opaque directory\n");
    Layout layout = new Layout(dir.resolve("layout"));
    return layout.image(
        hostArchitecture(),
        shellProcess(),
        List.of(layout.layer(lower, "gzip"), layout.layer(upper, "gzip")),
        Map.of("/srv/kept.txt", "kept\n", "/opaque/new.txt", "new in the opaque directory\n"),
        Set.of(
            "/srv/deleted.txt", "/srv/.wh.deleted.txt", "/opaque/old.txt", "/opaque/.wh..wh..opq"));
  }

  /**
   * An index of a linux/amd64 and a linux/arm64 image; each holds /platform with its architecture
   * ({@code amd64\n}, {@code arm64\n}). Both carry the host's busybox: it is the file that tells
   * which one a client picked, not whether the arm64 one runs.
   */
  public static MultiPlatform multiPlatform(Path dir) throws IOException, InterruptedException {
    Layout layout = new Layout(dir.resolve("layout"));
    Map<String, Image> byArchitecture = new LinkedHashMap<>();
    List<ObjectNode> manifests = new ArrayList<>();
    for (String architecture : List.of("amd64", "arm64")) {
      Path rootfs = TestImages.busyboxRootfs(dir.resolve("rootfs-" + architecture));
      Files.writeString(rootfs.resolve("platform"), architecture + "\n");
      Image image =
          layout.manifest(
              architecture,
              shellProcess(),
              List.of(layout.layer(rootfs, "gzip")),
              Map.of("/platform", architecture + "\n"),
              Set.of());
      byArchitecture.put(architecture, image);
      ObjectNode descriptor = layout.descriptorOf(MANIFEST, image.digest());
      descriptor.putObject("platform").put("architecture", architecture).put("os", "linux");
      manifests.add(descriptor);
    }
    ObjectNode index = JSON.createObjectNode();
    index.put("schemaVersion", 2);
    index.put("mediaType", INDEX);
    index.putArray("manifests").addAll(manifests);
    String indexDigest = layout.blob(JSON.writeValueAsBytes(index));
    layout.finish(INDEX, indexDigest);
    return new MultiPlatform(layout.dir, indexDigest, byArchitecture);
  }

  /** Busybox in one layer compressed with zstd ({@link #LAYER_ZSTD}), holding /zstd.txt. */
  public static Image zstdLayer(Path dir) throws IOException, InterruptedException {
    Path rootfs = TestImages.busyboxRootfs(dir.resolve("rootfs"));
    Files.writeString(rootfs.resolve("zstd.txt"), "from a zstd layer\n");
    Layout layout = new Layout(dir.resolve("layout"));
    return layout.image(
        hostArchitecture(),
        shellProcess(),
        List.of(layout.layer(rootfs, "zstd")),
        Map.of("/zstd.txt", "from a zstd layer\n"),
        Set.of());
  }

  /**
   * Busybox below a layer holding /large.bin, {@code bytes} of random data that compression cannot
   * shrink: a layer blob big enough to interrupt and resume, or to fetch in parts.
   */
  public static LargeFile largeLayer(Path dir, long bytes)
      throws IOException, InterruptedException {
    return fileLayer(dir, bytes, true);
  }

  /**
   * Busybox below a layer holding /large.bin, {@code bytes} of zeros: a layer blob of a few KiB
   * that extracts to {@code bytes}, as an attacker's image would.
   */
  public static LargeFile compressibleLayer(Path dir, long bytes)
      throws IOException, InterruptedException {
    return fileLayer(dir, bytes, false);
  }

  private static LargeFile fileLayer(Path dir, long bytes, boolean random)
      throws IOException, InterruptedException {
    Layout layout = new Layout(dir.resolve("layout"));
    LayerBlob base = layout.layer(TestImages.busyboxRootfs(dir.resolve("rootfs")), "gzip");
    Path upper = Files.createDirectories(dir.resolve("upper"));
    MessageDigest sha256 = sha256();
    Random noise = new Random(bytes); // seeded: the same size gives the same bytes
    byte[] chunk = new byte[1 << 20];
    try (OutputStream out = Files.newOutputStream(upper.resolve("large.bin"))) {
      for (long left = bytes; left > 0; left -= chunk.length) {
        if (random) {
          noise.nextBytes(chunk);
        }
        int n = (int) Math.min(chunk.length, left);
        out.write(chunk, 0, n);
        sha256.update(chunk, 0, n);
      }
    }
    Image image =
        layout.image(
            hostArchitecture(),
            shellProcess(),
            List.of(base, layout.layer(upper, "gzip")),
            Map.of(),
            Set.of());
    return new LargeFile(image, "/large.bin", bytes, HexFormat.of().formatHex(sha256.digest()));
  }

  /**
   * Two images on the same busybox layer blob, each with its own top layer holding /which.txt
   * ({@code first\n}, {@code second\n}).
   */
  public static SharingBase sharingBase(Path dir) throws IOException, InterruptedException {
    Path baseDir = dir.resolve("base");
    Path baseArchive =
        TestImages.compress(
            TestImages.tar(
                TestImages.busyboxRootfs(baseDir.resolve("rootfs")), dir.resolve("base.tar")),
            "gzip");
    List<Image> images = new ArrayList<>();
    for (String name : List.of("first", "second")) {
      Layout layout = new Layout(dir.resolve(name));
      LayerBlob base = layout.layerFromArchive(dir.resolve("base.tar"), baseArchive, LAYER_GZIP);
      Path top = Files.createDirectories(dir.resolve(name + "-top"));
      Files.writeString(top.resolve("which.txt"), name + "\n");
      images.add(
          layout.image(
              hostArchitecture(),
              shellProcess(),
              List.of(base, layout.layer(top, "gzip")),
              Map.of("/which.txt", name + "\n"),
              Set.of()));
    }
    return new SharingBase(images.get(0), images.get(1), images.get(0).layers().getFirst());
  }

  /** The OCI name of the host's architecture, the one single-platform images here are for. */
  public static String hostArchitecture() {
    String arch = System.getProperty("os.arch");
    return switch (arch) {
      case "amd64", "x86_64" -> "amd64";
      case "aarch64" -> "arm64";
      default -> arch;
    };
  }

  private static ObjectNode shellProcess() {
    ObjectNode process = JSON.createObjectNode();
    process.putArray("Env").add("PATH=/usr/local/bin:/usr/bin:/bin");
    process.putArray("Cmd").add("/bin/sh");
    return process;
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** A layer blob in a layout and the digest of its uncompressed tar, its config's diff_id. */
  private record LayerBlob(Layer layer, String diffId) {}

  /**
   * An OCI image layout being written: blobs under blobs/sha256, then oci-layout and index.json.
   */
  private static final class Layout {
    private final Path dir;
    private final Path blobs;

    Layout(Path dir) throws IOException {
      this.dir = dir;
      this.blobs = Files.createDirectories(dir.resolve("blobs/sha256"));
    }

    /** The tree {@code root} as a layer compressed with {@code tool}, gzip or zstd. */
    LayerBlob layer(Path root, String tool) throws IOException, InterruptedException {
      Path tar = TestImages.tar(root, root.resolveSibling(root.getFileName() + ".tar"));
      return layerFromArchive(
          tar, TestImages.compress(tar, tool), tool.equals("gzip") ? LAYER_GZIP : LAYER_ZSTD);
    }

    LayerBlob layerFromArchive(Path tar, Path compressed, String mediaType) throws IOException {
      String diffId = "sha256:" + sha256Hex(tar);
      String digest = "sha256:" + sha256Hex(compressed);
      Path blob = blobs.resolve(digest.substring("sha256:".length()));
      Files.copy(compressed, blob, StandardCopyOption.REPLACE_EXISTING);
      return new LayerBlob(new Layer(digest, mediaType, Files.size(blob)), diffId);
    }

    /** An image's config and manifest, and index.json naming the manifest. */
    Image image(
        String architecture,
        ObjectNode process,
        List<LayerBlob> layers,
        Map<String, String> files,
        Set<String> absent)
        throws IOException {
      Image image = manifest(architecture, process, layers, files, absent);
      finish(MANIFEST, image.digest());
      return image;
    }

    /** An image's config and manifest, as blobs only. */
    Image manifest(
        String architecture,
        ObjectNode process,
        List<LayerBlob> layers,
        Map<String, String> files,
        Set<String> absent)
        throws IOException {
      ObjectNode config = JSON.createObjectNode();
      config.put("architecture", architecture);
      config.put("os", "linux");
      config.set("config", process);
      ObjectNode rootfs = config.putObject("rootfs");
      rootfs.put("type", "layers");
      ArrayNode diffIds = rootfs.putArray("diff_ids");
      layers.forEach(l -> diffIds.add(l.diffId()));
      String configDigest = blob(JSON.writeValueAsBytes(config));

      ObjectNode manifest = JSON.createObjectNode();
      manifest.put("schemaVersion", 2);
      manifest.put("mediaType", MANIFEST);
      manifest.set("config", descriptorOf(CONFIG, configDigest));
      ArrayNode layerDescriptors = manifest.putArray("layers");
      for (LayerBlob l : layers) {
        ObjectNode d = layerDescriptors.addObject();
        d.put("mediaType", l.layer().mediaType());
        d.put("digest", l.layer().digest());
        d.put("size", l.layer().size());
      }
      String manifestDigest = blob(JSON.writeValueAsBytes(manifest));
      return new Image(
          dir, manifestDigest, layers.stream().map(LayerBlob::layer).toList(), files, absent);
    }

    ObjectNode descriptorOf(String mediaType, String digest) throws IOException {
      ObjectNode d = JSON.createObjectNode();
      d.put("mediaType", mediaType);
      d.put("digest", digest);
      d.put("size", Files.size(blobs.resolve(digest.substring("sha256:".length()))));
      return d;
    }

    /** Stores {@code content}; returns its {@code sha256:...} digest. */
    String blob(byte[] content) throws IOException {
      return "sha256:" + TestImages.addBlob(blobs, content);
    }

    /** Writes oci-layout and an index.json whose one entry is {@code digest}. */
    void finish(String mediaType, String digest) throws IOException {
      Files.writeString(dir.resolve("oci-layout"), "{\"imageLayoutVersion\":\"1.0.0\"}");
      ObjectNode index = JSON.createObjectNode();
      index.put("schemaVersion", 2);
      index.putArray("manifests").add(descriptorOf(mediaType, digest));
      Files.write(dir.resolve("index.json"), JSON.writeValueAsBytes(index));
    }
  }

  private static String sha256Hex(Path file) throws IOException {
    MessageDigest sha256 = sha256();
    try (InputStream in = new DigestInputStream(Files.newInputStream(file), sha256)) {
      in.transferTo(OutputStream.nullOutputStream());
    }
    return HexFormat.of().formatHex(sha256.digest());
  }
}
