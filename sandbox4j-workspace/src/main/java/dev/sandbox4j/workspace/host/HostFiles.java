package dev.sandbox4j.workspace.host;

import dev.sandbox4j.workspace.DirectoryEntry;
import dev.sandbox4j.workspace.FileStat;
import dev.sandbox4j.workspace.FileType;
import dev.sandbox4j.workspace.WorkspaceAccessDeniedException;
import dev.sandbox4j.workspace.WorkspaceDirectoryNotEmptyException;
import dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException;
import dev.sandbox4j.workspace.WorkspaceFileException;
import dev.sandbox4j.workspace.WorkspaceIsDirectoryException;
import dev.sandbox4j.workspace.WorkspaceNoSuchFileException;
import dev.sandbox4j.workspace.WorkspaceNotDirectoryException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.AccessDeniedException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;

/**
 * File operations on host paths with java.nio, translated to the workspace's typed errors.
 *
 * <p>java.nio names only some errno values with their own exception types; for the rest the cause
 * is found by looking at the path (a file where a directory should be is ENOTDIR), and only then
 * from the reason text.
 */
final class HostFiles {
  private static final int MAX_SYMLINK_HOPS = 40;
  private static final SecureRandom RANDOM = new SecureRandom();

  private HostFiles() {}

  static InputStream openRead(String path) {
    Path p = Path.of(path);
    BasicFileAttributes attrs = attributes(p, path);
    if (attrs.isDirectory()) {
      throw new WorkspaceIsDirectoryException(path);
    }
    if (!attrs.isRegularFile()) {
      throw new WorkspaceFileException(
          path, "not a regular file (a FIFO, socket or device): refusing to read it");
    }
    try {
      return Files.newInputStream(p);
    } catch (IOException e) {
      throw translate(e, path);
    }
  }

  static void write(String path, InputStream content) {
    Path target = followLinks(Path.of(path), path);
    Path parent = target.getParent();
    createDirectories(parent, path);
    if (Files.isDirectory(target)) {
      throw new WorkspaceIsDirectoryException(path);
    }
    boolean existed = Files.exists(target, LinkOption.NOFOLLOW_LINKS);
    if (existed && !Files.isWritable(target)) {
      // checked here because the rename below would otherwise replace a file the user may not
      // write (access(2) also reports an immutable file)
      throw new WorkspaceAccessDeniedException(path);
    }
    Path temp = parent.resolve(".sandbox4j-write." + HexFormat.of().formatHex(randomBytes()));
    try {
      // CREATE_NEW opens with mode 0666 less the umask: the default a new file should get
      try (OutputStream out =
          Files.newOutputStream(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
        content.transferTo(out);
      }
      if (existed) {
        Set<PosixFilePermission> mode = Files.getPosixFilePermissions(target);
        Files.setPosixFilePermissions(temp, mode);
      }
      Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException e) {
      deleteQuietly(temp);
      throw translate(e, path);
    } catch (RuntimeException e) {
      deleteQuietly(temp);
      throw e;
    }
  }

  static FileStat stat(String path) {
    Path p = Path.of(path);
    try {
      PosixFileAttributes a = Files.readAttributes(p, PosixFileAttributes.class);
      return new FileStat(path, typeOf(a), a.size(), mode(p, a), a.lastModifiedTime().toInstant());
    } catch (IOException e) {
      throw translate(e, path);
    }
  }

  /** The permission bits, with setuid/setgid/sticky where the "unix" view has them. */
  private static int mode(Path p, PosixFileAttributes a) throws IOException {
    try {
      if (Files.getAttribute(p, "unix:mode") instanceof Integer full) {
        return full & 07777;
      }
    } catch (UnsupportedOperationException | IllegalArgumentException noUnixView) {
      // fall back to the nine rwx bits
    }
    int mode = 0;
    for (PosixFilePermission perm : a.permissions()) {
      mode |= 1 << (8 - perm.ordinal()); // OWNER_READ (ordinal 0) is 0400
    }
    return mode;
  }

  static List<DirectoryEntry> list(String path) {
    Path dir = Path.of(path);
    BasicFileAttributes attrs = attributes(dir, path);
    if (!attrs.isDirectory()) {
      throw new WorkspaceNotDirectoryException(path);
    }
    List<DirectoryEntry> entries = new ArrayList<>();
    try (DirectoryStream<Path> stream = Files.newDirectoryStream(dir)) {
      for (Path child : stream) {
        BasicFileAttributes a;
        try {
          a = Files.readAttributes(child, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException vanished) {
          continue;
        }
        entries.add(new DirectoryEntry(child.getFileName().toString(), typeOf(a), a.size()));
      }
    } catch (IOException e) {
      throw translate(e, path);
    }
    entries.sort(Comparator.comparing(DirectoryEntry::name));
    return entries;
  }

  static void createDirectories(String path) {
    createDirectories(Path.of(path), path);
  }

  private static void createDirectories(Path dir, String shownPath) {
    try {
      Files.createDirectories(dir);
    } catch (FileAlreadyExistsException e) {
      // java.nio reports a file in the way, wherever it is; a parent in the way is ENOTDIR
      if (Path.of(e.getFile()).equals(dir) && dir.toString().equals(shownPath)) {
        throw new WorkspaceFileAlreadyExistsException(shownPath, "exists and is not a directory");
      }
      throw new WorkspaceNotDirectoryException(
          shownPath, "not a directory: " + e.getFile() + " is in the way");
    } catch (IOException e) {
      throw translate(e, shownPath);
    }
  }

  static void remove(String path, boolean recursive, Path workingDirectory) {
    Path p = Path.of(path);
    refuseWorkingDirectory(p, path, workingDirectory, "remove");
    BasicFileAttributes attrs = attributesNoFollow(p, path);
    try {
      if (attrs.isDirectory() && recursive) {
        deleteTree(p);
      } else {
        Files.delete(p);
      }
    } catch (IOException e) {
      throw translate(e, path);
    }
  }

  static void rename(String from, String to, Path workingDirectory) {
    Path source = Path.of(from);
    Path target = Path.of(to);
    refuseWorkingDirectory(source, from, workingDirectory, "rename");
    BasicFileAttributes sourceAttrs = attributesNoFollow(source, from);
    try {
      Files.move(source, target, StandardCopyOption.ATOMIC_MOVE);
    } catch (AtomicMoveNotSupportedException e) {
      throw new WorkspaceFileException(from, "cannot rename across file systems to " + to, e);
    } catch (IOException e) {
      // rename(2) failed: tell why from what is at the target
      BasicFileAttributes targetAttrs = attributesOrNull(target);
      if (targetAttrs != null && targetAttrs.isDirectory() && !sourceAttrs.isDirectory()) {
        throw new WorkspaceIsDirectoryException(to);
      }
      if (targetAttrs != null && !targetAttrs.isDirectory() && sourceAttrs.isDirectory()) {
        throw new WorkspaceNotDirectoryException(to);
      }
      throw translate(e, to);
    }
  }

  /** realpath -m: symlinks of existing components resolved, the missing rest kept. */
  static String realpath(String path) {
    Path p = Path.of(path);
    try {
      return p.toRealPath().toString();
    } catch (IOException e) {
      Path parent = p.getParent();
      if (parent == null) {
        return "/";
      }
      String base = realpath(parent.toString());
      String name = p.getFileName().toString();
      if (name.equals("..")) {
        Path up = Path.of(base).getParent();
        return up == null ? "/" : up.toString();
      }
      return base.equals("/") ? "/" + name : base + "/" + name;
    }
  }

  private static void refuseWorkingDirectory(
      Path p, String shown, Path workingDirectory, String operation) {
    if (Files.isSymbolicLink(p)) {
      return; // only the link itself is affected
    }
    Path parent = p.getParent();
    if (parent == null) {
      throw new WorkspaceAccessDeniedException(shown, "refusing to " + operation + " /");
    }
    Path physical = Path.of(realpath(parent.toString())).resolve(p.getFileName()).normalize();
    if (workingDirectory.startsWith(physical)) {
      throw new WorkspaceAccessDeniedException(
          shown,
          "refusing to "
              + operation
              + " the working directory "
              + workingDirectory
              + " or one of its ancestors");
    }
  }

  private static void deleteTree(Path root) throws IOException {
    // walkFileTree does not follow symlinks by default: a link is deleted, never its target
    Files.walkFileTree(
        root,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult visitFile(Path file, BasicFileAttributes attrs)
              throws IOException {
            Files.delete(file);
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult postVisitDirectory(Path dir, IOException e) throws IOException {
            if (e != null) {
              throw e;
            }
            Files.delete(dir);
            return FileVisitResult.CONTINUE;
          }
        });
  }

  private static Path followLinks(Path p, String shown) {
    Path current = p;
    for (int hops = 0; Files.isSymbolicLink(current); hops++) {
      if (hops == MAX_SYMLINK_HOPS) {
        throw new WorkspaceFileException(shown, "too many levels of symbolic links");
      }
      try {
        Path target = Files.readSymbolicLink(current);
        current = current.resolveSibling(target).normalize();
      } catch (IOException e) {
        throw translate(e, shown);
      }
    }
    return current;
  }

  private static BasicFileAttributes attributes(Path p, String shown) {
    try {
      return Files.readAttributes(p, BasicFileAttributes.class);
    } catch (IOException e) {
      throw translate(e, shown);
    }
  }

  private static BasicFileAttributes attributesNoFollow(Path p, String shown) {
    try {
      return Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
    } catch (IOException e) {
      throw translate(e, shown);
    }
  }

  private static BasicFileAttributes attributesOrNull(Path p) {
    try {
      return Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
    } catch (IOException e) {
      return null;
    }
  }

  private static FileType typeOf(BasicFileAttributes a) {
    if (a.isSymbolicLink()) {
      return FileType.SYMLINK;
    }
    if (a.isDirectory()) {
      return FileType.DIRECTORY;
    }
    return a.isRegularFile() ? FileType.FILE : FileType.OTHER;
  }

  /** Maps a java.nio failure on {@code shown} to the workspace's typed errors. */
  static WorkspaceFileException translate(IOException e, String shown) {
    return switch (e) {
      case NoSuchFileException x ->
          blockingAncestor(shown) != null
              ? new WorkspaceNotDirectoryException(
                  shown, "not a directory: " + blockingAncestor(shown) + " is a file")
              : new WorkspaceNoSuchFileException(shown);
      case AccessDeniedException x -> new WorkspaceAccessDeniedException(shown);
      case FileAlreadyExistsException x -> new WorkspaceFileAlreadyExistsException(shown);
      case DirectoryNotEmptyException x -> new WorkspaceDirectoryNotEmptyException(shown);
      case NotDirectoryException x -> new WorkspaceNotDirectoryException(shown);
      case FileSystemException x -> fromReason(x, shown);
      default -> new WorkspaceFileException(shown, String.valueOf(e.getMessage()), e);
    };
  }

  private static WorkspaceFileException fromReason(FileSystemException e, String shown) {
    if (blockingAncestor(shown) != null) {
      return new WorkspaceNotDirectoryException(
          shown, "not a directory: " + blockingAncestor(shown) + " is a file");
    }
    String reason = String.valueOf(e.getReason());
    return switch (reason) {
      case "Not a directory" -> new WorkspaceNotDirectoryException(shown);
      case "Is a directory" -> new WorkspaceIsDirectoryException(shown);
      case "Directory not empty" -> new WorkspaceDirectoryNotEmptyException(shown);
      case "Operation not permitted", "Permission denied", "Read-only file system" ->
          new WorkspaceAccessDeniedException(shown, reason.toLowerCase(java.util.Locale.ROOT));
      case "File exists" -> new WorkspaceFileAlreadyExistsException(shown);
      default -> new WorkspaceFileException(shown, reason, e);
    };
  }

  /** The first existing ancestor of {@code path} that is not a directory, or null. */
  private static Path blockingAncestor(String path) {
    Path p = Path.of(path).getParent();
    List<Path> ancestors = new ArrayList<>();
    for (; p != null; p = p.getParent()) {
      ancestors.addFirst(p);
    }
    for (Path a : ancestors) {
      if (Files.exists(a) && !Files.isDirectory(a)) {
        return a;
      }
    }
    return null;
  }

  private static byte[] randomBytes() {
    byte[] b = new byte[8];
    RANDOM.nextBytes(b);
    return b;
  }

  private static void deleteQuietly(Path p) {
    try {
      Files.deleteIfExists(p);
    } catch (IOException ignored) {
      // the temporary file is left behind; nothing worse
    }
  }
}
