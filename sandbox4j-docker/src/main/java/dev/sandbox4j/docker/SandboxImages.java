package dev.sandbox4j.docker;

import com.github.dockerjava.api.exception.DockerException;
import com.github.dockerjava.api.exception.NotFoundException;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.regex.Pattern;

/**
 * The images docker sandboxes make of themselves: snapshots ({@code sandbox4j/snapshot:NAME},
 * labelled with their name and source) and a fork's passing image (no name: the child's container
 * is made from its id). Both are commits, paused for their duration.
 */
final class SandboxImages {
  /** The repository of snapshots. */
  static final String SNAPSHOTS = "sandbox4j/snapshot";

  /** The label of a snapshot image: its name. */
  static final String LABEL_SNAPSHOT = "dev.sandbox4j.snapshot";

  /** The label of a snapshot image: the sandbox it was saved from. */
  static final String LABEL_SOURCE = "dev.sandbox4j.source";

  static final Pattern SNAPSHOT_NAME = Pattern.compile("[a-z0-9][a-z0-9_.-]{0,127}");

  static final String NO_CHECKPOINT =
      "Docker sandboxes copy files only: carrying processes needs the daemon's experimental"
          + " checkpoint/restore (CRIU), which this provider does not use";

  private final DockerSandbox sandboxes;

  SandboxImages(DockerSandbox sandboxes) {
    this.sandboxes = sandboxes;
  }

  /** Commits sandbox {@code id} as snapshot {@code name}, replacing one of that name. */
  SnapshotInfo snapshot(String id, String name) {
    if (name == null || !SNAPSHOT_NAME.matcher(name).matches()) {
      throw new IllegalArgumentException(
          "snapshot name '" + name + "': use 1 to 128 of a-z, 0-9, '_', '.', '-', starting alnum");
    }
    String replaced = imageId(SNAPSHOTS + ":" + name);
    commit(id, SNAPSHOTS + ":" + name, Map.of(LABEL_SNAPSHOT, name, LABEL_SOURCE, id));
    removeIfLeft(replaced); // the name moved: the old image goes unless a sandbox uses it
    return snapshots().stream()
        .filter(i -> i.name().equals(name))
        .findFirst()
        .orElseThrow(
            () -> new WorkspaceException("snapshot '" + name + "' vanished as it was saved"));
  }

  /** The snapshots of the daemon, sorted by name. */
  List<SnapshotInfo> snapshots() {
    List<com.github.dockerjava.api.model.Image> images;
    try {
      images = sandboxes.daemon().client().listImagesCmd().withLabelFilter(LABEL_SNAPSHOT).exec();
    } catch (DockerException e) {
      throw Daemon.translate("cannot list snapshots", e);
    }
    List<SnapshotInfo> infos = new ArrayList<>();
    for (com.github.dockerjava.api.model.Image image : images) {
      String name = image.getLabels() == null ? null : image.getLabels().get(LABEL_SNAPSHOT);
      String tag = SNAPSHOTS + ":" + name;
      if (name == null
          || image.getRepoTags() == null
          || java.util.Arrays.stream(image.getRepoTags())
              .noneMatch(t -> shortName(t).equals(tag))) {
        continue; // replaced: no longer the snapshot of that name
      }
      String source = image.getLabels().get(LABEL_SOURCE);
      infos.add(
          new SnapshotInfo(
              name,
              java.time.Instant.ofEpochSecond(image.getCreated()),
              source == null ? null : new WorkspaceRef(DockerSandbox.NAME, source),
              tag,
              sandboxes.cpus(),
              sandboxes.memoryBytes(),
              sandboxes.pids(),
              image.getSize() == null ? 0 : image.getSize(),
              0,
              0));
    }
    infos.sort(java.util.Comparator.comparing(SnapshotInfo::name));
    return infos;
  }

  /**
   * An image name as Docker writes it: without the registry that Podman puts before every name
   * ({@code docker.io/} for an import, {@code localhost/} for a commit) and Docker leaves implied.
   */
  static String shortName(String name) {
    for (String registry : List.of("docker.io/library/", "docker.io/", "localhost/")) {
      if (name.startsWith(registry)) {
        return name.substring(registry.length());
      }
    }
    return name;
  }

  /**
   * Untags snapshot {@code name}; false if there was none. Sandboxes made from it keep its files;
   * an image no sandbox uses any more goes with its name.
   */
  boolean removeSnapshot(String name) {
    if (name == null || !SNAPSHOT_NAME.matcher(name).matches()) {
      return false;
    }
    String reference = SNAPSHOTS + ":" + name;
    Daemon daemon = sandboxes.daemon();
    try {
      if (!daemon.podman()) {
        // forced: untags it even while sandboxes made from it still use its files
        daemon.client().removeImageCmd(reference).withForce(true).exec();
        return true;
      }
      // Podman's forced removal would remove those sandboxes' containers: untag, then remove the
      // image unless a container uses it
      String imageId = daemon.client().inspectImageCmd(reference).exec().getId();
      daemon.podmanUntag(reference);
      try {
        daemon.client().removeImageCmd(imageId).exec();
      } catch (com.github.dockerjava.api.exception.ConflictException | NotFoundException e) {
        // in use by a sandbox made from it (it goes with the last such sandbox's removal), or
        // removed meanwhile
      }
      return true;
    } catch (NotFoundException e) {
      return false;
    } catch (DockerException e) {
      throw Daemon.translate("cannot remove snapshot '" + name + "'", e);
    }
  }

  /** The id of the image named {@code reference}, or null if there is none. */
  private String imageId(String reference) {
    try {
      return sandboxes.daemon().client().inspectImageCmd(reference).exec().getId();
    } catch (NotFoundException e) {
      return null;
    } catch (DockerException e) {
      throw Daemon.translate("cannot look up image " + reference, e);
    }
  }

  /**
   * Removes image {@code imageId} if a sandbox was committed to it (it carries the {@value
   * DockerSandbox#LABEL_ID} label its container had) and it has no name left: a fork's image, or a
   * removed snapshot's, once the sandbox just removed was the last made from it. Without this,
   * every fork left an unnamed image in the daemon for good. Quiet when another sandbox still uses
   * it, an image was made from it, or it is gone.
   */
  void removeIfLeft(String imageId) {
    if (imageId == null) {
      return;
    }
    try {
      var image = sandboxes.daemon().client().inspectImageCmd(imageId).exec();
      Map<String, String> labels = image.getConfig() == null ? null : image.getConfig().getLabels();
      boolean named = image.getRepoTags() != null && !image.getRepoTags().isEmpty();
      if (named || labels == null || !labels.containsKey(DockerSandbox.LABEL_ID)) {
        return;
      }
      sandboxes.daemon().client().removeImageCmd(imageId).exec();
    } catch (DockerException e) {
      // in use, a parent of another image, or removed meanwhile: left as it is
    }
  }

  /**
   * Commits sandbox {@code parent} to an image with no name, and gives its id to {@code use}: the
   * child's container then holds it. No name, so nothing to remove afterwards (Podman's forced
   * removal of a name would remove the child's container with it).
   */
  void withForkImage(String parent, Consumer<String> use) {
    use.accept(commit(parent, null, Map.of()));
  }

  /** Commits sandbox {@code id} (woken first) to an image named {@code reference} or none. */
  private String commit(String id, String reference, Map<String, String> labels) {
    sandboxes.wake(id);
    try {
      return sandboxes.pausing(
          id, () -> sandboxes.daemon().commit(sandboxes.containerName(id), reference, labels));
    } catch (NotFoundException e) {
      throw new WorkspaceUnavailableException("sandbox docker:" + id + " does not exist", e);
    } catch (DockerException e) {
      throw Daemon.translate("cannot save sandbox docker:" + id, e);
    }
  }
}
