package dev.sandbox4j.workspace;

/** A backend that resolves symlinks, as {@code realpath -m} does, inside the workspace. */
public interface SupportsRealpath {

  /**
   * The canonical absolute path: symlinks of existing components resolved, {@code .} and {@code ..}
   * removed; components that do not exist are kept as given.
   */
  String realpath(String path);
}
