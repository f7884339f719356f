package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.workspace.WorkspaceException;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * The users and groups of a sandbox's image, from its {@code /etc/passwd} and {@code /etc/group}
 * (read by the engine from the sandbox's root, confined to it: {@link RootfsPaths#readSmallFile}),
 * and how a user setting ({@code uid}, {@code name}, {@code uid:gid}, {@code name:group}, in any
 * mix) resolves against them, as {@code docker run --user} does: a number is taken as it is, a name
 * must be in the files; without a group, the user's primary group from {@code /etc/passwd}, else 0.
 *
 * @param image the image's name, for messages
 * @param passwd the lines of {@code /etc/passwd} (empty if it has none)
 * @param group the lines of {@code /etc/group} (empty if it has none)
 */
record ImageUsers(String image, List<String> passwd, List<String> group) {
  /** A user setting: a name or a number, optionally {@code :} a group name or number. */
  static final Pattern SETTING =
      Pattern.compile("[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,63})?");

  private static final Pattern NUMBER = Pattern.compile("[0-9]+");

  ImageUsers {
    passwd = List.copyOf(passwd);
    group = List.copyOf(group);
  }

  /** The users of an image whose files are {@code passwd} and {@code group} (null: missing). */
  static ImageUsers of(String image, String passwd, String group) {
    return new ImageUsers(image, lines(passwd), lines(group));
  }

  /**
   * A resolved user.
   *
   * @param name its name in {@code /etc/passwd}, or null if it has no entry there
   * @param home its home directory: from {@code /etc/passwd}, else {@code /root} for root and
   *     {@code /} for anyone else
   */
  record Resolved(int uid, int gid, String name, String home) {}

  /**
   * Resolves user setting {@code setting}, which {@code what} names in messages ("its image
   * config's User", "the builder's user").
   *
   * @throws WorkspaceException if it is malformed, out of range, or names a user or group the image
   *     does not have
   */
  Resolved resolve(String setting, String what) {
    if (!SETTING.matcher(setting).matches()) {
      throw new WorkspaceException(
          what + " '" + setting + "' is not NAME, UID, NAME:GROUP or UID:GID");
    }
    int colon = setting.indexOf(':');
    String userPart = colon < 0 ? setting : setting.substring(0, colon);
    String groupPart = colon < 0 ? null : setting.substring(colon + 1);
    String[] entry;
    int uid;
    if (NUMBER.matcher(userPart).matches()) {
      uid = id(userPart, what, setting);
      entry = entry(passwd, 2, userPart);
    } else {
      entry = entry(passwd, 0, userPart);
      if (entry == null) {
        throw new WorkspaceException(
            what
                + " '"
                + setting
                + "' names user '"
                + userPart
                + "', which image '"
                + image
                + "' does not have in /etc/passwd");
      }
      uid = id(entry[2], what, setting);
    }
    int gid;
    if (groupPart == null) {
      gid = entry == null ? 0 : id(entry[3], what, setting);
    } else if (NUMBER.matcher(groupPart).matches()) {
      gid = id(groupPart, what, setting);
    } else {
      String[] groupEntry = entry(group, 0, groupPart);
      if (groupEntry == null) {
        throw new WorkspaceException(
            what
                + " '"
                + setting
                + "' names group '"
                + groupPart
                + "', which image '"
                + image
                + "' does not have in /etc/group");
      }
      gid = id(groupEntry[2], what, setting);
    }
    String home =
        entry != null && entry.length > 5 && entry[5].startsWith("/")
            ? entry[5]
            : uid == 0 ? "/root" : "/";
    return new Resolved(uid, gid, entry == null ? null : entry[0], home);
  }

  /** {@code uid:gid} as two numbers, or null if it is not that. */
  static int[] numericPair(String user) {
    if (user == null) {
      return null;
    }
    String[] f = user.split(":", -1);
    if (f.length != 2 || !NUMBER.matcher(f[0]).matches() || !NUMBER.matcher(f[1]).matches()) {
      return null;
    }
    if (f[0].length() > 5 || f[1].length() > 5) {
      return null;
    }
    long uid = Long.parseLong(f[0]);
    long gid = Long.parseLong(f[1]);
    if (uid > SandboxIdentity.MAX_ID || gid > SandboxIdentity.MAX_ID) {
      return null;
    }
    return new int[] {(int) uid, (int) gid};
  }

  private static int id(String number, String what, String setting) {
    long id =
        NUMBER.matcher(number).matches()
            ? number.length() > 9 ? Long.MAX_VALUE : Long.parseLong(number)
            : -1;
    if (id < 0 || id > SandboxIdentity.MAX_ID) {
      throw new WorkspaceException(
          what
              + " '"
              + setting
              + "' is id "
              + number
              + ", outside the ids a sandbox maps (0 to "
              + SandboxIdentity.MAX_ID
              + ")");
    }
    return (int) id;
  }

  /** The first entry of {@code lines} whose field {@code field} is {@code value}, split. */
  private static String[] entry(List<String> lines, int field, String value) {
    for (String line : lines) {
      if (line.isEmpty() || line.startsWith("#")) {
        continue;
      }
      String[] fields = line.split(":", -1);
      if (fields.length >= 4 && fields[field].equals(value)) {
        return fields;
      }
    }
    return null;
  }

  private static List<String> lines(String text) {
    return text == null ? List.of() : new ArrayList<>(text.lines().toList());
  }
}
