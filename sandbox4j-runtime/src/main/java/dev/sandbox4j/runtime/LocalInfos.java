package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.SandboxDisk;
import dev.sandbox4j.runtime.internal.engine.SandboxRecord;
import dev.sandbox4j.runtime.internal.engine.Timers;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.net.Networks;
import dev.sandbox4j.runtime.internal.ports.PortUrls;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * The machine values the local engine reports ({@link SandboxInfo}, {@link SnapshotInfo}),
 * assembled from a sandbox's record and the files of its directory, or from a snapshot's image.
 */
final class LocalInfos {
  private LocalInfos() {}

  /** Every sandbox of the engine's state directory, sorted by id; starts its supervisor. */
  static List<SandboxInfo> list(Engine e) {
    Supervisor.ensureRunning(e);
    int proxyPort = PortUrls.port(e.home());
    return e.list().stream().map(r -> info(e, r, proxyPort)).toList();
  }

  /** Sandbox {@code id}, reading its files only; empty if it does not exist (or is being made). */
  static Optional<SandboxInfo> info(Engine e, String id) {
    SandboxRecord r;
    try {
      r = e.record(id);
    } catch (WorkspaceException gone) {
      return Optional.empty();
    }
    return Optional.of(info(e, r, PortUrls.port(e.home())));
  }

  static SandboxInfo info(Engine e, SandboxRecord r, int proxyPort) {
    Path dir = e.dir(r.id());
    String egress;
    List<String> networks;
    try {
      boolean has = Networks.saved(dir).isPresent();
      networks = Networks.networksOf(dir);
      egress = has ? Networks.policy(dir).mode().name().toLowerCase(Locale.ROOT) : "loopback";
    } catch (RuntimeException beingCreatedOrDestroyed) {
      networks = List.of();
      egress = "unknown";
    }
    return SandboxInfo.builder(
            new WorkspaceRef(LocalSandbox.NAME, r.id()), r.status().name().toLowerCase(Locale.ROOT))
        .image(r.image())
        .created(Instant.parse(r.created()))
        .labels(r.labels())
        .limits(r.cpus(), r.memoryBytes(), r.pids())
        .disk(r.diskBytes(), r.diskInodes())
        .timers(Timers.read(dir).map(Timers.Settings::toPublic).orElse(null))
        // its own: a LocalSandbox built with workingDirectory(...) starts its commands elsewhere
        .workingDirectory(r.identity().workingDirectory())
        .networks(networks)
        .egress(egress)
        .portUrl(PortUrls.urlTemplate(proxyPort, r.id()))
        .isolation(r.isolation().id())
        .build();
  }

  static SnapshotInfo snapshotInfo(Image image, ImageStore.Snapshot s) {
    return new SnapshotInfo(
        image.name(),
        image.created(),
        new WorkspaceRef(LocalSandbox.NAME, s.sandbox()),
        s.image(),
        s.cpus(),
        s.memoryBytes(),
        s.pids(),
        image.sizeBytes(),
        SandboxDisk.limitOf(s.diskBytes(), s.diskInodes()).bytes(),
        SandboxDisk.limitOf(s.diskBytes(), s.diskInodes()).inodes());
  }
}
