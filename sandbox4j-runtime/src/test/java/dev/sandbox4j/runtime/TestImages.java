package dev.sandbox4j.runtime;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.engine.Engine;
import dev.sandbox4j.runtime.internal.engine.SpareDisks;
import dev.sandbox4j.runtime.internal.engine.StateDirectory;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.runtime.internal.oci.OciConfig;
import dev.sandbox4j.runtime.internal.supervisor.Supervisor;
import dev.sandbox4j.workspace.machine.SandboxInfo;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;

/** Small images for tests: a busybox root filesystem, archives made of it, a seeded default. */
public final class TestImages {
  static final Path BUSYBOX = Path.of("/bin/busybox");

  /** The engine's shared state directory, where other tests build the default image once. */
  static final Path SHARED_HOME =
      Path.of(Optional.ofNullable(System.getenv("SANDBOX4J_HOME")).orElse("/var/lib/sandbox4j"));

  private static final ObjectMapper JSON = new ObjectMapper();

  private TestImages() {}

  /**
   * A private state directory under {@code temp}. The runtime walks the path to a sandbox's root as
   * the sandbox's root (a host id of its range, see {@link StateDirectory}), so {@code temp} (JUnit
   * makes it 0700) gets search permission for others, 0711, as {@code /var/lib} has: it stays
   * unlistable, and the home below it is the engine's to close.
   */
  public static Path privateHome(Path temp) throws IOException {
    Files.setPosixFilePermissions(temp, PosixFilePermissions.fromString("rwx--x--x"));
    return Files.createDirectories(temp.resolve("home"));
  }

  /**
   * Destroys what a test left in {@code sandboxes}, stops the home's supervisor and waits for it to
   * exit ({@link #stopSupervisors}), then deletes the state directory: a supervisor still starting
   * or lingering must not race the deletion.
   */
  public static void destroyAllAndDelete(LocalSandbox sandboxes, Path home) throws IOException {
    if (sandboxes != null) {
      for (SandboxInfo s : sandboxes.list()) {
        sandboxes.destroy(s.ref());
      }
    }
    if (home != null && Files.exists(home)) {
      SpareDisks.drop(home); // this JVM's disks made ahead for it: mounted until dropped
      stopSupervisors(home);
      Trees.delete(home);
    }
  }

  /** How long a supervisor may take to notice its lock file is gone and exit; hangs fail. */
  static final Duration SUPERVISOR_EXIT = Duration.ofSeconds(60);

  /**
   * Stops every supervisor of {@code home} (running, or a JVM still starting) and waits until each
   * has exited. It deletes the home's {@code supervisor.lock}, which a supervisor takes for its
   * home being deleted: it exits at its next check and creates nothing on the way out. Fails if one
   * outlives {@link #SUPERVISOR_EXIT} (and kills it, so that it does not outlive the test).
   */
  static void stopSupervisors(Path home) throws IOException {
    Files.deleteIfExists(home.resolve(Supervisor.LOCK));
    long end = System.nanoTime() + SUPERVISOR_EXIT.toNanos();
    for (ProcessHandle p : supervisors(home)) {
      try {
        p.onExit().get(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (TimeoutException e) {
        p.destroyForcibly();
        throw new AssertionError(
            "the supervisor "
                + p.pid()
                + " of "
                + home
                + " did not exit within "
                + SUPERVISOR_EXIT
                + " of its lock file being deleted");
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new java.io.InterruptedIOException("interrupted waiting for a supervisor");
      } catch (ExecutionException e) {
        throw new IllegalStateException(e);
      }
    }
  }

  /** The supervisor processes of {@code home}: their command line names it. */
  public static List<ProcessHandle> supervisors(Path home) {
    List<ProcessHandle> found = new ArrayList<>();
    String wanted = Supervisor.class.getName() + " " + home + " ";
    try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
      for (Path p : procs.toList()) {
        String name = p.getFileName().toString();
        if (!name.chars().allMatch(Character::isDigit)) {
          continue;
        }
        try {
          String cmdline = Files.readString(p.resolve("cmdline")).replace('\0', ' ');
          if (cmdline.contains(wanted)) {
            ProcessHandle.of(Long.parseLong(name)).ifPresent(found::add);
          }
        } catch (IOException | RuntimeException e) {
          // exited meanwhile
        }
      }
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    return found;
  }

  public static void requireBusybox() {
    Prerequisites.require(
        Files.isExecutable(BUSYBOX) && OciConfig.isStaticElf(BUSYBOX),
        "a static busybox at /bin/busybox (apt-get install busybox-static)");
  }

  /**
   * A root filesystem of a few MB in {@code dir}: static busybox with every applet linked into
   * /bin, root and a {@code sandbox} user (1000) with its home, /tmp, and the mount points.
   */
  static Path busyboxRootfs(Path dir) throws IOException, InterruptedException {
    Path bin = Files.createDirectories(dir.resolve("bin"));
    Files.copy(BUSYBOX, bin.resolve("busybox"));
    Files.setAttribute(bin.resolve("busybox"), "unix:mode", 0755);
    for (String applet : run(List.of(BUSYBOX.toString(), "--list")).split("\n")) {
      if (!applet.isBlank() && !applet.equals("busybox")) {
        Files.createSymbolicLink(bin.resolve(applet.strip()), Path.of("busybox"));
      }
    }
    Files.createDirectories(dir.resolve("usr"));
    Files.createSymbolicLink(dir.resolve("usr/bin"), Path.of("../bin"));
    Path etc = Files.createDirectories(dir.resolve("etc"));
    Files.writeString(
        etc.resolve("passwd"),
        "root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000::/home/sandbox:/bin/sh\n");
    Files.writeString(etc.resolve("group"), "root:x:0:\nsandbox:x:1000:\n");
    Path home = Files.createDirectories(dir.resolve("home/sandbox"));
    Files.setAttribute(home, "unix:uid", 1000);
    Files.setAttribute(home, "unix:gid", 1000);
    Files.setAttribute(Files.createDirectories(dir.resolve("root")), "unix:mode", 0700);
    Files.setAttribute(Files.createDirectories(dir.resolve("tmp")), "unix:mode", 01777);
    for (String mountPoint : List.of("proc", "sys", "dev")) {
      Files.createDirectories(dir.resolve(mountPoint));
    }
    return dir;
  }

  /** Tars the contents of {@code dir} into {@code out} with numeric ids; {@code extra} options. */
  static Path tar(Path dir, Path out, String... extra) throws IOException, InterruptedException {
    List<String> argv =
        new ArrayList<>(List.of("tar", "-c", "-f", out.toString(), "--numeric-owner"));
    argv.addAll(List.of(extra));
    argv.addAll(List.of("-C", dir.toString(), "."));
    run(argv);
    return out;
  }

  /** {@code file} compressed with {@code gzip} or {@code zstd}, next to it. */
  static Path compress(Path file, String tool) throws IOException, InterruptedException {
    Path out = file.resolveSibling(file.getFileName() + (tool.equals("gzip") ? ".gz" : ".zst"));
    Process p =
        new ProcessBuilder(tool, "-c", file.toString())
            .redirectOutput(out.toFile())
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start();
    if (p.waitFor() != 0) {
      throw new IOException(tool + " failed");
    }
    return out;
  }

  /** Stores {@code content} as an OCI blob; returns its sha256 hex. */
  static String addBlob(Path blobs, byte[] content) throws IOException {
    String hex = ImageStore.sha256Hex(content);
    Files.write(blobs.resolve(hex), content);
    return hex;
  }

  /**
   * An OCI image layout archive at {@code out} of one gzip layer, the root filesystem in {@code
   * rootfs}, whose image config's {@code config} is {@code config} (its {@code User}, {@code
   * WorkingDir}, {@code Env} ...).
   */
  static Path ociArchive(Path rootfs, Map<String, Object> config, Path out)
      throws IOException, InterruptedException {
    Path work = Files.createTempDirectory(out.getParent(), "oci-");
    Path dir = Files.createDirectories(work.resolve("layout"));
    Path blobs = Files.createDirectories(dir.resolve("blobs/sha256"));
    Path layer = tar(rootfs, work.resolve("layer.tar"), "--gzip");
    byte[] layerBytes = Files.readAllBytes(layer);
    String layerDigest = addBlob(blobs, layerBytes);
    byte[] configBytes =
        JSON.writeValueAsBytes(Map.of("architecture", "amd64", "os", "linux", "config", config));
    String configDigest = addBlob(blobs, configBytes);
    byte[] manifest =
        JSON.writeValueAsBytes(
            Map.of(
                "schemaVersion",
                2,
                "mediaType",
                "application/vnd.oci.image.manifest.v1+json",
                "config",
                Map.of(
                    "mediaType",
                    "application/vnd.oci.image.config.v1+json",
                    "digest",
                    "sha256:" + configDigest,
                    "size",
                    configBytes.length),
                "layers",
                List.of(
                    Map.of(
                        "mediaType",
                        "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest",
                        "sha256:" + layerDigest,
                        "size",
                        layerBytes.length))));
    String manifestDigest = addBlob(blobs, manifest);
    Files.writeString(dir.resolve("oci-layout"), "{\"imageLayoutVersion\":\"1.0.0\"}");
    Files.write(
        dir.resolve("index.json"),
        JSON.writeValueAsBytes(
            Map.of(
                "schemaVersion",
                2,
                "manifests",
                List.of(
                    Map.of(
                        "mediaType",
                        "application/vnd.oci.image.manifest.v1+json",
                        "digest",
                        "sha256:" + manifestDigest,
                        "size",
                        manifest.length)))));
    tar(dir, out);
    Trees.delete(work);
    return out;
  }

  static void mknod(Path path, String type, int major, int minor)
      throws IOException, InterruptedException {
    run(List.of("mknod", path.toString(), type, Integer.toString(major), Integer.toString(minor)));
  }

  /**
   * An archive whose members try to write outside where it is extracted: an absolute path, a {@code
   * ../} path, and a file through a symlink to {@code outside} (absolute and relative). The
   * extraction directory is assumed 4 levels below {@code outside}'s parent.
   */
  static Path evilArchive(Path src, Path outside, Path out)
      throws IOException, InterruptedException {
    Files.createDirectories(src);
    Files.writeString(src.resolve("evil.txt"), "evil\n");
    Files.writeString(src.resolve("fine.txt"), "fine\n");
    Files.createSymbolicLink(src.resolve("link"), outside);
    Files.createSymbolicLink(src.resolve("rel"), Path.of("../../../../" + outside.getFileName()));
    String up = "../../../../" + outside.getFileName();
    run(List.of("tar", "-c", "-P", "-f", out.toString(), "-C", src.toString(), "fine.txt"));
    append(src, out, "s," + "^evil.txt," + outside + "/abs.txt,", "evil.txt");
    append(src, out, "s,^evil.txt," + up + "/dotdot.txt,", "evil.txt");
    run(List.of("tar", "-r", "-P", "-f", out.toString(), "-C", src.toString(), "link", "rel"));
    append(src, out, "s,^evil.txt,link/through-absolute-link.txt,", "evil.txt");
    append(src, out, "s,^evil.txt,rel/through-relative-link.txt,", "evil.txt");
    return out;
  }

  private static void append(Path src, Path out, String transform, String member)
      throws IOException, InterruptedException {
    run(
        List.of(
            "tar",
            "-r",
            "-P",
            "-f",
            out.toString(),
            "-C",
            src.toString(),
            "--transform=" + transform,
            member));
  }

  /**
   * A store in {@code home} whose {@code default} image is the shared one, hard-linked (layers
   * never change, so sharing their inodes is safe): seconds instead of the minute a build takes.
   * Builds the shared default first if it has none.
   */
  public static void seedDefault(Path home) throws IOException, InterruptedException {
    Path shared = SHARED_HOME.resolve("images");
    Path manifest = shared.resolve("default/image.json");
    if (!Files.exists(manifest)) {
      new ImageStore(shared).ensureDefault(line -> System.out.println("[image build] " + line));
    }
    JsonNode m = JSON.readTree(Files.readAllBytes(manifest));
    Path images = Files.createDirectories(home.resolve("images"));
    Files.createDirectories(images.resolve("default"));
    if (m.path("formatVersion").asInt() == 1) {
      run(
          List.of(
              "cp",
              "-al",
              shared.resolve("default/rootfs").toString(),
              images.resolve("default/rootfs").toString()));
    } else {
      Path layers = Files.createDirectories(images.resolve("layers"));
      for (JsonNode id : m.path("layers")) {
        run(
            List.of(
                "cp",
                "-al",
                shared.resolve("layers").resolve(id.asText()).toString(),
                layers.resolve(id.asText()).toString()));
      }
    }
    Files.write(images.resolve("default/image.json"), Files.readAllBytes(manifest));
  }

  static boolean exists(Path p) {
    return Files.exists(p, LinkOption.NOFOLLOW_LINKS);
  }

  public static String run(List<String> argv) throws IOException, InterruptedException {
    Process p = new ProcessBuilder(argv).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (p.waitFor() != 0) {
      throw new IOException(String.join(" ", argv) + " failed: " + out);
    }
    return out;
  }

  static String hex(byte[] b) {
    return HexFormat.of().formatHex(b);
  }

  /** The engine behind {@code sandboxes}, for tests in the internal packages. */
  public static Engine engineOf(LocalSandbox sandboxes) {
    return sandboxes.engine();
  }

  /** The ids of the sandboxes in {@code home} that warm pools hold (parked, not yet claimed). */
  static java.util.Set<String> parked(Path home) throws IOException {
    java.util.Set<String> ids = new java.util.TreeSet<>();
    Path sandboxes = home.resolve("sandboxes");
    if (!Files.isDirectory(sandboxes)) {
      return ids;
    }
    try (java.util.stream.Stream<Path> dirs = Files.list(sandboxes)) {
      for (Path dir : dirs.toList()) {
        if (Files.exists(dir.resolve("parked"))) {
          ids.add(dir.getFileName().toString());
        }
      }
    }
    return ids;
  }

  /** Waits until {@code pool}'s warm pool holds {@code size} sandboxes; fails after 2 minutes. */
  static void awaitWarm(LocalSandbox pool, int size) {
    long end = System.nanoTime() + Duration.ofMinutes(2).toNanos();
    try {
      while (pool.warmSandboxes() < size) {
        if (System.nanoTime() > end) {
          throw new AssertionError(
              "the warm pool held " + pool.warmSandboxes() + " of " + size + " after 2 minutes");
        }
        Thread.sleep(20);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted while waiting for the warm pool", e);
    }
  }
}
