package dev.sandbox4j.runtime;

import java.util.Objects;

/**
 * One host prerequisite of the local engine, as {@link HostSetup#check} found it.
 *
 * <p>Informational checks (the open-files limit, whether the default image is built yet) are always
 * {@code ok}: they explain what the engine will do, but nothing is missing.
 *
 * @param name what was checked, e.g. {@code crun} or {@code hugetlb cgroup}
 * @param ok whether this prerequisite is met
 * @param detail what was found, or why it is not met
 * @param fix the exact command or action that fixes it when not {@code ok}; empty when {@code ok}
 */
public record HostCheck(String name, boolean ok, String detail, String fix) {

  /** Checks that no component is null, and that an {@code ok} check has no fix. */
  public HostCheck {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(detail, "detail");
    Objects.requireNonNull(fix, "fix");
    if (ok && !fix.isEmpty()) {
      throw new IllegalArgumentException("a check that is ok has no fix: " + name);
    }
  }

  public static HostCheck ok(String name, String detail) {
    return new HostCheck(name, true, detail, "");
  }

  public static HostCheck missing(String name, String detail, String fix) {
    return new HostCheck(name, false, detail, fix);
  }
}
