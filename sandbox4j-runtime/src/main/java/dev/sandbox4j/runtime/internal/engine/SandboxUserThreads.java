package dev.sandbox4j.runtime.internal.engine;

import dev.sandbox4j.runtime.internal.linux.NativeFs;
import dev.sandbox4j.runtime.internal.linux.ThreadCredentials;
import dev.sandbox4j.runtime.internal.linux.Trees;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The small pool of platform threads, shared by every sandbox of the JVM, that run sandbox file
 * operations with the file system identity of a sandbox's user ({@link ThreadCredentials}), and the
 * probe that checks once that the kernel then really applies that user's rights.
 */
final class SandboxUserThreads {
  private static final int THREADS = 4;
  private static final System.Logger LOG = System.getLogger(SandboxFiles.class.getName());

  static final ThreadPoolExecutor EXECUTOR;
  static final int PROCESS_UMASK = processUmask();

  static {
    AtomicInteger n = new AtomicInteger();
    EXECUTOR =
        new ThreadPoolExecutor(
            THREADS,
            THREADS,
            30,
            TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(),
            r ->
                Thread.ofPlatform()
                    .name("sandbox4j-files-" + n.incrementAndGet())
                    .daemon()
                    .unstarted(r));
    EXECUTOR.allowCoreThreadTimeOut(true);
  }

  private SandboxUserThreads() {}

  @FunctionalInterface
  interface Body<T> {
    T run() throws NativeFs.Errno;
  }

  /**
   * Runs {@code body} with the sandbox user's file system identity, on this (pool) thread, and
   * restores the thread's own identity afterwards, whatever happens.
   */
  static <T> T asSandboxUser(int uid, int gid, Body<T> body) throws NativeFs.Errno {
    ThreadCredentials.Identity saved = ThreadCredentials.assume(uid, gid);
    try {
      return body.run();
    } finally {
      ThreadCredentials.restore(saved);
    }
  }

  /**
   * Checks that the kernel gives a pool thread exactly the sandbox user's rights: a root-only
   * directory is refused, and a file created in an open one belongs to the sandbox user.
   */
  static boolean probe() {
    Path dir = null;
    try {
      dir = Files.createTempDirectory("sandbox4j-files-probe-");
      Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
      Path closed = Files.createDirectory(dir.resolve("closed"));
      Files.setPosixFilePermissions(closed, PosixFilePermissions.fromString("rwx------"));
      Path open = Files.createDirectory(dir.resolve("open"));
      Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxrwxrwx"));
      Path rootFile = Files.writeString(open.resolve("root-owned"), "x");
      Future<String> verdict =
          EXECUTOR.submit(
              () ->
                  asSandboxUser(
                      SandboxFiles.UID,
                      SandboxFiles.GID,
                      () -> {
                        try {
                          NativeFs.close(
                              NativeFs.openat(
                                  NativeFs.AT_FDCWD,
                                  SandboxFiles.bytes(closed.toString()),
                                  NativeFs.O_RDONLY | NativeFs.O_DIRECTORY,
                                  0));
                          return "a root-only directory was readable";
                        } catch (NativeFs.Errno e) {
                          if (e.errno != NativeFs.EACCES) {
                            return "unexpected " + e.getMessage();
                          }
                        }
                        try {
                          int fd =
                              NativeFs.openat(
                                  NativeFs.AT_FDCWD, SandboxFiles.bytes(rootFile.toString()), 0, 0);
                          try {
                            NativeFs.fchmod(fd, 0600);
                            return "a root-owned file's mode could be changed";
                          } catch (NativeFs.Errno e) {
                            if (e.errno != NativeFs.EPERM) {
                              return "unexpected " + e.getMessage();
                            }
                          } finally {
                            NativeFs.close(fd);
                          }
                        } catch (NativeFs.Errno e) {
                          return "unexpected " + e.getMessage();
                        }
                        int fd =
                            NativeFs.openat(
                                NativeFs.AT_FDCWD,
                                SandboxFiles.bytes(open.resolve("probe").toString()),
                                NativeFs.O_WRONLY | NativeFs.O_CREAT | NativeFs.O_EXCL,
                                0600);
                        try {
                          NativeFs.Stat st = NativeFs.fstat(fd);
                          if (st.uid() != SandboxFiles.UID || st.gid() != SandboxFiles.GID) {
                            return "a new file belongs to " + st.uid() + ":" + st.gid();
                          }
                        } finally {
                          NativeFs.close(fd);
                        }
                        return null;
                      }));
      String problem = verdict.get(30, TimeUnit.SECONDS);
      if (problem != null) {
        LOG.log(
            System.Logger.Level.INFO,
            "Sandbox files go through commands: the identity of the sandbox user is not enforced ({0})",
            problem);
        return false;
      }
      return true;
    } catch (Exception | Error e) {
      LOG.log(
          System.Logger.Level.INFO,
          "Sandbox files go through commands: cannot take the identity of the sandbox user ({0})",
          e.toString());
      return false;
    } finally {
      if (dir != null) {
        try {
          Trees.delete(dir);
        } catch (IOException ignored) {
          // a leftover in the temp directory
        }
      }
    }
  }

  private static int processUmask() {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (line.startsWith("Umask:")) {
          return Integer.parseInt(line.substring(6).strip(), 8);
        }
      }
    } catch (IOException | RuntimeException e) {
      // assume the worst: fix every new directory's mode
    }
    return 0777;
  }
}
