package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.RecipeBuild;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * How to make an image: a base, then {@code run} and {@code copy} steps, like a Dockerfile, each
 * step cached by content hash. Immutable: every method returns a new recipe.
 *
 * <pre>{@code
 * LocalSandbox sandboxes = new LocalSandbox();
 * ImageInfo image =
 *     ImageRecipe.from("default")
 *         .run("mkdir -p /opt/tools && echo 'hello' > /opt/tools/greeting")
 *         .copy(Path.of("settings.json"), "/home/sandbox/.config/app/settings.json", 1000, 1000)
 *         .build(sandboxes, "tools");
 * LocalSandbox onTools = LocalSandbox.builder().image("tools").build();
 * }</pre>
 *
 * <p><b>Base.</b> {@link #from(String)} starts from an image on this machine ({@code default} is
 * built first if it is not yet); {@link #fromArchive(Path)} from an archive: a root filesystem
 * tarball (plain, gzip, xz or zstd), a {@code docker save} archive or an OCI image layout archive.
 * The image config of a {@code docker save} or OCI archive applies to the built image's sandboxes,
 * as to those of any image from elsewhere: its {@code User}, {@code WorkingDir} and {@code Env};
 * its {@code Entrypoint} and {@code Cmd} are not run (see {@link LocalSandbox.Builder#image}). A
 * recipe from an image keeps that image's config the same way, as a Dockerfile's {@code FROM} does.
 * A root filesystem tarball has no config: its sandboxes run as Sandbox4j's own images' do, as uid
 * 1000 in {@code /home/sandbox} (which the tarball must then provide, unless sandboxes set another
 * working directory). Sandboxes bring their own init; shell commands and {@link #run} steps need
 * {@code /bin/sh}, and where the workspace's file API falls back to commands (without native
 * access), GNU coreutils and findutils.
 *
 * <p><b>Steps.</b> Each step becomes one read-only layer on top of the ones before. {@link
 * #run(String)} runs a {@code /bin/sh -c} script as root (uid 0 inside the sandbox's user
 * namespace, like a Dockerfile {@code RUN}) in {@code /}, in a sandbox of the layers so far, with
 * the environment {@code PATH}, {@code HOME=/root}, {@code USER=root}, {@code LANG=C.UTF-8}, under
 * the CPU, memory and process limits of the {@link LocalSandbox} building it, with loopback
 * networking only, and at most an hour; what it changed in the file system becomes the layer
 * (except {@code /etc/hostname} and {@code /etc/hosts}, which belong to each sandbox). {@link
 * #copy(Path, String)} copies a host file or directory into the image, in such a sandbox too.
 *
 * <p><b>Cache.</b> A step's layer id is the sha256 of the previous step's id (or of the base's
 * layer ids), the step's kind and text, and for a copy the content of what is copied (paths, types,
 * modes, bytes, link targets) and its owner. A step whose layer exists is not run again: a recipe
 * built twice starts no sandbox the second time. The progress of the {@link LocalSandbox} says
 * {@code cached} or {@code running} for each step and streams a running step's output.
 *
 * <p><b>Failure.</b> A step that fails (non-zero exit, timeout) fails the build with an {@link
 * dev.sandbox4j.workspace.WorkspaceException} giving its exit code and last lines of output; the
 * image's name is left as it was. Layers of the steps that succeeded stay cached until {@code gc}.
 */
public final class ImageRecipe {
  private static final int MAX_ID = Image.ID_RANGE - 1;

  /** A step of a recipe. */
  private final RecipeBuild.Recipe recipe;

  private ImageRecipe(String baseImage, Path baseArchive, List<RecipeBuild.Step> steps) {
    this.recipe = new RecipeBuild.Recipe(baseImage, baseArchive, steps);
  }

  /**
   * A recipe starting from image {@code image} of the {@link LocalSandbox} that builds it ({@code
   * default}: the engine's Debian image).
   */
  public static ImageRecipe from(String image) {
    Objects.requireNonNull(image, "image");
    return new ImageRecipe(image, null, List.of());
  }

  /**
   * A recipe starting from the image in {@code archive}: a root filesystem tarball, a {@code docker
   * save} archive or an OCI image layout archive (see the class comment). With no steps, {@link
   * #build} just imports it.
   */
  public static ImageRecipe fromArchive(Path archive) {
    Objects.requireNonNull(archive, "archive");
    return new ImageRecipe(null, archive.toAbsolutePath().normalize(), List.of());
  }

  /** Adds a step that runs {@code script} with {@code /bin/sh -c} as root in {@code /}. */
  public ImageRecipe run(String script) {
    if (script == null || script.isBlank() || script.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("run needs a non-blank script without NUL");
    }
    return with(new RecipeBuild.Run(script));
  }

  /** Adds a step that copies {@code source} to {@code destination}, owned by root: see below. */
  public ImageRecipe copy(Path source, String destination) {
    return copy(source, destination, 0, 0);
  }

  /**
   * Adds a step that copies host file or directory {@code source} (read when the recipe is built)
   * into the image, owned by {@code uid:gid} inside, with its modes. A file is written at exactly
   * {@code destination}, replacing a file there; a directory's contents are merged into directory
   * {@code destination}. Missing parent directories are created, owned by root. Symlinks are copied
   * as symlinks.
   *
   * @param destination an absolute, normalized path other than {@code /}
   * @param uid the owner inside the sandbox, 0 to 65535
   * @param gid the group inside the sandbox, 0 to 65535
   */
  public ImageRecipe copy(Path source, String destination, int uid, int gid) {
    Objects.requireNonNull(source, "source");
    if (destination == null
        || !destination.startsWith("/")
        || destination.equals("/")
        || destination.endsWith("/")
        || destination.contains("//")
        || destination.indexOf('\0') >= 0
        || List.of(destination.split("/")).contains("..")
        || List.of(destination.split("/")).contains(".")) {
      throw new IllegalArgumentException(
          "copy destination must be an absolute, normalized path other than /: " + destination);
    }
    if (uid < 0 || uid > MAX_ID || gid < 0 || gid > MAX_ID) {
      throw new IllegalArgumentException(
          "copy owner must be within 0.." + MAX_ID + ", was " + uid + ":" + gid);
    }
    return with(new RecipeBuild.Copy(source.toAbsolutePath().normalize(), destination, uid, gid));
  }

  /**
   * Builds the image and names it {@code name}, replacing an image of that name (sandboxes running
   * on the old one keep running). Builds of one name wait for each other. Needs what {@link
   * LocalSandbox} needs (root, an OCI runtime).
   *
   * @return the image
   * @throws dev.sandbox4j.workspace.WorkspaceException if a step or the import fails (its message
   *     says which, with the exit code and last lines of output), or the base image is missing
   */
  public ImageInfo build(LocalSandbox sandboxes, String name) {
    Objects.requireNonNull(sandboxes, "sandboxes");
    ImageStore.checkName(name);
    Engine engine = sandboxes.engine();
    return ImageInfo.of(
        new RecipeBuild(engine, sandboxes.spec().limits(), sandboxes.progress())
            .build(recipe, name));
  }

  private ImageRecipe with(RecipeBuild.Step step) {
    List<RecipeBuild.Step> more = new ArrayList<>(recipe.steps());
    more.add(step);
    return new ImageRecipe(recipe.baseImage(), recipe.baseArchive(), more);
  }

  /** The recipe, Dockerfile-like, one instruction per line. */
  @Override
  public String toString() {
    StringBuilder s =
        new StringBuilder(
            recipe.baseImage() != null
                ? "FROM " + recipe.baseImage()
                : "FROM archive " + recipe.baseArchive());
    for (RecipeBuild.Step step : recipe.steps()) {
      s.append('\n').append(step);
    }
    return s.toString();
  }
}
