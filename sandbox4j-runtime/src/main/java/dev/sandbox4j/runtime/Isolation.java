package dev.sandbox4j.runtime;

import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * The boundary between a sandbox's code and the host's kernel, chosen per sandbox ({@link
 * LocalSandbox.Builder#isolation}) and kept for its whole life, across stop, start and fork.
 */
public enum Isolation {
  /**
   * A container ({@code crun}): namespaces, cgroups, a seccomp filter and the engine's capability
   * set around processes that run on the host's kernel. The fastest start and exec; a kernel bug
   * reachable through the allowed system calls is an escape. The default.
   */
  CONTAINER("container"),

  /**
   * gVisor ({@code runsc}): the sandbox's system calls are served by gVisor's own kernel (the
   * Sentry, a user-space process under a tight seccomp filter of its own), so code in the sandbox
   * never reaches the host kernel's system call table. Costs a slower start and exec and more
   * memory per sandbox. Hibernate, live fork and an interactive terminal are not supported with it
   * (they fail saying so); a fork copies files only. gVisor does not implement set-user-ID
   * executables (google/gvisor#5299), so {@code sudo} fails inside: the sandbox user cannot become
   * root.
   */
  GVISOR("gvisor");

  private final String id;

  Isolation(String id) {
    this.id = id;
  }

  /** The name on the command line and in the server's API: {@code container} or {@code gvisor}. */
  public String id() {
    return id;
  }

  /**
   * The isolation called {@code name} ({@link #id()}, any case).
   *
   * @throws IllegalArgumentException naming the accepted values if there is none
   */
  public static Isolation parse(String name) {
    for (Isolation i : values()) {
      if (i.id.equalsIgnoreCase(name == null ? "" : name.strip())) {
        return i;
      }
    }
    throw new IllegalArgumentException(
        "unknown isolation '"
            + name
            + "': expected one of "
            + Arrays.stream(values()).map(Isolation::id).collect(Collectors.joining(", ")));
  }

  @Override
  public String toString() {
    return id.toLowerCase(Locale.ROOT);
  }
}
