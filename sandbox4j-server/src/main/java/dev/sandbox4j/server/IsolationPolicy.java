package dev.sandbox4j.server;

import dev.sandbox4j.runtime.Isolation;
import java.util.Objects;

/**
 * Which isolation the server gives new sandboxes: the operator's default for a create that asks for
 * none ({@link SandboxServer.Builder#defaultIsolation}) and, when {@code forced} ({@link
 * SandboxServer.Builder#forceIsolation}), the only one a create may ask for. A fork inherits its
 * parent's isolation, so under a forced isolation a sandbox of another one (made before the
 * operator forced it) cannot be forked.
 */
record IsolationPolicy(Isolation isolation, boolean forced) {

  /** Container isolation unless a create asks for gVisor: the engine's own default. */
  static final IsolationPolicy DEFAULT = new IsolationPolicy(Isolation.CONTAINER, false);

  IsolationPolicy {
    Objects.requireNonNull(isolation, "isolation");
  }

  /**
   * The isolation of a sandbox whose create asks for {@code requested} (null: the request has no
   * {@code isolation}); a 400 naming {@code isolation} for a name that is none, and under a forced
   * isolation for another one.
   */
  Isolation of(String requested) {
    if (requested == null) {
      return isolation;
    }
    Isolation asked;
    try {
      asked = Isolation.parse(requested);
    } catch (IllegalArgumentException e) {
      throw ApiException.invalid("isolation", e.getMessage());
    }
    if (forced && asked != isolation) {
      throw ApiException.invalid(
          "isolation",
          "this server's operator requires "
              + isolation.id()
              + " isolation for every sandbox: ask for "
              + isolation.id()
              + " or leave isolation out, not "
              + asked.id());
    }
    return asked;
  }

  /**
   * Refuses, under a forced isolation, a fork of sandbox {@code id} whose isolation ({@code
   * parentIsolation}, null where the provider does not say) is another: the copy would inherit it.
   */
  void checkFork(String id, String parentIsolation) {
    if (forced && !isolation.id().equals(parentIsolation)) {
      throw ApiException.invalid(
          "isolation",
          "this server's operator requires "
              + isolation.id()
              + " isolation for every sandbox, and a fork keeps its parent's: sandbox "
              + id
              + " has "
              + (parentIsolation == null ? "another isolation" : parentIsolation + " isolation"));
    }
  }
}
