package dev.sandbox4j.server;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.ImageInfo;
import dev.sandbox4j.runtime.ImageTooLargeException;
import dev.sandbox4j.runtime.InsufficientDiskException;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.SandboxTelemetry;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import dev.sandbox4j.workspace.machine.SupportsFork;
import dev.sandbox4j.workspace.machine.SupportsHibernate;
import dev.sandbox4j.workspace.machine.SupportsListing;
import dev.sandbox4j.workspace.machine.SupportsSnapshots;
import dev.sandbox4j.workspace.machine.SupportsStop;
import dev.sandbox4j.workspace.machine.SupportsSuspend;
import dev.sandbox4j.workspace.machine.SupportsTimers;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * The engine's sandboxes as organizations see them: creation under quota and rate limit, ownership
 * in the database, and a {@link Workspace} per owned sandbox with the env and working directory it
 * was created with (the engine keeps neither: they apply on attach).
 *
 * <p>The engine is any {@link ServerEngine}: what its provider cannot do (no {@link SupportsFork},
 * say) is a 501 {@code not_supported} naming the capability and the provider ({@link #capability}).
 * What only the local engine has (its images, default disk quotas) is asked of it by type.
 *
 * <p>Every lookup by id goes through {@link #owned}: a sandbox of another organization, or one that
 * never existed, is the same {@code not_found}. Thread-safe: the database serializes its
 * statements; a create or fork is admitted by {@link Admission} (rate limit and quota), and its
 * request checked by {@link CreateSpecs}.
 */
final class Sandboxes {

  /**
   * A sandbox id as a client may send it: the local engine's and docker's ids, and the cloud
   * providers' (boxd's {@code vm-...}, Modal's {@code sb-...}); each provider checks its own form
   * again (as long as the longest of theirs). Never a path separator, nor a leading dot or dash.
   */
  static final Pattern ID = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_.-]{0,127}");

  static final Pattern SNAPSHOT_NAME = Pattern.compile("[a-z0-9][a-z0-9._-]{0,47}");
  static final Pattern IMAGE_NAME = Pattern.compile("[a-z0-9][a-z0-9._-]{0,62}");

  /** The image a create without {@code image} or {@code snapshot} starts from. */
  static final String DEFAULT_IMAGE = "default";

  static final Set<String> STATES =
      Set.of("running", "suspended", "stopped", "hibernated", "creating", "destroying");
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final TypeReference<Map<String, String>> STRING_MAP = new TypeReference<>() {};

  private final ServerEngine engine;
  private final WorkspaceProvider provider;
  private final SupportsListing listing;
  private final Database db;
  private final ServerLimits limits;
  private final Map<String, Workspace> workspaces = new ConcurrentHashMap<>();
  private final Admission admission;
  private final io.opentelemetry.api.OpenTelemetry openTelemetry; // null: the global one
  private final SandboxTelemetry telemetry;

  /**
   * @throws IllegalArgumentException if the engine's provider cannot list its sandboxes
   */
  Sandboxes(
      ServerEngine engine,
      Database db,
      ServerLimits limits,
      io.opentelemetry.api.OpenTelemetry openTelemetry) {
    this.openTelemetry = openTelemetry;
    this.telemetry =
        openTelemetry == null ? SandboxTelemetry.global() : SandboxTelemetry.of(openTelemetry);
    this.engine =
        openTelemetry != null && engine instanceof LocalEngine local
            ? local.tracedWith(openTelemetry)
            : engine;
    this.provider = Objects.requireNonNull(engine.provider(), "engine.provider()");
    if (!(provider instanceof SupportsListing l)) {
      throw new IllegalArgumentException(
          "a server needs a provider that lists its sandboxes (SupportsListing); '"
              + provider.name()
              + "' does not");
    }
    this.listing = l;
    this.db = db;
    this.limits = limits;
    this.admission = new Admission(listing, db, limits, this::forget);
  }

  /** The provider whose sandboxes these are. */
  WorkspaceProvider provider() {
    return provider;
  }

  /**
   * The provider as {@code type}, the capability a route needs; else a 501 {@code not_supported}
   * naming what the route does ({@code what}, e.g. "hibernate sandboxes") and the provider.
   */
  <T> T capability(Class<T> type, String what) {
    if (type.isInstance(provider)) {
      return type.cast(provider);
    }
    throw ApiException.notSupported(
        null,
        "this server's provider '"
            + provider.name()
            + "' cannot "
            + what
            + " (it has no "
            + type.getSimpleName()
            + ")");
  }

  /** Where the server's spans and metrics go: the builder's OpenTelemetry, or the global one. */
  SandboxTelemetry telemetry() {
    return telemetry;
  }

  private Workspace traced(Workspace ws) {
    return openTelemetry == null ? ws : ws.withOpenTelemetry(openTelemetry);
  }

  /** {@link ServerEngine#shaped}, with what it refuses answered as 400 or 501 naming the field. */
  private WorkspaceProvider shaped(ServerEngine.Shape shape) {
    try {
      return engine.shaped(shape);
    } catch (IllegalArgumentException e) {
      throw ApiException.invalid(fieldOf(e.getMessage()), e.getMessage());
    } catch (UnsupportedOperationException e) {
      throw ApiException.notSupported(
          fieldOf(e.getMessage()),
          "this server's provider '" + provider.name() + "' cannot do it: " + e.getMessage());
    }
  }

  private static final Pattern FIELD_PREFIX =
      Pattern.compile("([A-Za-z]{1,40}): .*", Pattern.DOTALL);

  /** The request field a message of {@link ServerEngine#shaped} starts with, or null. */
  static String fieldOf(String message) {
    java.util.regex.Matcher m = FIELD_PREFIX.matcher(message == null ? "" : message);
    return m.matches() ? m.group(1) : null;
  }

  private WorkspaceRef ref(String id) {
    return new WorkspaceRef(provider.name(), id);
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
      Long diskInodes,
      String isolation) {}

  /** A sandbox as the API shows it. */
  record View(Database.SandboxRow row, SandboxInfo info) {}

  View create(Organization org, CreateSpec spec) {
    CreateSpecs.checkLabels(spec.labels());
    ServerEngine.Shape requested = CreateSpecs.requested(spec, limits.isolation());
    if (requested.hasTimers() && !(provider instanceof SupportsTimers)) {
      String field =
          spec.autoSuspendTimeoutMs() != null
              ? "autoSuspendTimeoutMs"
              : spec.sandboxTimeoutMs() != null
                  ? "sandboxTimeoutMs"
                  : spec.idleTimeoutMs() != null ? "idleTimeoutMs" : "deleteAfter";
      throw ApiException.notSupported(
          field,
          "this server's provider '"
              + provider.name()
              + "' cannot give sandboxes timers (it has no SupportsTimers): leave "
              + field
              + " out");
    }
    shaped(requested); // each field as the provider takes it, before anything is looked up
    Source source;
    ServerEngine.Shape shape;
    if (spec.snapshot() != null) {
      capability(SupportsSnapshots.class, "start sandboxes from snapshots");
      source = ownedSnapshot(org, spec.snapshot());
      SnapshotInfo saved = source.snapshot();
      if (local()) { // a local snapshot carries its size; elsewhere (docker) none: sized as a
        // create
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
      }
      shape = CreateSpecs.admit(limits.ceilings(), requested, saved.name(), local());
    } else {
      source = usableImage(spec.image() != null ? spec.image() : DEFAULT_IMAGE);
      shape = CreateSpecs.admit(limits.ceilings(), requested, null, local());
    }
    WorkspaceProvider creator = shaped(shape);
    admission.takeCreateToken(org); // after validation: a bad request does not spend a create
    try (Admission.Reservation _ = admission.reserve(org)) {
      if (source.snapshot() == null && LocalSandbox.isImageReference(source.name())) {
        ensurePulled(source.name());
      }
      Workspace ws = traced(Workspace.of(creator.newBackend()));
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
        provider.destroy(ref);
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
          ? s
              .capability(SupportsSnapshots.class, "start sandboxes from snapshots")
              .snapshots()
              .stream()
              .anyMatch(i -> i.name().equals(snapshot.name()))
          : LocalSandbox.isImageReference(name) || s.imageExists(name);
    }
  }

  /**
   * Whether the engine is the local one, which alone (of the providers a server runs on) copies a
   * snapshot's or a fork's parent's size, disk included, into the new sandbox, and gives a sandbox
   * that asks for no disk its default quota (10 GiB, 1,000,000 inodes), which the ceilings then
   * hold. Docker sizes a copy as a create and gives no default disk quota.
   */
  private boolean local() {
    return provider instanceof LocalSandbox;
  }

  /**
   * {@code name} as an image an organization may start from: published by the operator and on this
   * host ({@code default} is built on first use). Anything else, such as an image the operator did
   * not publish or another organization's snapshot under its engine name, is the same 404 as a name
   * that exists nowhere.
   */
  private Source usableImage(String name) {
    if (name != null
        && LocalSandbox.isImageReference(name)
        && !limits.registries().entries().isEmpty()) {
      return allowedReference(name);
    }
    if (name == null
        || !IMAGE_NAME.matcher(name).matches()
        || !db.isPublished(name)
        || !imageExists(name)) {
      throw noImage(name);
    }
    return new Source("image", name, null);
  }

  /**
   * A registry reference, as the operator allows ({@link RegistryAllowlist}): a well-formed one
   * from a registry not allowed is a 400 naming {@code image} and what the server pulls from; a
   * malformed one is the same 404 as any name that is no image here (such as {@code ../images/x}:
   * nothing tells it from a name of another organization's); the local engine pulls an allowed one
   * when the sandbox is created. A server that allows no registry never comes here: every name that
   * is not published is a 404, as before references.
   */
  private Source allowedReference(String reference) {
    if (!local()) {
      throw ApiException.notSupported(
          "image",
          "this server's provider '"
              + provider.name()
              + "' starts sandboxes from no registry image");
    }
    String canonical;
    try {
      canonical = LocalSandbox.canonicalImageReference(reference);
    } catch (IllegalArgumentException e) {
      throw noImage(reference);
    }
    RegistryAllowlist allowed = limits.registries();
    if (!allowed.allows(canonical)) {
      throw ApiException.invalid(
          "image",
          "image '"
              + printable(reference)
              + "' ("
              + canonical
              + ") is from a registry this server does not pull from; it pulls from: "
              + allowed);
    }
    return new Source("image", reference, null);
  }

  /**
   * Pulls allowed reference {@code reference} unless the engine has it: a registry that refuses or
   * has no such image is a 404 naming {@code image} with the registry's reason, not a 500; an image
   * larger than the engine pulls ({@code serve --max-image-size}) is a 400 naming {@code image}; a
   * pull that would take the disk below its reserve is the 503 {@code insufficient_disk}.
   */
  private void ensurePulled(String reference) {
    LocalSandbox local = (LocalSandbox) provider;
    String canonical = LocalSandbox.canonicalImageReference(reference);
    if (local.images().stream().anyMatch(i -> canonical.equals(i.reference()))) {
      return;
    }
    try {
      local.pullImage(canonical);
    } catch (ImageTooLargeException e) {
      throw ApiException.invalid(
          "image", "image '" + printable(reference) + "': " + e.getMessage());
    } catch (InsufficientDiskException e) {
      throw e; // the server's 503 insufficient_disk, as for a create
    } catch (WorkspaceException e) {
      throw new ApiException(
          ErrorCode.NOT_FOUND,
          "image '" + printable(reference) + "' cannot be pulled: " + e.getMessage(),
          "image",
          null,
          null);
    }
  }

  private boolean imageExists(String name) {
    return name.equals(DEFAULT_IMAGE)
        || engineImages().stream().anyMatch(i -> i.name().equals(name));
  }

  /**
   * The images the engine has besides its default: the local engine's image store; none elsewhere
   * (a docker server starts sandboxes from its provider's default image only).
   */
  private List<ImageInfo> engineImages() {
    return provider instanceof LocalSandbox local ? local.images() : List.of();
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
    return capability(SupportsSnapshots.class, "keep snapshots").snapshots().stream()
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
    return listing.info(ref(id));
  }

  /** A page of the organization's sandboxes after {@code cursor}, filtered. */
  record Page(List<View> items, String lastId, boolean more) {}

  Page list(Organization org, Map<String, String> labels, String state, int limit, String after) {
    Map<String, SandboxInfo> live =
        listing.list().stream().collect(Collectors.toMap(i -> i.ref().id(), Function.identity()));
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
    provider.destroy(ref(row.id()));
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
        k ->
            traced(
                Workspace.of(
                    shaped(ServerEngine.Shape.attach(env(row), row.workingDirectory()))
                        .backend(ref(row.id()))
                        .orElseThrow())));
  }

  View lifecycle(Organization org, String id, String operation) {
    Database.SandboxRow row = owned(org, id);
    WorkspaceRef ref = ref(row.id());
    switch (operation) {
      case "suspend" -> capability(SupportsSuspend.class, "suspend sandboxes").suspend(ref);
      case "resume" -> capability(SupportsSuspend.class, "resume sandboxes").resume(ref);
      case "stop" -> capability(SupportsStop.class, "stop sandboxes").stop(ref);
      case "start" -> capability(SupportsStop.class, "start sandboxes").start(ref);
      case "hibernate" -> capability(SupportsHibernate.class, "hibernate sandboxes").hibernate(ref);
      default -> throw new IllegalArgumentException(operation);
    }
    return view(row);
  }

  record Fork(View sandbox, ForkResult result) {}

  Fork fork(Organization org, String id, boolean filesOnly) {
    Database.SandboxRow row = owned(org, id);
    capability(SupportsFork.class, "fork sandboxes");
    if (limits.isolation().forced()) {
      limits
          .isolation()
          .checkFork(row.id(), info(row.id()).map(SandboxInfo::isolation).orElse(null));
    }
    // the copy gets its parent's env, working directory and labels where the provider keeps them
    // in the sandbox (docker: in the container); the local engine applies them on attach
    ServerEngine.Shape copy =
        new ServerEngine.Shape(
            null,
            null,
            null,
            null,
            null,
            null,
            null,
            env(row),
            row.workingDirectory(),
            labels(row),
            null,
            null,
            null,
            null,
            null); // the copy keeps its parent's isolation
    if (!local()) {
      // only the local engine copies a parent's size into its fork; another provider (docker)
      // gives the copy its default size, capped here at the ceilings as a create's is
      copy = CreateSpecs.admit(limits.ceilings(), copy, null, local());
    }
    WorkspaceProvider forker = shaped(copy);
    if (!(forker instanceof SupportsFork forks)) {
      throw new IllegalStateException(
          "the engine's shaped provider of '" + provider.name() + "' cannot fork");
    }
    SandboxInfo parent = local() ? info(row.id()).orElse(null) : null;
    if (parent != null) { // a copy keeps its parent's size, admitted when the ceilings were higher
      limits
          .ceilings()
          .admitCopy(
              null, "sandbox " + row.id(), parent.cpus(), parent.memoryBytes(), parent.pids());
      limits
          .ceilings()
          .admitCopiedDisk(null, "sandbox " + row.id(), parent.diskBytes(), parent.diskInodes());
    }
    admission.takeCreateToken(org);
    try (Admission.Reservation _ = admission.reserve(org)) {
      WorkspaceRef ref = ref(row.id());
      ForkResult result = filesOnly ? forks.forkFiles(ref) : forks.fork(ref);
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
    SupportsSnapshots snapshots = capability(SupportsSnapshots.class, "take snapshots");
    String engineName = engineSnapshotPrefix(org.id()) + name;
    SnapshotInfo info = snapshots.snapshot(ref(row.id()), engineName);
    Database.SnapshotRow saved =
        new Database.SnapshotRow(org.id(), name, engineName, row.id(), info.created().toString());
    db.upsertSnapshot(saved);
    return new Snapshot(saved, info);
  }

  List<Snapshot> snapshots(Organization org) {
    Map<String, SnapshotInfo> all =
        capability(SupportsSnapshots.class, "keep snapshots").snapshots().stream()
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
    SupportsSnapshots snapshots = capability(SupportsSnapshots.class, "keep snapshots");
    Database.SnapshotRow row =
        db.snapshots(org.id()).stream()
            .filter(s -> s.name().equals(name))
            .findFirst()
            .orElseThrow(() -> noSnapshot(name, null));
    snapshots.removeSnapshot(row.engineName());
    db.deleteSnapshot(org.id(), name);
  }

  /** The published images that exist on this host, for {@code GET /v1/images}. */
  List<ImageInfo> images() {
    Set<String> published =
        db.publishedImages().stream().map(Database.PublishedRow::name).collect(Collectors.toSet());
    return engineImages().stream().filter(i -> published.contains(i.name())).toList();
  }

  /**
   * How an organization sees the image a sandbox or snapshot came from: its own snapshot as {@code
   * snapshot:NAME}, never under the name the engine stores it as, which no request accepts: the
   * local engine's {@code o<org>-NAME}, or an image reference tagged so (docker's {@code
   * sandbox4j/snapshot:o<org>-NAME}).
   */
  static String shownImage(long organization, String image) {
    if (image == null) {
      return null;
    }
    String prefix = engineSnapshotPrefix(organization);
    String tag = image.substring(image.lastIndexOf(':') + 1);
    return tag.startsWith(prefix) ? "snapshot:" + tag.substring(prefix.length()) : image;
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
    return listing.list().stream()
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
