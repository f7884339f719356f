package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.engine.SandboxIdentity;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.oci.OciConfig;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * What a new sandbox of a {@link LocalSandbox} is made of, as its builder said: an image (or a
 * snapshot, whose layers and size win), size, labels, egress, networks and isolation.
 *
 * @param workingDirectory null: the sandbox's own (its image's, or {@code /home/sandbox})
 * @param disk null: the default, or a snapshot's
 * @param snapshot null: from {@code image}
 * @param user null: the image's (or the snapshot's) user
 */
record SandboxShape(
    String image,
    String workingDirectory,
    int cpus,
    long memoryBytes,
    int pids,
    SandboxDisk.Limit disk,
    Map<String, String> labels,
    String snapshot,
    EgressPolicy egress,
    List<String> networks,
    Isolation isolation,
    String user) {

  /** This shape with image {@code other}. */
  SandboxShape withImage(String other) {
    return other.equals(image)
        ? this
        : new SandboxShape(
            other,
            workingDirectory,
            cpus,
            memoryBytes,
            pids,
            disk,
            labels,
            snapshot,
            egress,
            networks,
            isolation,
            user);
  }

  /** This shape with {@code other} labels. */
  SandboxShape withLabels(Map<String, String> other) {
    return new SandboxShape(
        image,
        workingDirectory,
        cpus,
        memoryBytes,
        pids,
        disk,
        other,
        snapshot,
        egress,
        networks,
        isolation,
        user);
  }

  /**
   * The engine's spec of a new sandbox; from a snapshot, its layers and size.
   *
   * @throws WorkspaceUnavailableException if the snapshot does not exist (or is still being saved)
   */
  Engine.Spec spec(ImageStore images) {
    if (snapshot == null) {
      return new Engine.Spec(
          image,
          workingDirectory,
          new OciConfig.Limits(memoryBytes, cpus, pids),
          labels,
          null,
          new Networks.Settings(egress, networks),
          disk != null ? disk : SandboxDisk.Limit.DEFAULT,
          isolation,
          user,
          null);
    }
    Optional<ImageStore.Snapshot> saved = images.snapshotOf(snapshot);
    Optional<Image> found = images.find(snapshot);
    if (saved.isEmpty() || found.isEmpty()) {
      // A snapshot exists once its manifest is published, the last step of its save: never wait
      // for a save here, whose end nobody can promise (it copies a whole writable layer).
      if (saved.isEmpty() && found.isPresent()) {
        throw new WorkspaceUnavailableException(
            "image '" + snapshot + "' is not a snapshot: use Builder.image for images");
      }
      if (images.isBeingWritten(snapshot)) {
        throw new WorkspaceUnavailableException(
            "snapshot '"
                + snapshot
                + "' is still being saved: it can be used once the save has returned");
      }
      throw new WorkspaceUnavailableException(
          "snapshot '" + snapshot + "' does not exist here: see `sandbox4j snapshot ls`");
    }
    ImageStore.Snapshot s = saved.get();
    List<String> joined = new ArrayList<>(networks);
    joined.addAll(s.networks()); // a snapshot keeps the networks of the machine it was saved from
    return new Engine.Spec(
        snapshot,
        workingDirectory,
        new OciConfig.Limits(s.memoryBytes(), s.cpus(), s.pids()),
        labels,
        found.get().layerIds(),
        new Networks.Settings(egress, joined),
        disk != null ? disk : SandboxDisk.limitOf(s.diskBytes(), s.diskInodes()),
        isolation,
        user,
        // who the saved sandbox ran as; a snapshot of a sandbox that ran as the seeds has none
        s.identity() == null ? null : SandboxIdentity.fromConfig(s.identity()));
  }
}
