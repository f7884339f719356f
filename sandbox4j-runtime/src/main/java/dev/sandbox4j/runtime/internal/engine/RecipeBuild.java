package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageArchive;
import dev.sandbox4j.runtime.internal.image.ImageBuildException;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.image.RootfsOwnership;
import dev.sandbox4j.runtime.internal.linux.Beneath;
import dev.sandbox4j.runtime.internal.linux.NativeFs;
import dev.sandbox4j.runtime.internal.linux.OverlayMarks;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.oci.OciConfig;
import dev.sandbox4j.runtime.internal.util.FileLock;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * Builds an {@link ImageRecipe}: resolves or imports the base, then for each step either finds its
 * layer in the store (cached) or runs it in a sandbox of the layers so far and turns the sandbox's
 * writable layer into the step's layer; finally publishes the image. Holds the image name's build
 * lock throughout; every layer it uses is pinned against deletion (see {@link ImageStore}).
 */
public final class RecipeBuild {
  /**
   * What to build: a base (an image of the store, or an image archive) and the steps on top, as the
   * API's {@code ImageRecipe} collected them, checked.
   */
  public record Recipe(String baseImage, Path baseArchive, List<Step> steps) {
    public Recipe {
      steps = List.copyOf(steps);
    }
  }

  /** One step of a recipe. */
  public sealed interface Step permits Run, Copy {}

  /** {@code /bin/sh -c script} as root. */
  public record Run(String script) implements Step {
    @Override
    public String toString() {
      return "RUN " + script;
    }
  }

  /** Copies host {@code source} to {@code destination}, owned by {@code uid:gid} inside. */
  public record Copy(Path source, String destination, int uid, int gid) implements Step {
    @Override
    public String toString() {
      return "COPY "
          + source
          + " "
          + destination
          + (uid == 0 && gid == 0 ? "" : " (" + uid + ":" + gid + ")");
    }
  }

  /** The label that marks a step's sandbox, valued with the image being built. */
  static final String BUILD_LABEL = "sandbox4j.image-build";

  private static final Duration STEP_TIMEOUT = Duration.ofHours(1);
  private static final int TAIL_LINES = 20;
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;

  /** Writes stdin (a tar of one member named payload) at exactly path $1. */
  private static final String COPY_FILE =
      "set -e; dest=$1; parent=${dest%/*}; [ -n \"$parent\" ] || parent=/;"
          + " if [ -d \"$dest\" ]; then echo \"sandbox4j: $dest is a directory\" >&2; exit 1; fi;"
          + " mkdir -p -- \"$parent\"; tmp=\"$parent/.sandbox4j-copy.$$\"; rm -rf -- \"$tmp\";"
          + " mkdir -- \"$tmp\"; tar -x -f - -C \"$tmp\"; mv -f -- \"$tmp/payload\" \"$dest\";"
          + " rmdir -- \"$tmp\"";

  /** Merges stdin (a tar of a directory's contents) into directory $1. */
  private static final String COPY_DIRECTORY = "set -e; mkdir -p -- \"$1\"; tar -x -f - -C \"$1\"";

  private final Engine engine;
  private final ImageStore store;
  private final OciConfig.Limits limits;
  private final Consumer<String> progress;

  public RecipeBuild(Engine engine, OciConfig.Limits limits, Consumer<String> progress) {
    this.engine = engine;
    this.store = engine.images();
    this.limits = limits;
    this.progress = progress;
  }

  public Image build(Recipe recipe, String name) {
    // The base first, outside the name's lock: building the default image takes its own lock.
    Image base = null;
    if (recipe.baseImage() != null) {
      String b = recipe.baseImage();
      base =
          b.equals(ImageStore.DEFAULT)
              ? store.ensureDefault(progress)
              : store
                  .find(b)
                  .orElseThrow(
                      () ->
                          new WorkspaceException(
                              "the recipe's base image '"
                                  + b
                                  + "' does not exist here: see `sandbox4j image ls`"));
    }
    Image resolvedBase = base;
    return store.withNameLock(
        name,
        build -> {
          try {
            return buildIn(build, recipe, resolvedBase, name);
          } catch (IOException e) {
            throw new ImageBuildException("building image " + name + " failed: " + e, e);
          }
        });
  }

  private Image buildIn(ImageStore.Build build, Recipe recipe, Image base, String name)
      throws IOException {
    List<String> layers = new ArrayList<>();
    long size;
    String from;
    ImageStore.Origin baseOrigin;
    if (base != null) {
      store.pin(build, base);
      layers.addAll(base.layerIds());
      size = base.sizeBytes();
      from = "image " + base.name();
      baseOrigin = base.origin();
    } else {
      ImageArchive.Imported imported =
          ImageArchive.importLayers(store, build, recipe.baseArchive(), progress);
      layers.addAll(imported.layerIds());
      size = imported.sizeBytes();
      from = imported.description();
      baseOrigin = imported.origin();
    }
    String key = sha256Hex("sandbox4j recipe v1\nbase\n" + String.join("\n", layers));
    List<Step> steps = recipe.steps();
    int ran = 0;
    for (int i = 0; i < steps.size(); i++) {
      Step step = steps.get(i);
      key = stepKey(key, step);
      String label = "step " + (i + 1) + "/" + steps.size() + " " + oneLine(step.toString());
      if (store.pinIfPresent(build, key)) {
        progress.accept(label + ": cached");
        size += RootfsOwnership.sizeOf(store.layerPath(key));
      } else {
        progress.accept(label + ": running");
        Path layer = runStep(build, name, layers, step, label);
        size += RootfsOwnership.sizeOf(layer);
        store.addLayer(build, layer, key);
        ran++;
      }
      layers.add(key);
    }
    String description = "recipe from " + from;
    if (!steps.isEmpty()) {
      description +=
          "; " + String.join("; ", steps.stream().map(s -> oneLine(s.toString())).toList());
    }
    if (description.length() > 300) {
      description = description.substring(0, 297) + "...";
    }
    // As a Dockerfile's FROM: the image runs as its base's config says (a base from elsewhere),
    // or as the seeds do (one of Sandbox4j's own). The origin is the base's config only: this
    // image is no registry's.
    Image image =
        baseOrigin == null
            ? store.publish(build, name, layers, size, description, List.of())
            : store.publish(
                build,
                name,
                layers,
                size,
                description,
                new ImageStore.Origin(null, null, baseOrigin.config()));
    progress.accept(
        "image "
            + name
            + " built: "
            + layers.size()
            + " layer(s), "
            + (steps.size() - ran)
            + " step(s) cached, "
            + ran
            + " run");
    return image;
  }

  /** The cache key of {@code step} on top of {@code parent}. */
  static String stepKey(String parent, Step step) throws IOException {
    return switch (step) {
      case Run run -> sha256Hex(parent + "\nrun\n" + run.script());
      case Copy copy ->
          sha256Hex(
              parent
                  + "\ncopy\n"
                  + copy.destination()
                  + "\n"
                  + copy.uid()
                  + ":"
                  + copy.gid()
                  + "\n"
                  + treeHash(copy.source()));
    };
  }

  /**
   * The sha256 of what a copy of {@code source} writes: for each file, in order of relative path,
   * its path, type and mode, and its content (a regular file) or target (a symlink).
   */
  static String treeHash(Path source) throws IOException {
    if (!Files.exists(source, NOFOLLOW)) {
      throw new ImageBuildException("cannot copy " + source + ": it does not exist");
    }
    MessageDigest digest = ImageStore.sha256();
    List<Path> entries;
    try (Stream<Path> walk = Files.walk(source)) {
      entries =
          walk.sorted(
                  (a, b) ->
                      source.relativize(a).toString().compareTo(source.relativize(b).toString()))
              .toList();
    }
    for (Path p : entries) {
      String rel = p.equals(source) ? "." : source.relativize(p).toString();
      int mode = (Integer) Files.getAttribute(p, "unix:mode", NOFOLLOW);
      String type;
      String content;
      if (Files.isSymbolicLink(p)) {
        type = "l";
        content = Files.readSymbolicLink(p).toString();
      } else if (Files.isDirectory(p, NOFOLLOW)) {
        type = "d";
        content = "";
      } else if (Files.isRegularFile(p, NOFOLLOW)) {
        type = "f";
        content = ImageArchive.sha256File(p);
      } else {
        throw new ImageBuildException("cannot copy " + p + ": not a file, directory or symlink");
      }
      digest.update(
          (type + " " + Integer.toOctalString(mode & 07777) + " " + rel + "\0" + content + "\n")
              .getBytes(StandardCharsets.UTF_8));
    }
    return HexFormat.of().formatHex(digest.digest());
  }

  // ---- running a step ---------------------------------------------------------------------

  /**
   * Runs {@code step} in a new sandbox of {@code layers}; returns its writable layer, moved into
   * the build's staging area. The sandbox is destroyed whatever happens.
   */
  private Path runStep(
      ImageStore.Build build, String name, List<String> layers, Step step, String label)
      throws IOException {
    String id =
        engine.create(
            new Engine.Spec(
                name, Engine.HOME, limits, Map.of(BUILD_LABEL, name), List.copyOf(layers)),
            progress);
    Path dir = engine.home().resolve("sandboxes").resolve(id);
    try {
      Deque<String> tail = new ArrayDeque<>();
      CommandResult result;
      try {
        result =
            switch (step) {
              case Run run -> exec(id, List.of("/bin/sh", "-c", run.script()), null, tail);
              case Copy copy -> copy(id, copy, tail);
            };
      } catch (ImageBuildException e) {
        throw e;
      } catch (WorkspaceException e) {
        throw new ImageBuildException(label + " failed: " + e.getMessage(), e);
      }
      if (!result.succeeded()) {
        String output;
        synchronized (tail) {
          output = String.join("\n", tail);
        }
        throw new ImageBuildException(
            label
                + " failed with exit code "
                + result.exitCode()
                + (output.isEmpty() ? " and no output" : "; its last output:\n" + output));
      }
      // Stop it, then take its writable layer (its overlay work dir stays behind and goes with it).
      Path layer = build.dir().resolve("step-" + id);
      int block = engine.record(id).hostBase();
      try (FileLock lock = FileLock.acquire(dir.resolve("lock"))) {
        engine.runtime().delete(id);
        Overlay.unmount(dir.resolve("rootfs"));
        move(dir.resolve("upper"), layer);
      }
      // The step ran in its own block of host ids; a layer of the store has the canonical ones.
      RootfsOwnership.shiftBlock(layer, block, Image.UID_SHIFT);
      dropSandboxOwnFiles(layer);
      return layer;
    } finally {
      engine.destroy(id);
    }
  }

  private CommandResult exec(String id, List<String> argv, InputStream stdin, Deque<String> tail) {
    Map<String, String> env = new LinkedHashMap<>(Engine.BASE_ENV);
    env.put("HOME", "/root");
    env.put("USER", "root");
    LineSplitter out = new LineSplitter(tail);
    LineSplitter err = new LineSplitter(tail);
    RunOptions.Builder options =
        RunOptions.builder()
            .timeout(STEP_TIMEOUT)
            .outputLimit(Long.MAX_VALUE)
            .retainOutput(false)
            .onStdout(out::accept)
            .onStderr(err::accept);
    if (stdin != null) {
      options.stdin(stdin);
    }
    CommandResult r =
        Exec.run(engine, id, "0:0", "/", env, argv, options.build(), System.nanoTime());
    out.flush();
    err.flush();
    return r;
  }

  /** Streams a tar of the host source into the sandbox, where a shell script unpacks it. */
  private CommandResult copy(String id, Copy copy, Deque<String> tail) throws IOException {
    Path source = copy.source();
    boolean directory = Files.isDirectory(source, NOFOLLOW);
    List<String> tar =
        new ArrayList<>(
            List.of(
                "tar",
                "-c",
                "-f",
                "-",
                "--numeric-owner",
                "--owner=" + copy.uid(),
                "--group=" + copy.gid(),
                "--no-xattrs",
                "--no-acls",
                "--no-selinux"));
    if (directory) {
      tar.addAll(List.of("-C", source.toString(), "."));
    } else {
      Path parent = source.getParent() == null ? Path.of("/") : source.getParent();
      // Whatever the file is called, its one member is "payload" (symlink targets untouched).
      tar.addAll(
          List.of(
              "-C",
              parent.toString(),
              "--transform=s,.*,payload,S",
              "--",
              source.getFileName().toString()));
    }
    ByteArrayOutputStream tarErrors = new ByteArrayOutputStream();
    Process p =
        new ProcessBuilder(tar)
            .redirectError(ProcessBuilder.Redirect.PIPE)
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
            .start();
    Thread.ofVirtual()
        .start(
            () -> {
              try (InputStream e = p.getErrorStream()) {
                e.transferTo(tarErrors);
              } catch (IOException ignored) {
                // the exit code tells
              }
            });
    try {
      CommandResult r =
          exec(
              id,
              List.of(
                  "/bin/sh",
                  "-c",
                  directory ? COPY_DIRECTORY : COPY_FILE,
                  "sh",
                  copy.destination()),
              p.getInputStream(),
              tail);
      if (p.waitFor() != 0) {
        throw new ImageBuildException(
            "cannot read "
                + source
                + " to copy it: tar exit "
                + p.exitValue()
                + ": "
                + tarErrors.toString(StandardCharsets.UTF_8).strip());
      }
      return r;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ImageBuildException("interrupted while copying " + source, e);
    } finally {
      p.destroyForcibly();
    }
  }

  /**
   * Removes what the engine wrote into every sandbox's writable layer ({@code /etc/hostname},
   * {@code /etc/hosts}: the sandbox's own name), and {@code /etc} with them if nothing else is left
   * in it. Through a {@link Beneath} handle: if the sandbox made {@code /etc} a symlink, nothing is
   * removed (a symlink at one of the names is removed itself).
   */
  static void dropSandboxOwnFiles(Path layer) throws IOException {
    try (Beneath files = Beneath.open(layer)) {
      Optional<NativeFs.Stat> etc = files.lstat("etc");
      if (etc.isEmpty() || !etc.get().isDirectory()) {
        return;
      }
      files.remove("etc/hostname");
      files.remove("etc/hosts");
      if (files.isEmptyDirectory("etc") && !OverlayMarks.isOpaque(layer.resolve("etc"))) {
        files.remove("etc");
      }
    }
  }

  /** Renames {@code from} to {@code to}; copies if they are on different file systems. */
  private static void move(Path from, Path to) throws IOException {
    try {
      Files.move(from, to, StandardCopyOption.ATOMIC_MOVE);
    } catch (AtomicMoveNotSupportedException e) {
      Trees.copy(from, to);
      Trees.delete(from);
    }
  }

  private static String oneLine(String s) {
    String line = s.replace('\n', ' ');
    return line.length() > 100 ? line.substring(0, 97) + "..." : line;
  }

  private static String sha256Hex(String s) {
    return ImageStore.sha256Hex(s.getBytes(StandardCharsets.UTF_8));
  }

  /** Turns output chunks into progress lines, keeping the last ones for an error message. */
  private final class LineSplitter {
    private final Deque<String> tail;
    private final ByteArrayOutputStream partial = new ByteArrayOutputStream();

    LineSplitter(Deque<String> tail) {
      this.tail = tail;
    }

    synchronized void accept(byte[] chunk) {
      for (byte b : chunk) {
        if (b == '\n') {
          emit();
        } else if (partial.size() < 4096) {
          partial.write(b);
        }
      }
    }

    synchronized void flush() {
      if (partial.size() > 0) {
        emit();
      }
    }

    private void emit() {
      String line = partial.toString(StandardCharsets.UTF_8);
      partial.reset();
      progress.accept("  | " + line);
      synchronized (tail) {
        tail.addLast(line);
        if (tail.size() > TAIL_LINES) {
          tail.removeFirst();
        }
      }
    }
  }
}
