package dev.sandbox4j.cli;

import dev.sandbox4j.modal.ModalSandbox;
import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.server.ServerEngine;
import java.util.Map;
import java.util.Objects;

/**
 * {@code serve --provider modal}: the server's sandboxes as Modal sandboxes of one Modal account
 * (the server's {@code MODAL_*} credentials or {@code ~/.modal.toml}), in the app {@code
 * sandbox4j}, each create shaped by a {@link ModalSandbox.Builder}.
 *
 * <p>Modal takes cpu, memory, a lifetime (its sandbox timeout), an idle timeout, env, a working
 * directory, an image (a registry tag) and a snapshot (an image id from a filesystem snapshot). A
 * create that asks for what Modal cannot give (pids, a disk or inode quota, labels, auto-suspend,
 * delete-after, gVisor) is refused by its field (the server answers 501). The sandboxes belong to
 * the operator's account: the server's own record keeps which organization may use which.
 */
final class ModalServerEngine implements ServerEngine {

  private final Map<String, String> environment;
  private final ModalSandbox provider;

  /**
   * @param environment where the credentials and endpoint come from ({@code MODAL_TOKEN_ID}, {@code
   *     MODAL_TOKEN_SECRET}, {@code MODAL_SERVER_URL}; else {@code ~/.modal.toml})
   */
  ModalServerEngine(Map<String, String> environment) {
    this.environment = Map.copyOf(Objects.requireNonNull(environment, "environment"));
    this.provider = base().build();
  }

  /** A builder with the server's credentials (as the CLI's {@code --provider modal} finds them). */
  private ModalSandbox.Builder base() {
    return Providers.modalBuilder(environment);
  }

  @Override
  public ModalSandbox provider() {
    return provider;
  }

  @Override
  public ModalSandbox shaped(Shape s) {
    refuse("pids", s.pids() != null, "Modal sandboxes have no process limit of ours");
    refuse("diskBytes", s.diskBytes() != null, "Modal sandboxes have no disk quota of ours");
    refuse("diskInodes", s.diskInodes() != null, "Modal sandboxes have no inode quota");
    refuse("labels", !s.labels().isEmpty(), "the server does not tag Modal sandboxes");
    refuse(
        "autoSuspendTimeoutMs",
        s.autoSuspendTimeout() != null,
        "Modal sandboxes are not suspended (an idle timeout ends them)");
    refuse("deleteAfter", s.deleteAfter() != null, "Modal has a sandbox timeout instead");
    refuse(
        "isolation",
        s.isolation() == Isolation.GVISOR,
        "Modal chooses its sandboxes' isolation itself (ask for container, or leave isolation"
            + " out)");
    ModalSandbox.Builder b = base();
    ShapeFields.field(
        "image",
        () -> {
          if (s.image() != null && !s.image().equals("default")) b.image(s.image());
        });
    ShapeFields.ifSet("snapshot", s.snapshot(), b::imageId);
    ShapeFields.ifSet("cpus", s.cpus(), v -> b.cpu(v));
    ShapeFields.ifSet("memoryBytes", s.memoryBytes(), v -> b.memoryMiB(Providers.wholeMiB(v)));
    ShapeFields.field("env", () -> b.env(s.env()));
    ShapeFields.ifSet("workingDirectory", s.workingDirectory(), b::workingDirectory);
    ShapeFields.ifSet("sandboxTimeoutMs", s.sandboxTimeout(), b::sandboxTimeout);
    ShapeFields.ifSet("idleTimeoutMs", s.idleTimeout(), b::idleTimeout);
    return b.build();
  }

  private static void refuse(String field, boolean asked, String why) {
    if (asked) {
      throw new UnsupportedOperationException(field + ": " + why);
    }
  }
}
