package dev.sandbox4j.runtime.internal.image;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.registry.ImageReference;
import dev.sandbox4j.runtime.internal.registry.RegistryClient;
import dev.sandbox4j.runtime.internal.registry.RegistryException;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * Pulls an image from a registry into the store: its manifest (through an index to the one for
 * linux on this machine's architecture), its config, and the layers the store does not have yet,
 * {@value #PARALLEL_DOWNLOADS} downloads at a time, each extracted as soon as it and the layers
 * below it are in (see {@link ImageArchive} for how a layer becomes a store layer: the same ids, so
 * an image pulled and the same image imported from an archive share their layers).
 *
 * <p>Downloads go to {@code <images>/.downloads/sha256-<hex>}, which survives an interruption: a
 * pull started again continues each blob where it stopped. A blob is locked while it is being
 * downloaded, across threads and JVMs, and deleted once its layer is in the store.
 */
final class RegistryPull {
  static final int PARALLEL_DOWNLOADS = 3;
  static final String DOWNLOADS = ".downloads";
  private static final long MAX_LAYER_BYTES = 64L << 30;
  private static final long PROGRESS_INTERVAL_NANOS = 2_000_000_000L;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Map<Path, ReentrantLock> BLOB_LOCKS = new ConcurrentHashMap<>();

  private final ImageStore store;
  private final RegistryClient client;
  private final Consumer<String> progress;
  private final PullLimit limit;

  RegistryPull(
      ImageStore store, RegistryClient client, Consumer<String> progress, PullLimit limit) {
    this.store = store;
    this.client = client;
    this.progress = progress;
    this.limit = limit;
  }

  /** The image name a pulled reference is stored under: readable, and unique per reference. */
  static String localName(ImageReference ref) {
    String repository = ref.repository();
    String base = repository.substring(repository.lastIndexOf('/') + 1);
    if (ref.tag() != null) {
      base += "-" + ref.tag();
    } else {
      base += "-" + ref.digest().substring("sha256:".length(), "sha256:".length() + 12);
    }
    base = base.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9._-]", "-");
    if (base.length() > 40) {
      base = base.substring(0, 40);
    }
    String hash =
        StoreLayout.sha256Hex(ref.toString().getBytes(StandardCharsets.UTF_8)).substring(0, 8);
    return base + "-" + hash;
  }

  /** What the registry has for a reference: the image manifest chosen, and the top digest. */
  private record Resolved(JsonNode manifest, String digest, String manifestDigest) {}

  /**
   * Pulls {@code ref} as image {@code name} in {@code build}: publishes it, unless the store's
   * image of that name already has the same manifest digest and all its layers (then returns it).
   */
  Image pull(ImageStore.Build build, String name, ImageReference ref) throws IOException {
    long started = System.nanoTime();
    progress.accept("pulling " + ref);
    Resolved resolved = resolve(ref);
    Optional<Image> existing = store.find(name);
    if (existing.isPresent()
        && existing.get().origin() != null
        && resolved.digest().equals(existing.get().origin().digest())) {
      progress.accept(ref + " is up to date (" + resolved.digest() + ")");
      return existing.get();
    }
    ImageConfig config = config(ref, resolved.manifest());
    List<JsonNode> layers = ImageArchive.layersOf(resolved.manifest());
    Path downloads = downloadsDir();
    List<String> ids = new ArrayList<>();
    List<Long> sizes = new ArrayList<>();
    List<Boolean> present = new ArrayList<>();
    long compressed = 0;
    long toReceive = 0;
    for (int i = 0; i < layers.size(); i++) {
      JsonNode layer = layers.get(i);
      String digest = layer.path("digest").asText();
      String hex = ImageArchive.checkDigest(digest);
      long size = layer.path("size").asLong(-1);
      if (size < 0 || size > MAX_LAYER_BYTES) {
        throw new RegistryException(
            "the manifest of " + ref + " gives layer " + digest + " the size " + size);
      }
      String id = ImageArchive.layerId("layer", hex);
      ids.add(id);
      sizes.add(size);
      boolean here = store.pinIfPresent(build, id);
      present.add(here);
      compressed += size;
      if (!here) {
        toReceive += size;
      }
    }
    if (compressed > limit.maxBytes()) {
      throw overLimit(ref, compressed, "compressed");
    }
    requireFreeSpace(ref, toReceive, "to download its layers");
    List<Future<Path>> pending = new ArrayList<>();
    List<Path> files = new ArrayList<>();
    AtomicLong received = new AtomicLong();
    ExecutorService pool =
        Executors.newFixedThreadPool(
            PARALLEL_DOWNLOADS, Thread.ofPlatform().name("registry-pull-", 0).factory());
    try {
      for (int i = 0; i < layers.size(); i++) {
        String digest = layers.get(i).path("digest").asText();
        String hex = ImageArchive.checkDigest(digest);
        String what = layerName(i, layers.size(), hex);
        if (present.get(i)) {
          progress.accept(what + ": already in the store");
          pending.add(null);
          continue;
        }
        long size = sizes.get(i);
        Path file = downloads.resolve("sha256-" + hex);
        files.add(file);
        pending.add(pool.submit(() -> download(ref, digest, size, file, what, received)));
      }
      long total = toReceive;
      long size = 0;
      try {
        for (int i = 0; i < layers.size(); i++) {
          Future<Path> download = pending.get(i);
          if (download == null) {
            size += RootfsOwnership.sizeOf(store.layerPath(ids.get(i)));
            continue;
          }
          Path blob = awaitReporting(download, received, total, started);
          String hex = ImageArchive.checkDigest(layers.get(i).path("digest").asText());
          String what = layerName(i, layers.size(), hex);
          if (limit.bounded()) {
            long extracted = ImageArchive.extractedSize(blob);
            if (size + extracted > limit.maxBytes()) {
              throw overLimit(ref, size + extracted, "extracted, counted up to " + what);
            }
            requireFreeSpace(ref, extracted, "to extract " + what);
          }
          size += ImageArchive.importLayer(store, build, blob, ids.get(i), true, what, progress);
          Files.deleteIfExists(blob);
        }
      } catch (PullRefusedException e) {
        // refused for its size: the same pull would be refused again, so nothing is kept to resume
        pool.shutdownNow();
        awaitTermination(pool);
        for (Path file : files) {
          deleteUnlessBusy(file);
        }
        throw e;
      }
      double seconds = (System.nanoTime() - started) / 1e9;
      progress.accept(
          String.format(
              Locale.ROOT,
              "pulled %s: %d layer(s), %s downloaded in %.1f s (%s/s)",
              ref,
              layers.size(),
              mib(total),
              seconds,
              mib((long) (total / Math.max(seconds, 0.001)))));
      return store.publish(
          build,
          name,
          ids,
          size,
          "pulled from " + ref,
          new ImageStore.Origin(ref.toString(), resolved.digest(), config));
    } finally {
      pool.shutdownNow();
    }
  }

  private PullRefusedException overLimit(ImageReference ref, long bytes, String how) {
    return new PullRefusedException(
        ref
            + " is larger than this engine pulls: "
            + mib(bytes)
            + " ("
            + how
            + "), more than the limit of "
            + mib(limit.maxBytes()),
        true,
        bytes,
        limit.maxBytes());
  }

  /** Refuses to write {@code bytes} more if that would take the store below the reserve. */
  private void requireFreeSpace(ImageReference ref, long bytes, String forWhat) throws IOException {
    long free = Files.getFileStore(store.directory()).getUsableSpace();
    if (free - bytes < limit.reserveBytes()) {
      throw new PullRefusedException(
          "pulling "
              + ref
              + " needs "
              + mib(bytes)
              + " "
              + forWhat
              + ", and the disk of "
              + store.directory()
              + " has "
              + mib(free)
              + " free, "
              + mib(limit.reserveBytes())
              + " of which it keeps as its reserve: free space (remove images, sandbox4j gc)",
          false,
          free,
          limit.reserveBytes());
    }
  }

  private static void awaitTermination(ExecutorService pool) {
    try {
      if (!pool.awaitTermination(1, java.util.concurrent.TimeUnit.MINUTES)) {
        throw new RegistryException("the downloads of a refused pull did not stop within a minute");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The manifest for this platform, following an index (and one nested index at most). */
  private Resolved resolve(ImageReference ref) {
    RegistryClient.Document top = client.manifest(ref);
    RegistryClient.Document document = top;
    for (int depth = 0; ; depth++) {
      JsonNode json = parse(document.body(), "the manifest of " + ref);
      if (ImageArchive.INDEX_TYPES.contains(document.mediaType())
          || (document.mediaType().isEmpty() && json.has("manifests"))) {
        if (depth >= 2) {
          throw new RegistryException("the image index of " + ref + " nests too deeply");
        }
        JsonNode chosen = ImageArchive.choosePlatform(json, "the image index of " + ref);
        String digest = chosen.path("digest").asText("");
        ImageArchive.checkDigest(digest);
        document = client.manifest(ref, digest);
        continue;
      }
      if (!ImageArchive.MANIFEST_TYPES.contains(document.mediaType())
          && !(document.mediaType().isEmpty() && json.has("layers"))) {
        throw new RegistryException(
            ref
                + " is a '"
                + document.mediaType()
                + "', not an image manifest or index (schema 1 manifests are not supported)");
      }
      return new Resolved(json, top.digest(), document.digest());
    }
  }

  private ImageConfig config(ImageReference ref, JsonNode manifest) {
    String digest = manifest.path("config").path("digest").asText("");
    ImageArchive.checkDigest(digest);
    JsonNode config = parse(client.smallBlob(ref, digest), "the image config of " + ref);
    String arch = config.path("architecture").asText("");
    String os = config.path("os").asText("");
    if ((!os.isEmpty() && !os.equals("linux"))
        || (!arch.isEmpty() && !arch.equals(ImageArchive.ociArchitecture()))) {
      throw new RegistryException(
          ref
              + " is an image for "
              + os
              + "/"
              + arch
              + "; this machine runs linux/"
              + ImageArchive.ociArchitecture());
    }
    return ImageConfig.fromImageConfigJson(config);
  }

  /** Downloads one blob under its lock; the file, complete and verified. */
  private Path download(
      ImageReference ref, String digest, long size, Path file, String what, AtomicLong received)
      throws IOException, InterruptedException {
    ReentrantLock inJvm = BLOB_LOCKS.computeIfAbsent(file, f -> new ReentrantLock());
    inJvm.lockInterruptibly();
    try (FileChannel lockFile =
            FileChannel.open(
                file.resolveSibling(file.getFileName() + ".lock"),
                StandardOpenOption.CREATE,
                StandardOpenOption.WRITE);
        FileLock lock = lockFile.lock()) {
      long[] counted = {-1}; // -1: before the first report, which gives the bytes already there
      client.downloadBlob(
          ref,
          digest,
          size,
          file,
          have -> {
            if (counted[0] < 0) {
              counted[0] = 0;
              if (have > 0 && have < size) {
                progress.accept(what + ": resuming at " + mib(have));
              }
            }
            received.addAndGet(have - counted[0]);
            counted[0] = have;
          },
          why -> progress.accept(what + ": " + why));
      progress.accept(what + ": downloaded " + mib(size));
      return file;
    } finally {
      inJvm.unlock();
    }
  }

  /** Waits for {@code download}, reporting the bytes of all downloads every few seconds. */
  private Path awaitReporting(Future<Path> download, AtomicLong received, long total, long started)
      throws IOException {
    while (true) {
      try {
        return download.get(PROGRESS_INTERVAL_NANOS, java.util.concurrent.TimeUnit.NANOSECONDS);
      } catch (java.util.concurrent.TimeoutException e) {
        double seconds = (System.nanoTime() - started) / 1e9;
        progress.accept(
            String.format(
                Locale.ROOT,
                "downloading: %s of %s (%s/s)",
                mib(received.get()),
                mib(total),
                mib((long) (received.get() / Math.max(seconds, 0.001)))));
      } catch (ExecutionException e) {
        Throwable cause = e.getCause();
        if (cause instanceof RuntimeException r) {
          throw r;
        }
        if (cause instanceof IOException io) {
          throw io;
        }
        throw new RegistryException("downloading a layer failed: " + cause, cause);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new RegistryException("interrupted while pulling", e);
      }
    }
  }

  /**
   * Deletes the downloads in {@code imagesDir} that no pull is working on (one that died, or one
   * left to resume later): a gc asked for explicitly gives up resuming them. Returns a line per
   * download deleted.
   */
  static List<String> removeAbandonedDownloads(Path imagesDir) throws IOException {
    Path dir = imagesDir.resolve(DOWNLOADS);
    if (!Files.isDirectory(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      return List.of();
    }
    List<String> removed = new ArrayList<>();
    List<Path> blobs;
    try (var listing = Files.list(dir)) {
      blobs = listing.filter(p -> !p.getFileName().toString().endsWith(".lock")).sorted().toList();
    }
    for (Path blob : blobs) {
      long size = deleteUnlessBusy(blob);
      if (size >= 0) {
        removed.add("partial download " + blob.getFileName() + " (" + mib(size) + ")");
      }
    }
    return removed;
  }

  /**
   * Deletes download {@code blob} unless a pull (of this JVM or another process) is working on it;
   * returns the bytes deleted, or -1 if it was busy or not there.
   */
  private static long deleteUnlessBusy(Path blob) throws IOException {
    ReentrantLock inJvm = BLOB_LOCKS.computeIfAbsent(blob, f -> new ReentrantLock());
    if (!inJvm.tryLock()) {
      return -1; // a pull of this JVM is downloading it
    }
    try (FileChannel lockFile =
            FileChannel.open(
                blob.resolveSibling(blob.getFileName() + ".lock"),
                StandardOpenOption.CREATE,
                StandardOpenOption.WRITE);
        FileLock lock = lockFile.tryLock()) {
      if (lock == null || !Files.exists(blob, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
        return -1; // another process is downloading it, or it is gone
      }
      long size = Files.size(blob);
      Files.deleteIfExists(blob);
      return size;
    } finally {
      inJvm.unlock();
    }
  }

  private Path downloadsDir() throws IOException {
    Path dir = store.directory().resolve(DOWNLOADS);
    PrivateFiles.createPrivateDirectories(dir);
    return dir;
  }

  private static JsonNode parse(byte[] body, String what) {
    try {
      return JSON.readTree(body);
    } catch (IOException e) {
      throw new RegistryException(what + " is not JSON: " + e.getMessage(), e);
    }
  }

  private static String layerName(int i, int count, String hex) {
    return "layer " + (i + 1) + "/" + count + " (sha256:" + hex.substring(0, 12) + ")";
  }

  private static String mib(long bytes) {
    return String.format(Locale.ROOT, "%.1f MiB", bytes / (1024.0 * 1024.0));
  }
}
