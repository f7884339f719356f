package dev.sandbox4j.cli;

import dev.sandbox4j.boxd.BoxdSandbox;
import dev.sandbox4j.runtime.Isolation;
import dev.sandbox4j.server.ServerEngine;
import java.util.Map;
import java.util.Objects;

/**
 * {@code serve --provider boxd}: the server's sandboxes as boxd machines of one boxd account (the
 * server's {@code BOXD_*} credentials), each create shaped by a {@link BoxdSandbox.Builder}.
 *
 * <p>boxd sizes a machine by its vCPU class (1, 2, 4 or 8; memory follows) and keeps no labels,
 * quotas or egress rules of ours; its machines are always isolated microVMs. A create that asks for
 * what boxd cannot give (memory, pids, a disk or inode quota, labels, gVisor, an idle timeout, a
 * delete-after time) is refused by its field (the server answers 501). The machines belong to the
 * operator's account: the server's own record keeps which organization may use which.
 */
final class BoxdServerEngine implements ServerEngine {

  private final Map<String, String> environment;
  private final BoxdSandbox provider;

  /**
   * @param environment where the credentials and endpoints come from ({@code BOXD_API_KEY} or
   *     {@code BOXD_TOKEN}, {@code BOXD_BASE_URL}, {@code BOXD_TOKEN_URL})
   */
  BoxdServerEngine(Map<String, String> environment) {
    this.environment = Map.copyOf(Objects.requireNonNull(environment, "environment"));
    this.provider = BoxdSandbox.builder(this.environment).build();
  }

  @Override
  public BoxdSandbox provider() {
    return provider;
  }

  @Override
  public BoxdSandbox shaped(Shape s) {
    refuse("memoryBytes", s.memoryBytes() != null, "boxd gives each vCPU class its own memory");
    refuse("pids", s.pids() != null, "boxd machines have no process limit of ours");
    refuse("diskBytes", s.diskBytes() != null, "boxd machines have no disk quota of ours");
    refuse("diskInodes", s.diskInodes() != null, "boxd machines have no inode quota");
    refuse("labels", !s.labels().isEmpty(), "boxd machines have no labels");
    refuse("idleTimeoutMs", s.idleTimeout() != null, "boxd has auto-suspend and auto-destroy");
    refuse("deleteAfter", s.deleteAfter() != null, "boxd has auto-suspend and auto-destroy");
    refuse(
        "isolation",
        s.isolation() == Isolation.GVISOR,
        "boxd machines are microVMs of their own, not gVisor (ask for container, or leave"
            + " isolation out)");
    BoxdSandbox.Builder b = BoxdSandbox.builder(environment);
    ShapeFields.field(
        "image",
        () -> {
          if (s.image() != null && !s.image().equals("default")) b.image(s.image());
        });
    ShapeFields.ifSet("snapshot", s.snapshot(), b::snapshot);
    ShapeFields.ifSet("cpus", s.cpus(), b::vcpu);
    ShapeFields.field("env", () -> b.env(s.env()));
    ShapeFields.ifSet("workingDirectory", s.workingDirectory(), b::workingDirectory);
    ShapeFields.ifSet("autoSuspendTimeoutMs", s.autoSuspendTimeout(), b::autoSuspendTimeout);
    ShapeFields.ifSet("sandboxTimeoutMs", s.sandboxTimeout(), b::autoDestroyTimeout);
    return b.build();
  }

  private static void refuse(String field, boolean asked, String why) {
    if (asked) {
      throw new UnsupportedOperationException(field + ": " + why);
    }
  }
}
