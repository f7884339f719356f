package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.util.PrivateFiles;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * Keeps the state directory ({@code $SANDBOX4J_HOME}) private to root: no other host user may list,
 * read or reach anything in it (sandboxes' files, checkpoint memory images, records, logs,
 * secrets).
 *
 * <p>Modes, each given when the entry is created (never widened after, so there is no window):
 *
 * <ul>
 *   <li>the home and {@code sandboxes/}: {@code 0711}. A sandbox's processes must be able to
 *       <i>traverse</i> them: the runtime sets the container's root up inside its user namespace,
 *       as the sandbox's root (a host id of its range, not host root), and walks the path of {@code
 *       sandboxes/<id>/rootfs} component by component. Search without read lets it walk a name it
 *       knows and list nothing.
 *   <li>{@code sandboxes/<id>/}: {@code 0710}, group = the sandbox's root group on the host: its
 *       own root may pass, nobody else but host root (a host user who knows the id is refused).
 *   <li>everything else the engine makes: directories {@code 0700}, files {@code 0600}.
 * </ul>
 *
 * <p>What lies inside a sandbox's tree ({@code upper/}, the mounted {@code rootfs/}) and in image
 * layers keeps the modes the sandbox gave it: those are its own files, behind the directories
 * above. Homes made before this rule are tightened on first use ({@link #ensure}).
 */
public final class StateDirectory {
  private StateDirectory() {}

  /**
   * Mode of the home and {@code sandboxes/}: searchable by the sandboxes' ids, listable by none.
   */
  static final Set<PosixFilePermission> TRAVERSE_ONLY =
      PosixFilePermissions.fromString("rwx--x--x");

  /** Mode of {@code sandboxes/<id>/}: its group is the sandbox's root group on the host. */
  static final Set<PosixFilePermission> SANDBOX_DIR = PosixFilePermissions.fromString("rwx--x---");

  /** The entries of a sandbox's directory that are its own files, not the engine's. */
  private static final Set<String> SANDBOX_OWNED =
      Set.of("upper", "work", "rootfs", "hosts", SandboxDisk.MOUNT);

  /**
   * Makes {@code home} if missing ({@code 0711}, parents as usual) and its {@code sandboxes/}; if
   * the home exists with a wider mode (made before this rule), tightens what is in it. Cheap once
   * done: one stat.
   */
  public static void ensure(Path home) throws IOException {
    if (!Files.isDirectory(home, LinkOption.NOFOLLOW_LINKS)) {
      Files.createDirectories(home.toAbsolutePath().getParent());
      try {
        Files.createDirectory(home, PosixFilePermissions.asFileAttribute(TRAVERSE_ONLY));
      } catch (FileAlreadyExistsException raced) {
        // made meanwhile by another JVM: checked below
      }
    }
    if (Files.getPosixFilePermissions(home, LinkOption.NOFOLLOW_LINKS).equals(TRAVERSE_ONLY)) {
      return;
    }
    tighten(home);
    // the home's own mode last: it marks the tightening done
    Files.setPosixFilePermissions(home, TRAVERSE_ONLY);
  }

  /**
   * Fails with a clear error unless every directory above {@code home} lets others search it: the
   * runtime walks that path as the sandbox's root (see the class comment).
   */
  static void requireReachable(Path home) throws IOException {
    for (Path dir = home.toAbsolutePath().getParent(); dir != null; dir = dir.getParent()) {
      Set<PosixFilePermission> mode = Files.getPosixFilePermissions(dir);
      if (!mode.contains(PosixFilePermission.OTHERS_EXECUTE)) {
        throw new IOException(
            "a sandbox's root cannot reach the state directory "
                + home
                + ": "
                + dir
                + " is mode "
                + PosixFilePermissions.toString(mode)
                + " (it needs search permission for others: chmod o+x, or choose another"
                + " SANDBOX4J_HOME)");
      }
    }
  }

  /**
   * Gives sandbox directory {@code dir} (made {@code 0700}) its traversal mode: group {@code gid}
   * (the sandbox's root group on the host) may search it, nobody else.
   */
  static void openToSandbox(Path dir, int gid) throws IOException {
    Files.setAttribute(dir, "unix:gid", gid, LinkOption.NOFOLLOW_LINKS);
    Files.setPosixFilePermissions(dir, SANDBOX_DIR);
  }

  /**
   * Lets the sandbox's root group {@code gid} read checkpoint images {@code dir} (directories 0750,
   * files 0640, group {@code gid}; nobody else): CRIU's restored tasks open some images (tty-info)
   * from inside the sandbox's user namespace, as its root, whose host ids own no root file. The
   * images are CRIU's, written by root into the engine's own directory; links are never followed.
   */
  static void shareWithSandbox(Path dir, int gid) throws IOException {
    Files.walkFileTree(
        dir,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult preVisitDirectory(Path d, BasicFileAttributes attrs)
              throws IOException {
            Files.setAttribute(d, "unix:gid", gid, LinkOption.NOFOLLOW_LINKS);
            Files.setPosixFilePermissions(d, SHARED_DIR);
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFile(Path f, BasicFileAttributes attrs) throws IOException {
            if (attrs.isRegularFile()) {
              Files.setAttribute(f, "unix:gid", gid, LinkOption.NOFOLLOW_LINKS);
              Files.setPosixFilePermissions(f, SHARED_FILE);
            }
            return FileVisitResult.CONTINUE;
          }
        });
  }

  private static final Set<PosixFilePermission> SHARED_DIR =
      PosixFilePermissions.fromString("rwxr-x---");
  private static final Set<PosixFilePermission> SHARED_FILE =
      PosixFilePermissions.fromString("rw-r-----");

  /** Tightens an existing home: see the class comment for what keeps which mode. */
  private static void tighten(Path home) throws IOException {
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(home)) {
      for (Path entry : entries) {
        String name = entry.getFileName().toString();
        if (name.equals("sandboxes") && Files.isDirectory(entry, LinkOption.NOFOLLOW_LINKS)) {
          Files.setPosixFilePermissions(entry, TRAVERSE_ONLY);
          try (DirectoryStream<Path> sandboxes = Files.newDirectoryStream(entry)) {
            for (Path sandbox : sandboxes) {
              tightenSandbox(sandbox);
            }
          }
        } else if (name.equals("images") && Files.isDirectory(entry, LinkOption.NOFOLLOW_LINKS)) {
          // layers and builds are the images' own files: the directories above them close them
          Files.setPosixFilePermissions(entry, PrivateFiles.PRIVATE_DIR);
          try (DirectoryStream<Path> images = Files.newDirectoryStream(entry)) {
            for (Path image : images) {
              if (Files.isDirectory(image, LinkOption.NOFOLLOW_LINKS)) {
                Files.setPosixFilePermissions(image, PrivateFiles.PRIVATE_DIR);
              }
            }
          }
        } else {
          tightenTree(entry);
        }
      }
    }
  }

  private static void tightenSandbox(Path sandbox) throws IOException {
    if (!Files.isDirectory(sandbox, LinkOption.NOFOLLOW_LINKS)) {
      tightenTree(sandbox);
      return;
    }
    try (DirectoryStream<Path> entries = Files.newDirectoryStream(sandbox)) {
      for (Path entry : entries) {
        if (!SANDBOX_OWNED.contains(entry.getFileName().toString())) {
          tightenTree(entry);
        }
      }
    }
    Overlay.seal(sandbox.resolve("rootfs"));
    int group = Image.UID_SHIFT;
    Path state = sandbox.resolve("state.json");
    if (Files.exists(state) && !SandboxRecord.isTorn(state)) {
      try {
        group = SandboxRecord.read(state).hostBase(); // its own block
      } catch (IOException unreadable) {
        // a newer version's record: the canonical group, as before blocks
      }
    }
    openToSandbox(sandbox, group);
  }

  /** Directories 0700, files 0600, recursively; symlinks are left alone and not followed. */
  private static void tightenTree(Path root) throws IOException {
    if (Files.isSymbolicLink(root)) {
      return;
    }
    if (Files.isDirectory(root, LinkOption.NOFOLLOW_LINKS)) {
      Files.setPosixFilePermissions(root, PrivateFiles.PRIVATE_DIR);
      try (DirectoryStream<Path> entries = Files.newDirectoryStream(root)) {
        for (Path entry : entries) {
          tightenTree(entry);
        }
      }
    } else if (Files.isRegularFile(root, LinkOption.NOFOLLOW_LINKS)) {
      Files.setPosixFilePermissions(root, PrivateFiles.PRIVATE_FILE);
    }
  }
}
