package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Optional;

/**
 * Looks paths up in a sandbox's root filesystem from the host the way the sandbox would see them:
 * symlinks resolve against the sandbox's root ({@code /} and {@code ..} never leave it), so an
 * image's {@code /bin -> usr/bin} or an absolute link is followed inside it, never into the host.
 */
final class RootfsPaths {
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;
  private static final int MAX_SYMLINKS = 40;

  private RootfsPaths() {}

  /**
   * The host path of absolute {@code path} inside {@code root}, all symlinks resolved inside it;
   * empty if a component is missing, not a directory, or the links loop.
   */
  static Optional<Path> resolve(Path root, String path) throws IOException {
    Deque<String> todo = new ArrayDeque<>(components(path));
    Deque<String> done = new ArrayDeque<>();
    int links = 0;
    while (!todo.isEmpty()) {
      String name = todo.removeFirst();
      if (name.isEmpty() || name.equals(".")) {
        continue;
      }
      if (name.equals("..")) {
        done.pollLast();
        continue;
      }
      Path here = join(root, done).resolve(name);
      if (Files.isSymbolicLink(here)) {
        if (++links > MAX_SYMLINKS) {
          return Optional.empty();
        }
        String target = Files.readSymbolicLink(here).toString();
        if (target.startsWith("/")) {
          done.clear();
        }
        List<String> parts = components(target);
        for (int i = parts.size() - 1; i >= 0; i--) {
          todo.addFirst(parts.get(i));
        }
        continue;
      }
      if (!Files.exists(here, NOFOLLOW)) {
        return Optional.empty();
      }
      if (!todo.isEmpty() && !Files.isDirectory(here, NOFOLLOW)) {
        return Optional.empty();
      }
      done.addLast(name);
    }
    return Optional.of(join(root, done));
  }

  /**
   * Fails unless {@code root} has an executable {@code /bin/sh}: every command of a sandbox is
   * started by it.
   */
  static void requireShell(Path root, String image) throws IOException {
    Optional<Path> sh = resolve(root, "/bin/sh");
    if (sh.isEmpty()
        || !Files.isRegularFile(sh.get(), NOFOLLOW)
        || ((Integer) Files.getAttribute(sh.get(), "unix:mode", NOFOLLOW) & 0111) == 0) {
      throw new WorkspaceException(
          "image '"
              + image
              + "' has no executable /bin/sh: a sandbox runs every command with /bin/sh, so an"
              + " imported image must provide it (and setsid, and for the file API GNU coreutils"
              + " and findutils)");
    }
  }

  private static List<String> components(String path) {
    return List.of(path.split("/"));
  }

  private static Path join(Path root, Deque<String> names) {
    Path p = root;
    for (String n : names) {
      p = p.resolve(n);
    }
    return p;
  }
}
