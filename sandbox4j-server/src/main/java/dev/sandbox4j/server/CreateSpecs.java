package dev.sandbox4j.server;

import dev.sandbox4j.runtime.LocalSandbox;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * How a create request ({@link Sandboxes.CreateSpec}) becomes an engine builder: each field set
 * and, when the engine refuses it, named in its 400; labels bounded per sandbox; sizes admitted
 * under the server's ceilings per sandbox.
 */
final class CreateSpecs {

  static final Pattern LABEL_KEY = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._/-]{0,62}");
  static final int MAX_LABELS = 64;
  static final int MAX_LABEL_VALUE = 256;

  private CreateSpecs() {}

  /**
   * Admission control of a create's size: a size asked for over its ceiling is a 400 naming it; an
   * omitted one gets the engine's default, capped at the ceiling.
   */
  static void admitSize(
      SandboxCeilings ceilings, Sandboxes.CreateSpec spec, LocalSandbox.Builder b) {
    int cpus = spec.cpus() != null ? spec.cpus() : 1;
    SandboxCeilings.check("cpus", cpus, ceilings.cpus(), "");
    if (spec.memoryBytes() != null) {
      SandboxCeilings.check("memoryBytes", spec.memoryBytes(), ceilings.memoryBytes(), " bytes");
    } else if (SandboxCeilings.ENGINE_MEMORY_PER_CPU * cpus > ceilings.memoryBytes()) {
      b.memory(ceilings.memoryBytes());
    }
    if (spec.pids() != null) {
      SandboxCeilings.check("pids", spec.pids(), ceilings.pids(), "");
    } else if (SandboxCeilings.ENGINE_MAX_DEFAULT_PIDS > ceilings.pids()) {
      b.pids(ceilings.pids());
    }
    admitDisk(ceilings, spec, b);
  }

  /**
   * Admission control of a create's disk: a quota asked for over its ceiling is a 400 naming it; an
   * omitted one on an image gets the engine's default, capped at the ceiling (a create from a
   * snapshot that omits it keeps the snapshot's).
   */
  static void admitDisk(
      SandboxCeilings ceilings, Sandboxes.CreateSpec spec, LocalSandbox.Builder b) {
    if (spec.diskBytes() != null) {
      SandboxCeilings.check("diskBytes", spec.diskBytes(), ceilings.diskBytes(), " bytes");
    } else if (spec.snapshot() == null && SandboxCeilings.ENGINE_DISK > ceilings.diskBytes()) {
      b.disk(ceilings.diskBytes());
    }
    if (spec.diskInodes() != null) {
      SandboxCeilings.check("diskInodes", spec.diskInodes(), ceilings.diskInodes(), "");
    } else if (spec.snapshot() == null
        && SandboxCeilings.ENGINE_DISK_INODES > ceilings.diskInodes()) {
      b.diskInodes(ceilings.diskInodes());
    }
  }

  static LocalSandbox.Builder configure(LocalSandbox engine, Sandboxes.CreateSpec s) {
    LocalSandbox.Builder b =
        LocalSandbox.builder()
            .home(engine.home())
            .diskReserve(engine.diskReserve())
            .diskOvercommit(engine.diskOvercommit());
    field(
        "image",
        () -> {
          if (s.image() != null) b.image(s.image());
        });
    field(
        "cpus",
        () -> {
          if (s.cpus() != null) b.cpus(s.cpus());
        });
    field(
        "memoryBytes",
        () -> {
          if (s.memoryBytes() != null) b.memory(s.memoryBytes());
        });
    field(
        "pids",
        () -> {
          if (s.pids() != null) b.pids(s.pids());
        });
    field(
        "diskBytes",
        () -> {
          if (s.diskBytes() != null) b.disk(s.diskBytes());
        });
    field(
        "diskInodes",
        () -> {
          if (s.diskInodes() != null) b.diskInodes(s.diskInodes());
        });
    field(
        "env",
        () -> {
          if (s.env() != null) b.env(s.env());
        });
    field(
        "workingDirectory",
        () -> {
          if (s.workingDirectory() != null) b.workingDirectory(s.workingDirectory());
        });
    field(
        "labels",
        () -> {
          if (s.labels() != null) s.labels().forEach(b::label);
        });
    field(
        "autoSuspendTimeoutMs",
        () -> {
          if (s.autoSuspendTimeoutMs() != null)
            b.autoSuspendTimeout(millis(s.autoSuspendTimeoutMs(), "autoSuspendTimeoutMs"));
        });
    field(
        "sandboxTimeoutMs",
        () -> {
          if (s.sandboxTimeoutMs() != null)
            b.sandboxTimeout(millis(s.sandboxTimeoutMs(), "sandboxTimeoutMs"));
        });
    field(
        "idleTimeoutMs",
        () -> {
          if (s.idleTimeoutMs() != null) b.idleTimeout(millis(s.idleTimeoutMs(), "idleTimeoutMs"));
        });
    field(
        "deleteAfter",
        () -> {
          if (s.deleteAfter() != null) {
            try {
              b.deleteAfter(Instant.parse(s.deleteAfter()));
            } catch (java.time.format.DateTimeParseException e) {
              throw new IllegalArgumentException(
                  "deleteAfter must be an ISO-8601 instant such as 2026-12-01T00:00:00Z, was '"
                      + s.deleteAfter()
                      + "'");
            }
          }
        });
    return b;
  }

  /**
   * Refuses more than {@link #MAX_LABELS} labels, and a key or value the engine would not keep,
   * naming the label: labels are stored with the sandbox and listed on every page, so their size is
   * bounded per sandbox, not only by the body limit.
   */
  static void checkLabels(Map<String, String> labels) {
    if (labels == null) {
      return;
    }
    if (labels.size() > MAX_LABELS) {
      throw ApiException.invalid(
          "labels", "at most " + MAX_LABELS + " labels per sandbox, was " + labels.size());
    }
    for (Map.Entry<String, String> e : labels.entrySet()) {
      String key = e.getKey();
      if (key == null || !LABEL_KEY.matcher(key).matches()) {
        throw ApiException.invalid(
            "labels",
            "label key '"
                + Sandboxes.printable(key)
                + "' is not 1 to 63 of letters, digits, '.', '_', '/', '-', starting with a"
                + " letter or digit");
      }
      String value = e.getValue();
      if (value == null) {
        throw ApiException.invalid("labels", "label '" + key + "' has no value (null)");
      }
      if (value.length() > MAX_LABEL_VALUE) {
        throw ApiException.invalid(
            "labels",
            "label '"
                + key
                + "' has a value of "
                + value.length()
                + " characters, over the limit of "
                + MAX_LABEL_VALUE);
      }
      if (value.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) {
        throw ApiException.invalid(
            "labels", "label '" + key + "' has a control character in its value");
      }
    }
  }

  static Duration millis(long ms, String field) {
    if (ms < 0) {
      throw ApiException.invalid(field, field + " must not be negative, was " + ms);
    }
    return Duration.ofMillis(ms);
  }

  private static void field(String name, Runnable setter) {
    try {
      setter.run();
    } catch (IllegalArgumentException | NullPointerException e) {
      throw ApiException.invalid(name, name + ": " + e.getMessage());
    }
  }
}
