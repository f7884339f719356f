package dev.sandbox4j.docker;

import com.github.dockerjava.api.exception.NotFoundException;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.util.SandboxHome;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * Sandbox4j's default image in the daemon: the engine's own default image (one recipe, built once
 * with mmdebstrap by {@code sandbox4j setup} or on first use), imported from this machine's image
 * store as {@code sandbox4j/default:<its layer id>}, so that nothing is pulled from a registry and
 * both backends run the same files. The store's layer is owned by the sandboxes' shifted ids
 * ({@link Image#UID_SHIFT}); GNU tar maps them back while it packs the layer.
 */
final class DefaultDockerImage {
  static final String REPOSITORY = "sandbox4j/default";

  /** The label every default image Sandbox4j imports carries, with the value {@code default}. */
  static final String LABEL = "dev.sandbox4j.image";

  private static final List<String> CHANGES =
      List.of(
          "USER sandbox",
          "WORKDIR /home/sandbox",
          "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          "ENV USER=sandbox",
          "ENV LANG=C.UTF-8",
          "LABEL " + LABEL + "=default");

  private DefaultDockerImage() {}

  /** The default image's name in {@code daemon}, imported first if the daemon lacks it. */
  static String ensure(Daemon daemon, Consumer<String> progress) {
    return ensure(daemon, SandboxHome.ofThisProcess(), progress);
  }

  /**
   * As {@link #ensure(Daemon, Consumer)}, with this machine's image store in {@code home}. Where
   * that store has no default image it can read (a user who is not root has a store of their own,
   * empty, and cannot read root's; a machine that is not Linux has none), the newest default image
   * already in the daemon serves: one Sandbox4j imported before, for any user of that daemon (it
   * carries {@link #LABEL}). Only without one is the image built here (Linux, root, mmdebstrap).
   */
  static synchronized String ensure(Daemon daemon, Path home, Consumer<String> progress) {
    ImageStore store = new ImageStore(home.resolve("images"));
    Optional<Image> found;
    String why;
    try {
      found = store.find(ImageStore.DEFAULT);
      why = "it has none";
    } catch (RuntimeException e) {
      found = Optional.empty();
      why = e.getMessage();
    }
    if (found.isEmpty()) {
      Optional<String> imported = importedBefore(daemon);
      if (imported.isPresent()) {
        progress.accept(
            "using "
                + imported.get()
                + ", the default image already in the Docker daemon (this machine's image store, "
                + home
                + ": "
                + why
                + ")");
        return imported.get();
      }
    }
    Image image;
    try {
      image =
          found.orElseGet(
              () -> {
                progress.accept("building the default image (once) with mmdebstrap");
                return store.ensureDefault(progress);
              });
    } catch (RuntimeException e) {
      throw new WorkspaceException(
          "cannot make Sandbox4j's default image for Docker: it is built from the engine's recipe"
              + " on this machine ("
              + home
              + "), which needs Linux, root and mmdebstrap ('sandbox4j setup'), and that failed: "
              + e.getMessage()
              + ". The daemon has no default image imported before either. Or choose an image"
              + " the daemon has: DockerSandbox.builder().image(...)",
          e);
    }
    if (image.layers().size() != 1) {
      throw new WorkspaceException(
          "the default image in "
              + home
              + " has "
              + image.layers().size()
              + " layers; expected one");
    }
    String tag = image.layerIds().get(0).substring(0, 12);
    String name = REPOSITORY + ":" + tag;
    try {
      daemon.client().inspectImageCmd(name).exec();
      return name;
    } catch (NotFoundException e) {
      // import it below
    }
    progress.accept(
        "importing the default image into the Docker daemon ("
            + image.sizeBytes() / (1024 * 1024)
            + " MiB, once)");
    try {
      importLayer(daemon, image.layers().get(0), tag);
    } catch (IOException e) {
      throw new WorkspaceException(
          "cannot import the default image into the Docker daemon at "
              + daemon.where()
              + ": "
              + e.getMessage(),
          e);
    }
    return name;
  }

  /** Whether the default image is in the daemon, or can be imported from this machine's store. */
  static dev.sandbox4j.runtime.HostCheck check(Daemon daemon) {
    String name = "docker default image";
    Path home = SandboxHome.ofThisProcess();
    Optional<Image> image;
    try {
      image = new ImageStore(home.resolve("images")).find(ImageStore.DEFAULT);
    } catch (RuntimeException e) {
      image = Optional.empty();
    }
    if (image.isEmpty() || image.get().layers().size() != 1) {
      Optional<String> imported = importedBefore(daemon);
      if (imported.isPresent()) {
        return dev.sandbox4j.runtime.HostCheck.ok(
            name,
            imported.get()
                + " is in the daemon (imported before; "
                + home
                + " has none this user can read or build)");
      }
      return dev.sandbox4j.runtime.HostCheck.missing(
          name,
          "no default image in " + home + " to import",
          "run 'sandbox4j setup' (Linux, root) to build it, or give docker sandboxes an image"
              + " the daemon has (--image, DockerSandbox.builder().image)");
    }
    String tag = REPOSITORY + ":" + image.get().layerIds().get(0).substring(0, 12);
    try {
      daemon.client().inspectImageCmd(tag).exec();
      return dev.sandbox4j.runtime.HostCheck.ok(name, tag + " is in the daemon");
    } catch (NotFoundException e) {
      return dev.sandbox4j.runtime.HostCheck.ok(
          name, tag + " is imported from " + home + " by the first docker sandbox");
    }
  }

  /** The newest image in the daemon that Sandbox4j imported as its default, by name:tag. */
  static Optional<String> importedBefore(Daemon daemon) {
    return daemon.client().listImagesCmd().withLabelFilter(Map.of(LABEL, "default")).exec().stream()
        .sorted(
            Comparator.comparing(
                    (com.github.dockerjava.api.model.Image i) ->
                        i.getCreated() == null ? 0L : i.getCreated())
                .reversed())
        .flatMap(i -> i.getRepoTags() == null ? Stream.empty() : Arrays.stream(i.getRepoTags()))
        .filter(tag -> tag.startsWith(REPOSITORY + ":"))
        .findFirst();
  }

  private static void importLayer(Daemon daemon, Path layer, String tag) throws IOException {
    Path ownerMap = Files.createTempFile("sandbox4j-owners", ".map");
    try {
      Files.writeString(ownerMap, ownerMap(layer), StandardCharsets.US_ASCII);
      Process tar =
          new ProcessBuilder(
                  "tar",
                  "-C",
                  layer.toString(),
                  "--numeric-owner",
                  "--owner-map=" + ownerMap,
                  "--group-map=" + ownerMap,
                  "--xattrs",
                  "--xattrs-include=security.capability",
                  "-cf",
                  "-",
                  ".")
              .redirectError(ProcessBuilder.Redirect.DISCARD)
              .start();
      try (InputStream tarball = tar.getInputStream()) {
        daemon.importImage(REPOSITORY, tag, CHANGES, tarball);
      } finally {
        tar.destroy();
      }
      int code = tar.waitFor();
      if (code != 0 && code != 143) {
        throw new IOException("tar of " + layer + " exited with " + code);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while importing the default image", e);
    } finally {
      Files.deleteIfExists(ownerMap);
    }
  }

  /** GNU tar's owner (and group) map: each shifted id the layer uses, back to the image's own. */
  static String ownerMap(Path layer) throws IOException {
    Set<Integer> ids = new TreeSet<>();
    try (Stream<Path> all = Files.walk(layer)) {
      for (Path p : (Iterable<Path>) all::iterator) {
        ids.add((Integer) Files.getAttribute(p, "unix:uid", LinkOption.NOFOLLOW_LINKS));
        ids.add((Integer) Files.getAttribute(p, "unix:gid", LinkOption.NOFOLLOW_LINKS));
      }
    }
    StringBuilder map = new StringBuilder();
    for (int id : ids) {
      if (id >= Image.UID_SHIFT && id < Image.UID_SHIFT + Image.ID_RANGE) {
        int own = id - Image.UID_SHIFT;
        map.append('+').append(id).append(" i").append(own).append(':').append(own).append('\n');
      }
    }
    return map.toString();
  }
}
