package dev.sandbox4j.runtime.internal.registry;

import dev.sandbox4j.workspace.WorkspaceException;

/**
 * Talking to a registry failed: it refused, could not be reached, or sent what it must not (a blob
 * whose digest does not match, a manifest too large). The message names the registry and what to do
 * where there is something to do.
 */
public final class RegistryException extends WorkspaceException {
  private static final long serialVersionUID = 1L;

  /** Whether trying again may help: a transfer cut midway, a 5xx, a registry not reachable. */
  private final boolean transientFailure;

  public RegistryException(String message) {
    this(message, null, false);
  }

  public RegistryException(String message, Throwable cause) {
    this(message, cause, false);
  }

  RegistryException(String message, Throwable cause, boolean transientFailure) {
    super(message, cause);
    this.transientFailure = transientFailure;
  }

  boolean isTransient() {
    return transientFailure;
  }
}
