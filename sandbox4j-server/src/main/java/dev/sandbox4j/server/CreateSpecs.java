package dev.sandbox4j.server;

import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * How a create request ({@link Sandboxes.CreateSpec}) becomes the {@link ServerEngine.Shape} the
 * engine makes: labels bounded per sandbox; sizes admitted under the server's ceilings per sandbox.
 */
final class CreateSpecs {

  static final Pattern LABEL_KEY = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._/-]{0,62}");
  static final int MAX_LABELS = 64;
  static final int MAX_LABEL_VALUE = 256;

  private CreateSpecs() {}

  /**
   * The shape a create request asks for, as given: durations and the instant parsed, the isolation
   * resolved under the operator's policy (its default when none is asked for), no size admitted yet
   * ({@link #admit} does that), the snapshot not yet resolved to the engine's name.
   */
  static ServerEngine.Shape requested(Sandboxes.CreateSpec s, IsolationPolicy isolation) {
    Instant deleteAfter = null;
    if (s.deleteAfter() != null) {
      try {
        deleteAfter = Instant.parse(s.deleteAfter());
      } catch (java.time.format.DateTimeParseException e) {
        throw ApiException.invalid(
            "deleteAfter",
            "deleteAfter: deleteAfter must be an ISO-8601 instant such as 2026-12-01T00:00:00Z,"
                + " was '"
                + s.deleteAfter()
                + "'");
      }
    }
    return new ServerEngine.Shape(
        s.image(),
        null,
        s.cpus(),
        s.memoryBytes(),
        s.pids(),
        s.diskBytes(),
        s.diskInodes(),
        s.env(),
        s.workingDirectory(),
        s.labels(),
        duration(s.autoSuspendTimeoutMs(), "autoSuspendTimeoutMs"),
        duration(s.sandboxTimeoutMs(), "sandboxTimeoutMs"),
        duration(s.idleTimeoutMs(), "idleTimeoutMs"),
        deleteAfter,
        isolation.of(s.isolation()));
  }

  /**
   * Admission control of a create's size: a size asked for over its ceiling is a 400 naming it; an
   * omitted one gets the engine's default, capped at the ceiling. On the local engine a create from
   * {@code snapshot} (the engine's name; null for an image) keeps the snapshot's size (admitted
   * apart) unless it sets its own disk; elsewhere (docker) a snapshot carries no size, and such a
   * create is sized as one from an image.
   *
   * @param local whether the engine is the local one: it copies sizes from snapshots, and gives an
   *     omitted disk its default quota (docker gives none, so none is capped into one)
   * @return {@code requested} from {@code snapshot}, with the capped sizes
   */
  static ServerEngine.Shape admit(
      SandboxCeilings ceilings, ServerEngine.Shape requested, String snapshot, boolean local) {
    boolean fromSource = snapshot != null && local; // its size is the snapshot's
    Long memory = requested.memoryBytes();
    Integer pids = requested.pids();
    // a size asked for is held to its ceiling even with a snapshot: the local engine refuses sizes
    // with a snapshot, but a provider that takes them (docker) would make what the request says
    int cpus = requested.cpus() != null ? requested.cpus() : 1;
    if (!fromSource || requested.cpus() != null) {
      SandboxCeilings.check("cpus", cpus, ceilings.cpus(), "");
    }
    if (memory != null) {
      SandboxCeilings.check("memoryBytes", memory, ceilings.memoryBytes(), " bytes");
    } else if (!fromSource
        && SandboxCeilings.ENGINE_MEMORY_PER_CPU * cpus > ceilings.memoryBytes()) {
      memory = ceilings.memoryBytes();
    }
    if (pids != null) {
      SandboxCeilings.check("pids", pids, ceilings.pids(), "");
    } else if (!fromSource && SandboxCeilings.ENGINE_MAX_DEFAULT_PIDS > ceilings.pids()) {
      pids = ceilings.pids();
    }
    Long disk = requested.diskBytes();
    if (disk != null) {
      SandboxCeilings.check("diskBytes", disk, ceilings.diskBytes(), " bytes");
    } else if (local && snapshot == null && SandboxCeilings.ENGINE_DISK > ceilings.diskBytes()) {
      disk = ceilings.diskBytes();
    }
    Long inodes = requested.diskInodes();
    if (inodes != null) {
      SandboxCeilings.check("diskInodes", inodes, ceilings.diskInodes(), "");
    } else if (local
        && snapshot == null
        && SandboxCeilings.ENGINE_DISK_INODES > ceilings.diskInodes()) {
      inodes = ceilings.diskInodes();
    }
    ServerEngine.Shape r = requested;
    return new ServerEngine.Shape(
        r.image(),
        snapshot,
        r.cpus(),
        memory,
        pids,
        disk,
        inodes,
        r.env(),
        r.workingDirectory(),
        r.labels(),
        r.autoSuspendTimeout(),
        r.sandboxTimeout(),
        r.idleTimeout(),
        r.deleteAfter(),
        r.isolation());
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

  private static Duration duration(Long ms, String field) {
    if (ms == null) {
      return null;
    }
    if (ms < 0) {
      throw ApiException.invalid(field, field + " must not be negative, was " + ms);
    }
    return Duration.ofMillis(ms);
  }
}
