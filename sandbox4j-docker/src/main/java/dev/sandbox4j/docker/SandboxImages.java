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
 * labelled with their name and source) and a fork's passing image ({@code sandbox4j/fork:RANDOM},
 * untagged once the child's container has it). Both are commits, paused for their duration.
 */
final class SandboxImages {
  /** The repository of snapshots. */
  static final String SNAPSHOTS = "sandbox4j/snapshot";

  /** The repository of a fork's passing image. */
  static final String FORKS = "sandbox4j/fork";

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
    commit(id, SNAPSHOTS, name, Map.of(LABEL_SNAPSHOT, name, LABEL_SOURCE, id));
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
          || !List.of(image.getRepoTags()).contains(tag)) {
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

  /** Untags snapshot {@code name}; false if there was none. */
  boolean removeSnapshot(String name) {
    if (name == null || !SNAPSHOT_NAME.matcher(name).matches()) {
      return false;
    }
    try {
      // forced: untags it even while sandboxes made from it still use its files
      sandboxes.daemon().client().removeImageCmd(SNAPSHOTS + ":" + name).withForce(true).exec();
      return true;
    } catch (NotFoundException e) {
      return false;
    } catch (DockerException e) {
      throw Daemon.translate("cannot remove snapshot '" + name + "'", e);
    }
  }

  /** Commits sandbox {@code parent} to a passing image, gives it to {@code use}, then untags it. */
  void withForkImage(String parent, Consumer<String> use) {
    String image = FORKS + ":" + java.util.UUID.randomUUID().toString().replace("-", "");
    commit(parent, FORKS, image.substring(FORKS.length() + 1), Map.of());
    try {
      use.accept(image);
    } finally {
      try {
        // the child's container keeps the files; only the tag goes
        sandboxes.daemon().client().removeImageCmd(image).withForce(true).exec();
      } catch (DockerException e) {
        // already gone
      }
    }
  }

  private void commit(String id, String repository, String tag, Map<String, String> labels) {
    sandboxes.wake(id);
    try {
      sandboxes
          .daemon()
          .client()
          .commitCmd(sandboxes.containerName(id))
          .withRepository(repository)
          .withTag(tag)
          .withPause(true)
          .withLabels(labels)
          .exec();
    } catch (NotFoundException e) {
      throw new WorkspaceUnavailableException("sandbox docker:" + id + " does not exist", e);
    } catch (DockerException e) {
      throw Daemon.translate("cannot save sandbox docker:" + id, e);
    }
  }
}
