package dev.sandbox4j.runtime.internal.image;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sandbox4j.runtime.internal.registry.ImageReference;
import dev.sandbox4j.runtime.internal.registry.RegistryClient;
import dev.sandbox4j.runtime.internal.util.AtomicFiles;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Pushes an image of the store to a registry as an OCI image: each layer exported by {@link
 * LayerExport} (gzip) and uploaded unless the registry has its blob already, then the image config,
 * then the image manifest under the reference's tag.
 *
 * <p><b>The image config</b> says how to run the image, so that a pull elsewhere, by Sandbox4j or
 * {@code docker run}, runs it as here: an image that came from elsewhere keeps its own config
 * ({@link ImageStore.Origin#config()}); a snapshot of a sandbox that ran as its image said keeps
 * that identity ({@link ImageStore.Snapshot#identity()}: numeric user, working directory, env); one
 * of Sandbox4j's own (the default, recipes, snapshots of sandboxes that ran as the seeds) gets the
 * engine's conventions made explicit, the config the caller gives. A snapshot's size goes into
 * {@code config.Labels}: {@value #LABEL_PREFIX}{@code cpus}, {@code memory-bytes}, {@code pids},
 * {@code disk-bytes} and {@code disk-inodes} (decimal strings); its networks, which are this
 * machine's, do not. The config's {@code created} is the image's, so that the same image gives the
 * same config, and pushing it again uploads nothing.
 *
 * <p>Exports are written to the push's staging directory in the store (never {@code /tmp}: a layer
 * may be as large as the store's disk allows) and deleted as soon as they are uploaded.
 */
final class RegistryPush {
  static final String LABEL_PREFIX = "dev.sandbox4j.snapshot.";
  static final String MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json";
  static final String CONFIG_TYPE = "application/vnd.oci.image.config.v1+json";
  static final String LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip";

  /** The digest of no bytes: a blob to ask about that costs nothing to find or not. */
  private static final String EMPTY_BLOB =
      "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

  private static final long PROGRESS_INTERVAL_NANOS = 2_000_000_000L;
  private static final ObjectMapper JSON = new ObjectMapper();

  private final RegistryClient client;
  private final Consumer<String> progress;
  private final Exports exports;

  RegistryPush(ImageStore store, RegistryClient client, Consumer<String> progress) {
    this.client = client;
    this.progress = progress;
    this.exports = new Exports(store);
  }

  /** A layer as the manifest and the config name it. */
  record Descriptor(String digest, long size, String diffId) {}

  /**
   * What exporting each layer gave, in {@code <images>/.exports/<layer id>}: a layer never changes
   * and its export is deterministic, so a layer pushed before is not exported again to learn its
   * digest, and pushing an image the registry has costs a few requests. A record holds for the
   * layer directory it was made from (its inode and change time): a layer deleted and made again
   * under the same id (a recipe step built anew after a gc) is exported anew. A record whose layer
   * is gone is deleted by the next push.
   */
  static final class Exports {
    static final String DIRECTORY = ".exports";
    private static final Pattern LAYER_ID = Pattern.compile("[0-9a-f]{64}");
    private final ImageStore store;
    private final Path dir;

    Exports(ImageStore store) {
      this.store = store;
      this.dir = store.directory().resolve(DIRECTORY);
    }

    /** The record of layer {@code id}'s export, or null if there is none (or it is unreadable). */
    Descriptor read(String id) {
      Path file = dir.resolve(id);
      if (!Files.isRegularFile(file)) {
        return null;
      }
      try {
        var json = JSON.readTree(file.toFile());
        if (!json.path("layer").asText("").equals(identity(id))) {
          return null;
        }
        String digest = json.path("digest").asText("");
        String diffId = json.path("diffId").asText("");
        long size = json.path("size").asLong(-1);
        ImageArchive.checkDigest(digest);
        ImageArchive.checkDigest(diffId);
        return size < 0 ? null : new Descriptor(digest, size, diffId);
      } catch (IOException | RuntimeException damaged) {
        return null; // exported again, and written anew
      }
    }

    void write(String id, Descriptor descriptor) throws IOException {
      PrivateFiles.createPrivateDirectories(dir);
      ObjectNode json = JSON.createObjectNode();
      json.put("digest", descriptor.digest());
      json.put("size", descriptor.size());
      json.put("diffId", descriptor.diffId());
      json.put("layer", identity(id));
      AtomicFiles.write(dir.resolve(id), JSON.writeValueAsBytes(json));
      pruneRecordsOfLayersGone();
    }

    /**
     * Which directory layer {@code id} is: its inode and change time, which a new one differs in.
     */
    private String identity(String id) throws IOException {
      Map<String, Object> unix =
          Files.readAttributes(
              store.layerPath(id), "unix:ino,ctime", java.nio.file.LinkOption.NOFOLLOW_LINKS);
      FileTime ctime = (FileTime) unix.get("ctime");
      return unix.get("ino") + "@" + ctime.toInstant();
    }

    private void pruneRecordsOfLayersGone() throws IOException {
      try (Stream<Path> records = Files.list(dir)) {
        for (Path record : records.toList()) {
          String name = record.getFileName().toString();
          if (LAYER_ID.matcher(name).matches() && !Files.isDirectory(store.layerPath(name))) {
            Files.deleteIfExists(record);
          }
        }
      }
    }
  }

  /**
   * Pushes {@code image} (its layers pinned by {@code build}) to {@code ref}, whose tag names it;
   * returns the digest of the manifest pushed.
   */
  String push(
      ImageStore.Build build,
      Image image,
      ImageStore.Snapshot snapshot,
      ImageReference ref,
      ImageConfig ownImagesConfig)
      throws IOException {
    long started = System.nanoTime();
    progress.accept("pushing " + image.name() + " to " + ref);
    // Asked first, before any layer is exported: credentials that fail, fail at once.
    client.hasBlob(ref, EMPTY_BLOB);
    List<Descriptor> layers = new ArrayList<>();
    long uploaded = 0;
    int count = image.layers().size();
    for (int i = 0; i < count; i++) {
      String what = "layer " + (i + 1) + "/" + count;
      String id = image.layerIds().get(i);
      Descriptor known = exports.read(id);
      if (known != null && client.hasBlob(ref, known.digest())) {
        progress.accept(what + " (" + shortDigest(known.digest()) + "): already in the registry");
        layers.add(known);
        continue;
      }
      progress.accept(what + ": exporting");
      Path file = build.dir().resolve("layer-" + (i + 1) + ".tar.gz");
      LayerExport.Exported exported = LayerExport.export(image.layers().get(i), file);
      what += " (" + shortDigest(exported.digest()) + ")";
      if (exported.skipped() > 0) {
        progress.accept(what + ": " + exported.skipped() + " socket(s) or device node(s) left out");
      }
      if (client.hasBlob(ref, exported.digest())) {
        progress.accept(what + ": already in the registry");
      } else {
        upload(ref, exported, what);
        uploaded += exported.size();
      }
      Files.delete(file);
      Descriptor descriptor = new Descriptor(exported.digest(), exported.size(), exported.diffId());
      exports.write(id, descriptor);
      layers.add(descriptor);
    }
    byte[] config = configJson(image, snapshot, layers, ownImagesConfig);
    String configDigest = "sha256:" + ImageStore.sha256Hex(config);
    if (client.hasBlob(ref, configDigest)) {
      progress.accept("image config: already in the registry");
    } else {
      client.uploadBlob(ref, configDigest, config);
    }
    byte[] manifest = manifestJson(new Descriptor(configDigest, config.length, null), layers);
    String digest = client.putManifest(ref, ref.tag(), MANIFEST_TYPE, manifest);
    double seconds = (System.nanoTime() - started) / 1e9;
    progress.accept(
        String.format(
            Locale.ROOT,
            "pushed %s@%s: %d layer(s), %s uploaded in %.1f s",
            ref,
            digest,
            count,
            mib(uploaded),
            seconds));
    return digest;
  }

  private void upload(ImageReference ref, LayerExport.Exported exported, String what) {
    progress.accept(what + ": uploading " + mib(exported.size()));
    long started = System.nanoTime();
    long[] lastReport = {started};
    client.uploadBlob(
        ref,
        exported.digest(),
        exported.file(),
        sent -> {
          long now = System.nanoTime();
          if (now - lastReport[0] > PROGRESS_INTERVAL_NANOS) {
            lastReport[0] = now;
            progress.accept(what + ": " + mib(sent) + " of " + mib(exported.size()) + " sent");
          }
        });
    double seconds = (System.nanoTime() - started) / 1e9;
    progress.accept(
        String.format(
            Locale.ROOT,
            "%s: uploaded %s in %.1f s (%s/s)",
            what,
            mib(exported.size()),
            seconds,
            mib((long) (exported.size() / Math.max(seconds, 0.001)))));
  }

  /** The OCI image config of {@code image} with layers {@code layers} (see the class comment). */
  static byte[] configJson(
      Image image,
      ImageStore.Snapshot snapshot,
      List<Descriptor> layers,
      ImageConfig ownImagesConfig)
      throws IOException {
    ImageConfig run =
        image.origin() != null
            ? image.origin().config()
            : snapshot != null && snapshot.identity() != null
                ? snapshot.identity()
                : ownImagesConfig;
    ObjectNode document = JSON.createObjectNode();
    document.put("created", image.created().toString());
    document.put("architecture", ImageArchive.ociArchitecture());
    document.put("os", "linux");
    ObjectNode config = document.putObject("config");
    if (run.user() != null) {
      config.put("User", run.user());
    }
    if (run.workingDir() != null) {
      config.put("WorkingDir", run.workingDir());
    }
    putStrings(config, "Env", run.env());
    putStrings(config, "Entrypoint", run.entrypoint());
    putStrings(config, "Cmd", run.cmd());
    if (snapshot != null) {
      Map<String, String> labels = new TreeMap<>();
      labels.put(LABEL_PREFIX + "cpus", Integer.toString(snapshot.cpus()));
      labels.put(LABEL_PREFIX + "memory-bytes", Long.toString(snapshot.memoryBytes()));
      labels.put(LABEL_PREFIX + "pids", Integer.toString(snapshot.pids()));
      labels.put(LABEL_PREFIX + "disk-bytes", Long.toString(snapshot.diskBytes()));
      labels.put(LABEL_PREFIX + "disk-inodes", Long.toString(snapshot.diskInodes()));
      ObjectNode node = config.putObject("Labels");
      labels.forEach(node::put);
    }
    ObjectNode rootfs = document.putObject("rootfs");
    rootfs.put("type", "layers");
    ArrayNode diffIds = rootfs.putArray("diff_ids");
    layers.forEach(l -> diffIds.add(l.diffId()));
    return JSON.writeValueAsBytes(document);
  }

  private static byte[] manifestJson(Descriptor config, List<Descriptor> layers)
      throws IOException {
    ObjectNode manifest = JSON.createObjectNode();
    manifest.put("schemaVersion", 2);
    manifest.put("mediaType", MANIFEST_TYPE);
    ObjectNode configNode = manifest.putObject("config");
    configNode.put("mediaType", CONFIG_TYPE);
    configNode.put("digest", config.digest());
    configNode.put("size", config.size());
    ArrayNode layerNodes = manifest.putArray("layers");
    for (Descriptor layer : layers) {
      ObjectNode node = layerNodes.addObject();
      node.put("mediaType", LAYER_TYPE);
      node.put("digest", layer.digest());
      node.put("size", layer.size());
    }
    return JSON.writeValueAsBytes(manifest);
  }

  private static void putStrings(ObjectNode config, String field, List<String> values) {
    if (!values.isEmpty()) {
      ArrayNode array = config.putArray(field);
      values.forEach(array::add);
    }
  }

  private static String shortDigest(String digest) {
    return digest.substring(0, "sha256:".length() + 12);
  }

  private static String mib(long bytes) {
    return String.format(Locale.ROOT, "%.1f MiB", bytes / (1024.0 * 1024.0));
  }
}
