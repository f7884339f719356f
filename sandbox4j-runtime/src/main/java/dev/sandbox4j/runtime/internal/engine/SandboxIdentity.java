package dev.sandbox4j.runtime.internal.engine;

import com.fasterxml.jackson.annotation.JsonIgnore;
import dev.sandbox4j.runtime.internal.image.ImageConfig;
import dev.sandbox4j.workspace.WorkspaceException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Who a sandbox's commands and file operations run as, where its commands start, and the
 * environment they start from: resolved once, when the sandbox is created, and kept in its record
 * ({@link SandboxRecord#identity()}), so that every process that attaches to it later runs it the
 * same way.
 *
 * <p>Sandbox4j's own images (the default image, recipe builds, snapshots of sandboxes that ran as
 * {@link #SEED}) follow the seeds' conventions: {@link #SEED}, user {@code sandbox} (1000:1000) in
 * {@code /home/sandbox}. An image that came from elsewhere (pulled, or imported from an OCI or
 * {@code docker save} archive) runs as its config says ({@link #ofImage}): its {@code User} (root
 * if none), its {@code WorkingDir} ({@code /} if none), and an environment of {@code PATH}, {@code
 * HOME} (the user's home directory from {@code /etc/passwd}, else {@code /root} for root and {@code
 * /} for anyone else) and {@code LANG}, overridden by its {@code Env}. {@code Entrypoint} and
 * {@code Cmd} are not run: a sandbox runs its own init and the caller's commands.
 *
 * @param uid the user id inside the sandbox (0..65535)
 * @param gid the group id inside the sandbox (0..65535); no supplementary groups
 * @param workingDirectory the directory commands start in unless the caller names another
 * @param env the environment every command starts from, {@code NAME=value} entries in order (a
 *     later entry of the same name wins)
 */
public record SandboxIdentity(int uid, int gid, String workingDirectory, List<String> env) {
  /** The seeds' identity: Sandbox4j's own images. */
  public static final SandboxIdentity SEED =
      new SandboxIdentity(
          1000,
          1000,
          Engine.HOME,
          List.of(
              "PATH=" + Engine.BASE_ENV.get("PATH"),
              "HOME=" + Engine.HOME,
              "USER=sandbox",
              "LANG=" + Engine.BASE_ENV.get("LANG")));

  /** The highest id a sandbox maps (its user namespace maps 0..65535). */
  static final int MAX_ID = 65_535;

  public SandboxIdentity {
    checkId(uid, "uid");
    checkId(gid, "gid");
    Objects.requireNonNull(workingDirectory, "workingDirectory");
    env = List.copyOf(env);
  }

  /** {@code uid:gid}, as a runtime's {@code --user} takes it. */
  @JsonIgnore
  public String user() {
    return uid + ":" + gid;
  }

  /** Whether this is the seeds' identity ({@link #SEED}). */
  @JsonIgnore
  public boolean isSeed() {
    return equals(SEED);
  }

  /** {@link #env} as a map, a later entry of a name winning. */
  @JsonIgnore
  public Map<String, String> envMap() {
    Map<String, String> out = new LinkedHashMap<>();
    for (String entry : env) {
      int eq = entry.indexOf('=');
      out.put(entry.substring(0, eq), entry.substring(eq + 1));
    }
    return out;
  }

  /**
   * The identity of a sandbox of an image that came from elsewhere, whose config is {@code config}:
   * its {@code User} (root if none) as {@code users} resolves it, its {@code WorkingDir}, and its
   * {@code Env} over {@code PATH}, {@code HOME} and {@code LANG}.
   *
   * @throws WorkspaceException if the user or group is a name {@code users} does not know
   */
  static SandboxIdentity ofImage(ImageConfig config, ImageUsers users) {
    ImageUsers.Resolved user =
        users.resolve(config.user() == null ? "0" : config.user(), "its image config's User");
    List<String> env = new ArrayList<>();
    env.add("PATH=" + Engine.BASE_ENV.get("PATH"));
    env.add("HOME=" + user.home());
    env.add("LANG=" + Engine.BASE_ENV.get("LANG"));
    env.addAll(config.env());
    return new SandboxIdentity(
        user.uid(),
        user.gid(),
        config.workingDir() == null ? "/" : config.workingDir(),
        compact(env));
  }

  /**
   * This identity as {@code user} instead: its ids, {@code HOME} its home directory, and {@code
   * USER} (where this identity sets it) its name, or unset if it has none.
   */
  SandboxIdentity as(ImageUsers.Resolved user) {
    Map<String, String> vars = envMap();
    vars.put("HOME", user.home());
    if (vars.containsKey("USER")) {
      if (user.name() == null) {
        vars.remove("USER");
      } else {
        vars.put("USER", user.name());
      }
    }
    return new SandboxIdentity(
        user.uid(),
        user.gid(),
        workingDirectory,
        vars.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).toList());
  }

  /**
   * This identity as the config of an image saved from its sandbox (a snapshot): numeric {@code
   * User}, {@code WorkingDir} and the whole environment as {@code Env}; {@link #fromConfig} reads
   * it back.
   */
  public ImageConfig toConfig() {
    return new ImageConfig(user(), workingDirectory, env, List.of(), List.of());
  }

  /**
   * The identity a snapshot's config ({@link #toConfig}) keeps: its numeric user, its working
   * directory and its environment as they are.
   *
   * @throws IllegalArgumentException if its user is not numeric {@code uid:gid}
   */
  public static SandboxIdentity fromConfig(ImageConfig config) {
    int[] ids = ImageUsers.numericPair(config.user());
    if (ids == null) {
      throw new IllegalArgumentException(
          "a snapshot's user is uid:gid, not '" + config.user() + "'");
    }
    return new SandboxIdentity(
        ids[0], ids[1], config.workingDir() == null ? "/" : config.workingDir(), config.env());
  }

  /** {@code env} with each name once, where its last entry was, keeping the order of first use. */
  private static List<String> compact(List<String> env) {
    Map<String, String> vars = new LinkedHashMap<>();
    for (String entry : env) {
      int eq = entry.indexOf('=');
      vars.put(entry.substring(0, eq), entry.substring(eq + 1));
    }
    return vars.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).toList();
  }

  private static void checkId(int id, String what) {
    if (id < 0 || id > MAX_ID) {
      throw new IllegalArgumentException(what + " " + id + " is not from 0 to " + MAX_ID);
    }
  }
}
