package dev.sandbox4j.runtime.internal.image;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * What an OCI or Docker image's config says about how to run it ({@code config} of the image config
 * JSON): the parts a sandbox uses. Every field comes from an untrusted image and is checked here,
 * so that what passes can be handed to the engine as it is.
 *
 * @param user {@code User}: {@code name}, {@code uid}, {@code name:group} or {@code uid:gid} (null:
 *     none set, which means root for an OCI image)
 * @param workingDir {@code WorkingDir}, absolute and normalized (null: none set, {@code /})
 * @param env {@code Env}: {@code NAME=value} entries, in order
 * @param entrypoint {@code Entrypoint} (empty: none)
 * @param cmd {@code Cmd} (empty: none)
 */
public record ImageConfig(
    String user, String workingDir, List<String> env, List<String> entrypoint, List<String> cmd) {
  static final int MAX_ENTRIES = 1024;
  static final int MAX_STRING = 32 * 1024;
  private static final Pattern USER = Pattern.compile("[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}");
  private static final Pattern ENV_NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");

  /** No config at all: an image without one (a root filesystem tarball). */
  public static final ImageConfig NONE =
      new ImageConfig(null, null, List.of(), List.of(), List.of());

  public ImageConfig {
    env = env == null ? List.of() : List.copyOf(env);
    entrypoint = entrypoint == null ? List.of() : List.copyOf(entrypoint);
    cmd = cmd == null ? List.of() : List.copyOf(cmd);
  }

  /**
   * The config of an image config JSON document ({@code {"config": {...}, "rootfs": ...}}); a
   * document without {@code config} gives {@link #NONE}.
   *
   * @throws ImageBuildException naming the field that is invalid
   */
  public static ImageConfig fromImageConfigJson(JsonNode document) {
    JsonNode config = document.path("config");
    if (config.isMissingNode() || config.isNull()) {
      return NONE;
    }
    if (!config.isObject()) {
      throw new ImageBuildException("the image config's 'config' is not an object");
    }
    String user = text(config, "User");
    if (user != null && user.isEmpty()) {
      user = null;
    }
    if (user != null) {
      String[] parts = user.split(":", -1);
      if (parts.length > 2
          || !USER.matcher(parts[0]).matches()
          || (parts.length == 2 && !USER.matcher(parts[1]).matches())) {
        throw new ImageBuildException(
            "the image config's User '"
                + printable(user)
                + "' is not NAME, UID, NAME:GROUP or UID:GID");
      }
    }
    String workingDir = text(config, "WorkingDir");
    if (workingDir != null && workingDir.isEmpty()) {
      workingDir = null;
    }
    if (workingDir != null) {
      workingDir = normalized(workingDir);
    }
    List<String> env = strings(config, "Env");
    for (String entry : env) {
      int eq = entry.indexOf('=');
      if (eq <= 0 || !ENV_NAME.matcher(entry.substring(0, eq)).matches()) {
        throw new ImageBuildException(
            "the image config's Env entry '" + printable(entry) + "' is not NAME=value");
      }
    }
    return new ImageConfig(
        user, workingDir, env, strings(config, "Entrypoint"), strings(config, "Cmd"));
  }

  /** The value of {@code Env} variable {@code name}, or null. */
  public String envValue(String name) {
    for (String entry : env) {
      if (entry.startsWith(name + "=")) {
        return entry.substring(name.length() + 1);
      }
    }
    return null;
  }

  private static String text(JsonNode config, String field) {
    JsonNode value = config.path(field);
    if (value.isMissingNode() || value.isNull()) {
      return null;
    }
    if (!value.isTextual()) {
      throw new ImageBuildException("the image config's " + field + " is not a string");
    }
    String s = value.asText();
    check(field, s);
    return s;
  }

  private static List<String> strings(JsonNode config, String field) {
    JsonNode value = config.path(field);
    if (value.isMissingNode() || value.isNull()) {
      return List.of();
    }
    if (!value.isArray()) {
      throw new ImageBuildException("the image config's " + field + " is not a list of strings");
    }
    if (value.size() > MAX_ENTRIES) {
      throw new ImageBuildException(
          "the image config's "
              + field
              + " has "
              + value.size()
              + " entries (at most "
              + MAX_ENTRIES
              + ")");
    }
    List<String> out = new ArrayList<>();
    for (JsonNode item : value) {
      if (!item.isTextual()) {
        throw new ImageBuildException("the image config's " + field + " is not a list of strings");
      }
      check(field, item.asText());
      out.add(item.asText());
    }
    return out;
  }

  private static void check(String field, String s) {
    if (s.length() > MAX_STRING) {
      throw new ImageBuildException(
          "the image config's "
              + field
              + " holds a string of "
              + s.length()
              + " characters (at most "
              + MAX_STRING
              + ")");
    }
    if (s.indexOf('\0') >= 0) {
      throw new ImageBuildException("the image config's " + field + " holds a NUL character");
    }
  }

  /**
   * {@code WorkingDir} without empty and {@code .} parts ({@code docker build} keeps a trailing
   * slash, {@code WORKDIR /app/}); a relative path or one with {@code ..} is refused.
   */
  private static String normalized(String workingDir) {
    if (!workingDir.startsWith("/")) {
      throw new ImageBuildException(
          "the image config's WorkingDir '" + printable(workingDir) + "' is not an absolute path");
    }
    StringBuilder out = new StringBuilder();
    for (String part : workingDir.split("/")) {
      if (part.equals("..")) {
        throw new ImageBuildException(
            "the image config's WorkingDir '" + printable(workingDir) + "' contains '..'");
      }
      if (!part.isEmpty() && !part.equals(".")) {
        out.append('/').append(part);
      }
    }
    return out.isEmpty() ? "/" : out.toString();
  }

  private static String printable(String s) {
    String cut = s.length() > 80 ? s.substring(0, 80) + "…" : s;
    return cut.replaceAll("\\p{Cntrl}", "?");
  }
}
