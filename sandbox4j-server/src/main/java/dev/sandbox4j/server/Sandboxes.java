package dev.sandbox4j.server;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.ImageInfo;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * The engine's sandboxes as organizations see them: creation under quota and rate limit, ownership
 * in the database, and a {@link Workspace} per owned sandbox with the env and working directory it
 * was created with (the engine keeps neither: they apply on attach).
 *
 * <p>Every lookup by id goes through {@link #owned}: a sandbox of another organization, or one that
 * never existed, is the same {@code not_found}. Thread-safe: the database serializes its
 * statements; a create reserves its place under the quota under a per-organization lock, so
 * concurrent creates run in parallel and still cannot overshoot the quota together.
 */
final class Sandboxes {

  static final Pattern ID = Pattern.compile("[a-z0-9]{1,32}");
  static final Pattern SNAPSHOT_NAME = Pattern.compile("[a-z0-9][a-z0-9._-]{0,47}");
  static final Pattern IMAGE_NAME = Pattern.compile("[a-z0-9][a-z0-9._-]{0,62}");
  static final Pattern LABEL_KEY = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._/-]{0,62}");

  /** The image a create without {@code image} or {@code snapshot} starts from. */
  static final String DEFAULT_IMAGE = "default";

  static final int MAX_LABELS = 64;
  static final int MAX_LABEL_VALUE = 256;
  static final Set<String> STATES =
      Set.of("running", "suspended", "stopped", "hibernated", "creating", "destroying");
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final TypeReference<Map<String, String>> STRING_MAP = new TypeReference<>() {};

  private final LocalSandbox engine;
  private final Database db;
  private final ServerLimits limits;
  private final Map<String, Workspace> workspaces = new ConcurrentHashMap<>();
  private final Map<Long, ReentrantLock> createLocks = new ConcurrentHashMap<>();
  private final Map<Long, Integer> pending = new ConcurrentHashMap<>(); // guarded by createLocks
  private final Map<Long, TokenBucket> createBuckets = new ConcurrentHashMap<>();

  Sandboxes(LocalSandbox engine, Database db, ServerLimits limits) {
    this.engine = engine;
    this.db = db;
    this.limits = limits;
  }

  LocalSandbox engine() {
    return engine;
  }

  /** What a create request asks for, validated by {@link #create}. */
  record CreateSpec(
      String image,
      String snapshot,
      Integer cpus,
      Long memoryBytes,
      Integer pids,
      Map<String, String> env,
      String workingDirectory,
      Map<String, String> labels,
      Long autoSuspendTimeoutMs,
      Long sandboxTimeoutMs,
      Long idleTimeoutMs,
      String deleteAfter,
      Long diskBytes,
      Long diskInodes) {}

  /** A sandbox as the API shows it. */
  record View(Database.SandboxRow row, SandboxInfo info) {}

  View create(Organization org, CreateSpec spec) {
    checkLabels(spec.labels());
    LocalSandbox.Builder b = configure(spec);
    Source source;
    if (spec.snapshot() != null) {
      source = ownedSnapshot(org, spec.snapshot());
      SnapshotInfo saved = source.snapshot();
      limits
          .ceilings()
          .admitCopy(
              "snapshot",
              "snapshot '" + spec.snapshot() + "'",
              saved.cpus(),
              saved.memoryBytes(),
              saved.pids());
      limits
          .ceilings()
          .admitCopiedDisk( // unless the request sets its own, checked below
              "snapshot",
              "snapshot '" + spec.snapshot() + "'",
              spec.diskBytes() == null ? saved.diskBytes() : -1,
              spec.diskInodes() == null ? saved.diskInodes() : -1);
      admitDisk(spec, b);
      b.snapshot(saved.name());
    } else {
      source = usableImage(spec.image() != null ? spec.image() : DEFAULT_IMAGE);
      admitSize(spec, b);
    }
    LocalSandbox provider;
    try {
      provider = b.build();
    } catch (IllegalArgumentException e) {
      throw ApiException.invalid("snapshot", e.getMessage());
    }
    takeCreateToken(org); // after validation: a bad request does not spend a create
    try (Reservation _ = reserve(org)) {
      Workspace ws = Workspace.of(provider.newBackend());
      WorkspaceRef ref;
      try {
        ref = ws.open();
      } catch (WorkspaceException e) {
        if (!source.stillThere(this)) {
          throw source.notFound(); // removed since it was checked: still no 500
        }
        throw e;
      }
      Database.SandboxRow row =
          new Database.SandboxRow(
              ref.id(),
              org.id(),
              json(spec.labels() == null ? Map.of() : spec.labels()),
              json(spec.env() == null ? Map.of() : spec.env()),
              spec.workingDirectory(),
              Instant.now().toString());
      try {
        db.insertSandbox(row);
      } catch (RuntimeException e) {
        engine.destroy(ref);
        throw e;
      }
      workspaces.put(ref.id(), ws);
      return view(row);
    }
  }

  /**
   * What a create starts from, checked to be the organization's to use: a published image, or one
   * of its own snapshots (with what the engine knows of it).
   */
  private record Source(String field, String name, SnapshotInfo snapshot) {
    ApiException notFound() {
      return field.equals("image") ? noImage(name) : noSnapshot(name, field);
    }

    boolean stillThere(Sandboxes s) {
      return snapshot != null
          ? s.engine.snapshots().stream().anyMatch(i -> i.name().equals(snapshot.name()))
          : s.imageExists(name);
    }
  }

  /**
   * {@code name} as an image an organization may start from: published by the operator and on this
   * host ({@code default} is built on first use). Anything else, such as an image the operator did
   * not publish or another organization's snapshot under its engine name, is the same 404 as a name
   * that exists nowhere.
   */
  private Source usableImage(String name) {
    if (name == null
        || !IMAGE_NAME.matcher(name).matches()
        || !db.isPublished(name)
        || !imageExists(name)) {
      throw noImage(name);
    }
    return new Source("image", name, null);
  }

  private boolean imageExists(String name) {
    return name.equals(DEFAULT_IMAGE)
        || engine.images().stream().anyMatch(i -> i.name().equals(name));
  }

  static ApiException noImage(String name) {
    return new ApiException(
        ErrorCode.NOT_FOUND,
        "no image '"
            + printable(name)
            + "' for this organization: GET /v1/images lists the images it may use",
        "image",
        null,
        null);
  }

  /** The organization's snapshot {@code name}, saved and complete; {@code not_found} otherwise. */
  private Source ownedSnapshot(Organization org, String name) {
    return new Source("snapshot", name, ownedSnapshotInfo(org, name, "snapshot"));
  }

  private SnapshotInfo ownedSnapshotInfo(Organization org, String name, String field) {
    String engineName =
        db.snapshots(org.id()).stream()
            .filter(s -> s.name().equals(name))
            .map(Database.SnapshotRow::engineName)
            .findFirst()
            .orElseThrow(() -> noSnapshot(name, field));
    return engine.snapshots().stream()
        .filter(i -> i.name().equals(engineName))
        .findFirst()
        .orElseThrow(() -> noSnapshot(name, field));
  }

  static ApiException noSnapshot(String name, String field) {
    return new ApiException(
        ErrorCode.NOT_FOUND,
        "no snapshot '" + printable(name) + "' in this organization: GET /v1/snapshots lists them",
        field,
        null,
        null);
  }

  /**
   * Admission control of a create's size: a size asked for over its ceiling is a 400 naming it; an
   * omitted one gets the engine's default, capped at the ceiling.
   */
  private void admitSize(CreateSpec spec, LocalSandbox.Builder b) {
    SandboxCeilings ceilings = limits.ceilings();
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
    admitDisk(spec, b);
  }

  /**
   * Admission control of a create's disk: a quota asked for over its ceiling is a 400 naming it; an
   * omitted one on an image gets the engine's default, capped at the ceiling (a create from a
   * snapshot that omits it keeps the snapshot's).
   */
  private void admitDisk(CreateSpec spec, LocalSandbox.Builder b) {
    SandboxCeilings ceilings = limits.ceilings();
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

  /** The create rate limit: a token from the organization's bucket, or {@code rate_limited}. */
  private void takeCreateToken(Organization org) {
    TokenBucket bucket =
        createBuckets.computeIfAbsent(
            org.id(), k -> new TokenBucket(limits.createBurst(), limits.createRefill()));
    long waitMs = bucket.take();
    if (waitMs > 0) {
      long seconds = Math.max(1, (waitMs + 999) / 1000);
      throw new ApiException(
          ErrorCode.RATE_LIMITED,
          "too many sandboxes created: retry in " + seconds + " s",
          null,
          null,
          seconds);
    }
  }

  /** A place under the organization's quota, held while its sandbox is made and recorded. */
  private interface Reservation extends AutoCloseable {
    @Override
    void close();
  }

  /**
   * Reserves a place under the quota, or {@code quota_exceeded}. The check and the reservation
   * happen under the organization's lock; the (slow) creation does not, so concurrent creates of
   * one organization run in parallel and still cannot overshoot the quota together.
   */
  private Reservation reserve(Organization org) {
    ReentrantLock lock = createLocks.computeIfAbsent(org.id(), k -> new ReentrantLock());
    lock.lock();
    try {
      checkQuota(org, pending.getOrDefault(org.id(), 0));
      pending.merge(org.id(), 1, Integer::sum);
    } finally {
      lock.unlock();
    }
    return () -> {
      lock.lock();
      try {
        pending.merge(org.id(), -1, Integer::sum);
      } finally {
        lock.unlock();
      }
    };
  }

  private void checkQuota(Organization org, int pendingCreates) {
    List<Database.SandboxRow> rows = db.sandboxes(org.id(), null);
    if (rows.size() + pendingCreates < limits.maxSandboxesPerOrganization()) {
      return;
    }
    Set<String> live = liveIds();
    long count = pendingCreates;
    for (Database.SandboxRow r : rows) {
      if (live.contains(r.id())) {
        count++;
      } else {
        forget(r.id()); // a timer destroyed it: it no longer counts
      }
    }
    if (count >= limits.maxSandboxesPerOrganization()) {
      throw new ApiException(
          ErrorCode.QUOTA_EXCEEDED,
          "the organization has " + count + " sandboxes, its limit: delete one first",
          null,
          null,
          null);
    }
  }

  private Set<String> liveIds() {
    return engine.list().stream().map(i -> i.ref().id()).collect(Collectors.toSet());
  }

  private LocalSandbox.Builder configure(CreateSpec s) {
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
                + printable(key)
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

  /** The organization's sandbox {@code id}; {@code not_found} if it is not one of them. */
  Database.SandboxRow owned(Organization org, String id) {
    if (id == null || !ID.matcher(id).matches()) {
      throw ApiException.notFound("no sandbox '" + printable(id) + "'");
    }
    return db.sandbox(org.id(), id)
        .orElseThrow(() -> ApiException.notFound("no sandbox '" + id + "'"));
  }

  View get(Organization org, String id) {
    return view(owned(org, id));
  }

  private View view(Database.SandboxRow row) {
    return new View(row, info(row.id()).orElse(null));
  }

  Optional<SandboxInfo> info(String id) {
    return engine.info(new WorkspaceRef(LocalSandbox.NAME, id));
  }

  /** A page of the organization's sandboxes after {@code cursor}, filtered. */
  record Page(List<View> items, String lastId, boolean more) {}

  Page list(Organization org, Map<String, String> labels, String state, int limit, String after) {
    Map<String, SandboxInfo> live =
        engine.list().stream().collect(Collectors.toMap(i -> i.ref().id(), Function.identity()));
    List<View> out = new ArrayList<>();
    boolean more = false;
    for (Database.SandboxRow row : db.sandboxes(org.id(), after)) {
      SandboxInfo info = live.get(row.id());
      if (info == null) {
        continue; // destroyed by a timer meanwhile: shown nowhere, forgotten on next access
      }
      if (state != null && !state.equals(info.state())) {
        continue;
      }
      Map<String, String> own = labels(row);
      if (!labels.entrySet().stream().allMatch(e -> e.getValue().equals(own.get(e.getKey())))) {
        continue;
      }
      if (out.size() == limit) {
        more = true;
        break;
      }
      out.add(new View(row, info));
    }
    return new Page(out, out.isEmpty() ? null : out.getLast().row().id(), more);
  }

  void delete(Organization org, String id) {
    Database.SandboxRow row = owned(org, id);
    engine.destroy(new WorkspaceRef(LocalSandbox.NAME, row.id()));
    forget(row.id());
  }

  private void forget(String id) {
    db.deleteSandbox(id);
    workspaces.remove(id);
  }

  /** The workspace of the organization's sandbox {@code id}, attached lazily. */
  Workspace workspace(Organization org, String id) {
    Database.SandboxRow row = owned(org, id);
    return workspaces.computeIfAbsent(
        row.id(),
        k -> {
          LocalSandbox.Builder b = LocalSandbox.builder().home(engine.home()).env(env(row));
          if (row.workingDirectory() != null) {
            b.workingDirectory(row.workingDirectory());
          }
          return Workspace.of(
              b.build().backend(new WorkspaceRef(LocalSandbox.NAME, row.id())).orElseThrow());
        });
  }

  View lifecycle(Organization org, String id, String operation) {
    Database.SandboxRow row = owned(org, id);
    WorkspaceRef ref = new WorkspaceRef(LocalSandbox.NAME, row.id());
    switch (operation) {
      case "suspend" -> engine.suspend(ref);
      case "resume" -> engine.resume(ref);
      case "stop" -> engine.stop(ref);
      case "start" -> engine.start(ref);
      case "hibernate" -> engine.hibernate(ref);
      default -> throw new IllegalArgumentException(operation);
    }
    return view(row);
  }

  record Fork(View sandbox, ForkResult result) {}

  Fork fork(Organization org, String id, boolean filesOnly) {
    Database.SandboxRow row = owned(org, id);
    SandboxInfo parent = info(row.id()).orElse(null);
    if (parent != null) { // a copy keeps its parent's size, admitted when the ceilings were higher
      limits
          .ceilings()
          .admitCopy(
              null, "sandbox " + row.id(), parent.cpus(), parent.memoryBytes(), parent.pids());
      limits
          .ceilings()
          .admitCopiedDisk(null, "sandbox " + row.id(), parent.diskBytes(), parent.diskInodes());
    }
    takeCreateToken(org);
    try (Reservation _ = reserve(org)) {
      WorkspaceRef ref = new WorkspaceRef(LocalSandbox.NAME, row.id());
      ForkResult result = filesOnly ? engine.forkFiles(ref) : engine.fork(ref);
      Database.SandboxRow child =
          new Database.SandboxRow(
              result.ref().id(),
              org.id(),
              row.labels(),
              row.env(),
              row.workingDirectory(),
              Instant.now().toString());
      db.insertSandbox(child);
      return new Fork(view(child), result);
    }
  }

  // ---- snapshots -----------------------------------------------------------------------------

  record Snapshot(Database.SnapshotRow row, SnapshotInfo info) {}

  Snapshot snapshot(Organization org, String id, String name) {
    checkSnapshotName(name);
    Database.SandboxRow row = owned(org, id);
    String engineName = engineSnapshotPrefix(org.id()) + name;
    SnapshotInfo info = engine.snapshot(new WorkspaceRef(LocalSandbox.NAME, row.id()), engineName);
    Database.SnapshotRow saved =
        new Database.SnapshotRow(org.id(), name, engineName, row.id(), info.created().toString());
    db.upsertSnapshot(saved);
    return new Snapshot(saved, info);
  }

  List<Snapshot> snapshots(Organization org) {
    Map<String, SnapshotInfo> all =
        engine.snapshots().stream()
            .collect(Collectors.toMap(SnapshotInfo::name, Function.identity(), (a, b) -> a));
    List<Snapshot> out = new ArrayList<>();
    for (Database.SnapshotRow r : db.snapshots(org.id())) {
      SnapshotInfo info = all.get(r.engineName());
      if (info != null) {
        out.add(new Snapshot(r, info));
      }
    }
    return out;
  }

  void deleteSnapshot(Organization org, String name) {
    checkSnapshotName(name);
    Database.SnapshotRow row =
        db.snapshots(org.id()).stream()
            .filter(s -> s.name().equals(name))
            .findFirst()
            .orElseThrow(() -> noSnapshot(name, null));
    engine.removeSnapshot(row.engineName());
    db.deleteSnapshot(org.id(), name);
  }

  /** The published images that exist on this host, for {@code GET /v1/images}. */
  List<ImageInfo> images() {
    Set<String> published =
        db.publishedImages().stream().map(Database.PublishedRow::name).collect(Collectors.toSet());
    return engine.images().stream().filter(i -> published.contains(i.name())).toList();
  }

  /**
   * How an organization sees the image a sandbox or snapshot came from: its own snapshot as {@code
   * snapshot:NAME}, never under the name the engine stores it as, which no request accepts.
   */
  static String shownImage(long organization, String image) {
    String prefix = engineSnapshotPrefix(organization);
    return image != null && image.startsWith(prefix)
        ? "snapshot:" + image.substring(prefix.length())
        : image;
  }

  /** The engine's names of an organization's snapshots start with this. */
  static String engineSnapshotPrefix(long organization) {
    return "o" + organization + "-";
  }

  static void checkSnapshotName(String name) {
    if (name == null || !SNAPSHOT_NAME.matcher(name).matches()) {
      throw ApiException.invalid(
          "name",
          "snapshot name must be 1 to 48 of a-z, 0-9, '.', '_', '-', starting with a letter or"
              + " digit, was '"
              + printable(name)
              + "'");
    }
  }

  /** How many sandboxes the server's organizations own, by engine state (for metrics). */
  Map<String, Long> countByState() {
    Set<String> ownedIds =
        db.allSandboxes().stream().map(Database.SandboxRow::id).collect(Collectors.toSet());
    return engine.list().stream()
        .filter(i -> ownedIds.contains(i.ref().id()))
        .collect(Collectors.groupingBy(SandboxInfo::state, Collectors.counting()));
  }

  // ---- row fields ----------------------------------------------------------------------------

  static Map<String, String> labels(Database.SandboxRow row) {
    return parse(row.labels());
  }

  static Map<String, String> env(Database.SandboxRow row) {
    return parse(row.env());
  }

  private static Map<String, String> parse(String json) {
    try {
      return JSON.readValue(json, STRING_MAP);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("corrupt map in the server database: " + e.getMessage(), e);
    }
  }

  private static String json(Map<String, String> map) {
    try {
      return JSON.writeValueAsString(map);
    } catch (java.io.IOException e) {
      throw new IllegalStateException(e);
    }
  }

  static String printable(String s) {
    if (s == null) {
      return "null";
    }
    String cut = s.length() > 80 ? s.substring(0, 80) + "..." : s;
    return cut.replaceAll("\\p{Cntrl}", "?");
  }
}
