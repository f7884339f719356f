package dev.sandbox4j.runtime.internal.image;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.internal.engine.SandboxRecord;
import dev.sandbox4j.runtime.internal.image.ImageStore.LayerUsers;
import dev.sandbox4j.runtime.internal.linux.Trees;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ImageStoreTest {
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;

  /** Where the engine keeps images; shared with the engine's tests so the build happens once. */
  private static final Path SHARED_IMAGES =
      Path.of(Optional.ofNullable(System.getenv("SANDBOX4J_HOME")).orElse("/var/lib/sandbox4j"))
          .resolve("images");

  private static Image sharedDefault;

  @TempDir Path temp;

  // ---- the real default image (mmdebstrap; ~45 s the first time on a machine, then cached)

  @Test
  void defaultImageHasTheSandboxUserAndTools() throws IOException {
    Image image = sharedDefault();
    assertThat(image.layers()).hasSize(1);
    Path root = image.layers().getFirst();

    assertThat(image.name()).isEqualTo("default");
    assertThat(image.sizeBytes()).isGreaterThan(100L * 1024 * 1024);
    assertThat(image.description()).contains("bookworm", "catatonit");

    Path sudo = root.resolve("usr/bin/sudo");
    assertThat(unix(sudo, "uid")).isEqualTo(100_000);
    assertThat(unix(sudo, "gid")).isEqualTo(100_000);
    assertThat(unix(sudo, "mode") & 04000).as("sudo keeps its setuid bit").isNotZero();

    Path home = root.resolve("home/sandbox");
    assertThat(home).isDirectory();
    assertThat(unix(home, "uid")).isEqualTo(101_000);
    assertThat(unix(home, "gid")).isEqualTo(101_000);

    assertThat(Files.readAllLines(root.resolve("etc/passwd")))
        .contains("sandbox:x:1000:1000::/home/sandbox:/bin/bash");
    assertThat(Files.readAllLines(root.resolve("etc/group")))
        .anyMatch(l -> l.startsWith("sandbox:x:1000:"));
    Path sudoers = root.resolve("etc/sudoers.d/sandbox");
    assertThat(Files.readString(sudoers)).isEqualTo("sandbox ALL=(ALL) NOPASSWD:ALL\n");
    assertThat(unix(sudoers, "mode") & 07777).isEqualTo(0440);

    for (String tool : List.of("catatonit", "rg", "node", "git", "python3")) {
      // NOFOLLOW: python3 is a relative symlink, and an absolute one would point into the host.
      assertThat(Files.exists(root.resolve("usr/bin").resolve(tool), NOFOLLOW))
          .as("/usr/bin/" + tool)
          .isTrue();
    }
    assertThat(ownedBelowShift(root)).as("files still owned by unshifted ids").isEmpty();
    assertThat(new ImageStore(SHARED_IMAGES).list()).contains(image);
  }

  @Test
  void secondEnsureDefaultDoesNotRebuild() {
    Image first = sharedDefault();
    List<String> progress = new ArrayList<>();

    Image second = new ImageStore(SHARED_IMAGES).ensureDefault(progress::add);

    assertThat(second).isEqualTo(first);
    assertThat(second.created()).isEqualTo(first.created());
    assertThat(progress).isEmpty();
  }

  // ---- find, list, remove

  @Test
  void findListAndRemoveHandMadeImages() throws IOException {
    Path images = temp.resolve("images");
    ImageStore store = new ImageStore(images, LayerUsers.NONE);
    Instant created = Instant.parse("2026-11-29T10:15:30.123456Z");
    writeImage(images, "b-image", created, "second");
    writeImage(images, "a.image", created, "first");
    writeImage(images, "c_image", created, "third");
    Files.createDirectories(images.resolve("not-an-image")); // no image.json
    Files.createDirectories(images.resolve(".build-a.image-0123abcd/rootfs"));

    assertThat(store.list())
        .extracting(Image::name)
        .containsExactly("a.image", "b-image", "c_image");
    // Format 1 (a rootfs per image) becomes a one-layer image on first use, moved, not copied.
    Image a = store.find("a.image").orElseThrow();
    assertThat(a.layerIds()).containsExactly(ImageStore.legacyLayerId("a.image"));
    assertThat(a.layers().getFirst())
        .isEqualTo(images.resolve("layers").resolve(ImageStore.legacyLayerId("a.image")));
    assertThat(a.layers().getFirst().resolve("etc/hostname")).hasContent("a.image\n");
    assertThat(images.resolve("a.image/rootfs")).doesNotExist();
    assertThat(a.created()).isEqualTo(created);
    assertThat(a.sizeBytes()).isEqualTo(1234);
    assertThat(a.description()).isEqualTo("first");
    assertThat(store.find("missing")).isEmpty();

    Path bLayer = store.find("b-image").orElseThrow().layers().getFirst();
    store.remove("b-image");
    store.remove("b-image"); // idempotent
    store.remove("never-existed");

    assertThat(store.find("b-image")).isEmpty();
    assertThat(images.resolve("b-image")).doesNotExist();
    assertThat(bLayer).as("a layer nothing uses").doesNotExist();
    assertThat(store.list()).extracting(Image::name).containsExactly("a.image", "c_image");
    assertThat(leftovers(images)).containsExactly(".build-a.image-0123abcd");
  }

  @Test
  void anEmptyOrMissingStoreHasNoImages() {
    ImageStore store = new ImageStore(temp.resolve("nothing-here"), LayerUsers.NONE);

    assertThat(store.list()).isEmpty();
    assertThat(store.find("default")).isEmpty();
    store.remove("default");
    store.gc();
  }

  @Test
  void invalidNamesAreRejectedClearly() {
    ImageStore store = new ImageStore(temp.resolve("images"), LayerUsers.NONE);
    for (String bad :
        List.of("", "Default", "../etc", "a/b", ".build-x", "-x", "_x", "a b", "a".repeat(64))) {
      assertThatThrownBy(() -> store.find(bad))
          .isInstanceOf(WorkspaceException.class)
          .hasMessageContaining("invalid image name \"" + bad + "\"")
          .hasMessageContaining("a-z, 0-9");
      assertThatThrownBy(() -> store.remove(bad))
          .isInstanceOf(WorkspaceException.class)
          .hasMessageContaining("invalid image name");
    }
    assertThat(store.find("a".repeat(63))).isEmpty();
    assertThat(store.find("0.9_x-y")).isEmpty();
  }

  @Test
  void aDamagedImageIsReportedNotIgnored() throws IOException {
    Path images = temp.resolve("images");
    writeImage(images, "broken", Instant.now(), "x");
    Files.writeString(images.resolve("broken/image.json"), "{not json");

    assertThatThrownBy(() -> new ImageStore(images, LayerUsers.NONE).find("broken"))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("image broken is damaged")
        .hasMessageContaining("sandbox4j image rm broken");

    writeImage(images, "no-rootfs", Instant.now(), "x");
    Files.delete(images.resolve("no-rootfs/rootfs/etc/hostname"));
    Files.delete(images.resolve("no-rootfs/rootfs/etc"));
    Files.delete(images.resolve("no-rootfs/rootfs"));
    assertThatThrownBy(() -> new ImageStore(images, LayerUsers.NONE).find("no-rootfs"))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("image no-rootfs is damaged")
        .hasMessageContaining("rootfs is missing");
  }

  // ---- gc

  @Test
  void gcRemovesLeftoversOfInterruptedBuildsAndRemovals() throws IOException {
    Path images = temp.resolve("images");
    writeImage(images, "keep", Instant.now(), "kept");
    Path build = images.resolve(".build-default-0123456789abcdef");
    Files.createDirectories(build.resolve("rootfs/usr/bin"));
    Files.writeString(build.resolve("rootfs/usr/bin/half-written"), "x");
    Files.createSymbolicLink(build.resolve("rootfs/host-link"), temp.resolve("outside"));
    Files.writeString(temp.resolve("outside"), "must survive");
    Files.createDirectories(images.resolve(".old-keep-89abcdef/rootfs"));
    Files.createDirectories(images.resolve(".build-nodash"));
    ImageStore store = new ImageStore(images, LayerUsers.NONE);

    store.gc();

    assertThat(leftovers(images)).isEmpty();
    assertThat(store.find("keep")).isPresent();
    assertThat(temp.resolve("outside")).hasContent("must survive");
  }

  @Test
  void gcSparesABuildInProgress() throws Exception {
    requireRoot();
    Path images = temp.resolve("images");
    CountDownLatch building = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    FakeBuilder builder =
        new FakeBuilder(
            () -> {
              building.countDown();
              await(finish);
            });
    ImageStore store = new ImageStore(images, builder, LayerUsers.NONE);

    try (ExecutorService threads = Executors.newVirtualThreadPerTaskExecutor()) {
      Future<Image> built = threads.submit(() -> store.ensureDefault(line -> {}));
      assertThat(building.await(30, TimeUnit.SECONDS)).isTrue();

      store.gc();
      assertThat(leftovers(images)).singleElement().asString().startsWith(".build-default-");

      finish.countDown();
      assertThat(built.get(30, TimeUnit.SECONDS).name()).isEqualTo("default");
    }
    assertThat(leftovers(images)).isEmpty();
    assertThat(store.find("default")).isPresent();
  }

  // ---- building (with a fast fake builder: locking, publishing, ownership)

  @Test
  void concurrentEnsureDefaultBuildsOnce() throws Exception {
    requireRoot();
    FakeBuilder builder = new FakeBuilder(() -> sleep(Duration.ofMillis(300)));
    ImageStore store = new ImageStore(temp.resolve("images"), builder, LayerUsers.NONE);
    ImageStore sameDirectory = new ImageStore(temp.resolve("images"), builder, LayerUsers.NONE);
    CountDownLatch start = new CountDownLatch(1);

    List<Image> results;
    try (ExecutorService threads = Executors.newFixedThreadPool(2)) {
      Future<Image> a = threads.submit(() -> awaitThen(start, () -> store.ensureDefault(l -> {})));
      Future<Image> b =
          threads.submit(() -> awaitThen(start, () -> sameDirectory.ensureDefault(l -> {})));
      start.countDown();
      results = List.of(a.get(30, TimeUnit.SECONDS), b.get(30, TimeUnit.SECONDS));
    }

    assertThat(builder.builds).hasValue(1);
    assertThat(results.get(1)).isEqualTo(results.get(0));
    assertThat(store.find("default")).contains(results.get(0));
  }

  @Test
  void ensureDefaultWaitsForABuilderInAnotherJvmAndUsesItsImage() throws Exception {
    requireRoot();
    Path images = temp.resolve("images");
    Files.createDirectories(images);
    FakeBuilder builder = new FakeBuilder(() -> {});
    ImageStore store = new ImageStore(images, builder, LayerUsers.NONE);
    Process other = holdLockInAnotherJvm(images.resolve(".lock-default"));
    try (ExecutorService threads = Executors.newVirtualThreadPerTaskExecutor()) {
      Future<Image> waiting = threads.submit(() -> store.ensureDefault(l -> {}));
      // Had the lock not held it back, the fake builder would have run by now.
      Thread.sleep(500);
      assertThat(waiting).isNotDone();
      Instant created = Instant.parse("2026-01-02T03:04:05Z");
      writeImage(images, "default", created, "built by the other JVM");

      other.getOutputStream().close(); // the other JVM releases its lock and exits
      Image image = waiting.get(30, TimeUnit.SECONDS);

      assertThat(image.description()).isEqualTo("built by the other JVM");
      assertThat(image.created()).isEqualTo(created);
      assertThat(builder.builds).hasValue(0);
    } finally {
      other.destroyForcibly();
    }
  }

  @Test
  void buildShiftsOwnershipKeepsSetuidAndRecordsTheImage() throws IOException {
    requireRoot();
    Path images = temp.resolve("images");
    List<String> progress = new CopyOnWriteArrayList<>();
    RootfsBuilder builder =
        (target, out) -> {
          out.accept("building fake rootfs");
          Path bin = Files.createDirectories(target.resolve("usr/bin"));
          Files.write(bin.resolve("sudo"), new byte[1000]);
          Files.setAttribute(bin.resolve("sudo"), "unix:mode", 04755);
          Files.write(bin.resolve("wall"), new byte[24]);
          Files.setAttribute(bin.resolve("wall"), "unix:gid", 5);
          Files.setAttribute(bin.resolve("wall"), "unix:mode", 02755);
          Files.createLink(bin.resolve("sudo-hardlink"), bin.resolve("sudo")); // counted once
          Files.createSymbolicLink(bin.resolve("sudoedit"), Path.of("sudo"));
          Path home = Files.createDirectories(target.resolve("home/sandbox"));
          Files.setAttribute(home, "unix:uid", 1000);
          Files.setAttribute(home, "unix:gid", 1000);
          Files.writeString(home.resolve(".profile"), "# hi\n");
          Files.setAttribute(home.resolve(".profile"), "unix:uid", 1000);
        };
    ImageStore store = new ImageStore(images, builder, LayerUsers.NONE);

    Image image = store.buildDefault(progress::add);

    assertThat(image.layers()).hasSize(1);
    Path layer = image.layers().getFirst();
    assertThat(layer.getParent()).isEqualTo(images.resolve("layers"));
    assertThat(unix(images.resolve("layers"), "mode") & 0777).isEqualTo(0700);
    Path bin = layer.resolve("usr/bin");
    assertThat(unix(bin.resolve("sudo"), "uid")).isEqualTo(100_000);
    assertThat(unix(bin.resolve("sudo"), "mode") & 07777).isEqualTo(04755);
    assertThat(unix(bin.resolve("wall"), "gid")).isEqualTo(100_005);
    assertThat(unix(bin.resolve("wall"), "mode") & 07777).isEqualTo(02755);
    assertThat(unix(bin.resolve("sudoedit"), "uid")).as("the link itself").isEqualTo(100_000);
    assertThat(unix(layer.resolve("home/sandbox"), "uid")).isEqualTo(101_000);
    assertThat(unix(layer.resolve("home/sandbox/.profile"), "uid")).isEqualTo(101_000);
    assertThat(unix(layer.resolve("home/sandbox/.profile"), "gid")).isEqualTo(100_000);
    assertThat(unix(layer, "uid")).isEqualTo(100_000);
    assertThat(image.sizeBytes()).isEqualTo(1000 + 24 + 5);
    assertThat(progress).first().isEqualTo("building fake rootfs");
    assertThat(progress).last().asString().startsWith("image default ready");

    Map<String, Object> manifest =
        new ObjectMapper()
            .readValue(images.resolve("default/image.json").toFile(), new TypeReference<>() {});
    assertThat(manifest)
        .containsEntry("formatVersion", 2)
        .containsEntry("layers", image.layerIds())
        .containsEntry("name", "default")
        .containsEntry("created", image.created().toString())
        .containsEntry("sizeBytes", 1029)
        .containsEntry("description", MmdebstrapBuilder.DESCRIPTION)
        .containsEntry("packages", MmdebstrapBuilder.PACKAGES);
    assertThat(store.find("default")).contains(image);
  }

  @Test
  void buildDefaultReplacesTheOldImageWholesale() throws IOException {
    requireRoot();
    Path images = temp.resolve("images");
    FakeBuilder builder = new FakeBuilder(() -> {});
    ImageStore store = new ImageStore(images, builder, LayerUsers.NONE);
    Image first = store.ensureDefault(l -> {});
    Files.writeString(first.layers().getFirst().resolve("etc/left-by-a-user"), "x");

    Image second = store.buildDefault(l -> {});

    assertThat(builder.builds).hasValue(2);
    assertThat(second.created()).isAfter(first.created());
    assertThat(second.layerIds()).doesNotContainAnyElementsOf(first.layerIds());
    assertThat(second.layers().getFirst().resolve("usr/bin/marker")).hasContent("build 2");
    assertThat(second.layers().getFirst().resolve("etc/left-by-a-user")).doesNotExist();
    assertThat(first.layers().getFirst()).as("the old layer, used by nothing").doesNotExist();
    try (Stream<Path> entries = Files.list(images)) {
      assertThat(entries.map(p -> p.getFileName().toString()))
          .containsExactlyInAnyOrder("default", "layers", ".lock-default", ".lock");
    }
    try (Stream<Path> entries = Files.list(images.resolve("layers"))) {
      assertThat(entries.map(p -> p.getFileName().toString()))
          .containsExactlyElementsOf(second.layerIds());
    }
  }

  @Test
  void rebuildingOrRemovingKeepsTheLayersSandboxesUseUntilGc() throws IOException {
    requireRoot();
    Path images = temp.resolve("images");
    Path sandboxes = temp.resolve("sandboxes");
    ImageStore store =
        new ImageStore(
            images, new FakeBuilder(() -> {}), () -> SandboxRecord.layersInUse(sandboxes));
    Image first = store.ensureDefault(l -> {});
    writeSandboxRecord(temp.resolve("sandboxes/sb1"), "default", first.layerIds());
    // A sandbox from before layers existed: its record names no layers, only its image.
    writeSandboxRecord(temp.resolve("sandboxes/sb0"), "old", null);
    writeImage(images, "old", Instant.now(), "format 1");
    Path oldLayer = store.find("old").orElseThrow().layers().getFirst();

    Image second = store.buildDefault(l -> {});
    store.remove("old");
    assertThat(store.gc()).isEmpty();

    assertThat(first.layers().getFirst()).as("used by sandbox sb1").isDirectory();
    assertThat(oldLayer).as("used by sandbox sb0").isDirectory();
    assertThat(second.layers().getFirst()).isDirectory();

    Trees.delete(temp.resolve("sandboxes"));
    List<String> removed = store.gc();

    assertThat(removed).hasSize(2).allMatch(l -> l.startsWith("unused image layer "));
    assertThat(first.layers().getFirst()).doesNotExist();
    assertThat(oldLayer).doesNotExist();
    assertThat(store.find("default")).contains(second);
    assertThat(second.layers().getFirst()).isDirectory();
  }

  @Test
  void gcSparesLayersABuildInProgressPinned() throws IOException {
    requireRoot();
    Path images = temp.resolve("images");
    ImageStore store = new ImageStore(images, new FakeBuilder(() -> {}), LayerUsers.NONE);
    String id = "ab".repeat(32);
    String[] seenByGc = new String[1];

    store.withNameLock(
        "pinning",
        build -> {
          Path layer = build.newScratchDirectory();
          Files.writeString(layer.resolve("file"), "x");
          store.addLayer(build, layer, id);
          store.gc(); // the build holds the lock of "pinning": its pins count
          seenByGc[0] = Files.isDirectory(store.layerPath(id)) ? "kept" : "deleted";
          return null;
        });

    assertThat(seenByGc[0]).isEqualTo("kept");
    assertThat(store.gc()).containsExactly("unused image layer " + id.substring(0, 12));
    assertThat(store.layerPath(id)).doesNotExist();
  }

  /**
   * A store opened without the sandboxes that run on its layers (to read or build) deletes no
   * layer: it cannot tell which ones a sandbox uses, so its gc keeps them all. A store told that no
   * sandbox uses them deletes the unused one.
   */
  @Test
  void aStoreThatKnowsNoSandboxesDeletesNoLayer() throws IOException {
    requireRoot();
    Path images = temp.resolve("images");
    ImageStore store = new ImageStore(images, new FakeBuilder(() -> {}));
    String id = "cd".repeat(32);
    store.withNameLock(
        "orphan",
        build -> {
          Path layer = build.newScratchDirectory();
          Files.writeString(layer.resolve("file"), "x");
          store.addLayer(build, layer, id);
          return null;
        });

    assertThat(store.gc()).isEmpty(); // it logs that it kept every layer, and why
    assertThat(store.layerPath(id)).as("a layer nothing names, kept").isDirectory();

    ImageStore knowing = new ImageStore(images, new FakeBuilder(() -> {}), LayerUsers.NONE);
    assertThat(knowing.gc()).containsExactly("unused image layer " + id.substring(0, 12));
    assertThat(store.layerPath(id)).doesNotExist();
  }

  @Test
  void aFailedBuildLeavesNoImageAndNoLeftovers() throws IOException {
    Path images = temp.resolve("images");
    ImageStore store =
        new ImageStore(
            images,
            (target, out) -> {
              Files.writeString(target.resolve("partial"), "x");
              throw new ImageBuildException("the fake builder gave up");
            });

    assertThatThrownBy(() -> store.ensureDefault(l -> {}))
        .isInstanceOf(ImageBuildException.class)
        .hasMessage("the fake builder gave up");

    assertThat(store.find("default")).isEmpty();
    assertThat(leftovers(images)).isEmpty();
  }

  @Test
  void aBuildCleansUpLeftoversOfItsOwnName() throws IOException {
    requireRoot();
    Path images = temp.resolve("images");
    Files.createDirectories(images.resolve(".build-default-00ff/rootfs"));
    Files.createDirectories(images.resolve(".old-default-00ff/rootfs"));
    ImageStore store = new ImageStore(images, new FakeBuilder(() -> {}), LayerUsers.NONE);

    store.ensureDefault(l -> {});

    assertThat(leftovers(images)).isEmpty();
  }

  // ---- the mmdebstrap builder's plumbing, with stand-in programs

  @Test
  void missingMmdebstrapSaysHowToInstallIt() {
    MmdebstrapBuilder builder =
        new MmdebstrapBuilder("sandbox4j-no-such-mmdebstrap", Optional.empty());

    assertThatThrownBy(() -> builder.build(temp, l -> {}))
        .isInstanceOf(ImageBuildException.class)
        .hasMessage(
            "mmdebstrap is not installed: run `sandbox4j setup` or `apt-get install mmdebstrap`");
  }

  @Test
  void aFailingMmdebstrapStreamsItsOutputAndReportsExitCodeAndTail() throws IOException {
    Path fake = temp.resolve("fake-mmdebstrap");
    Files.writeString(
        fake,
        """
        #!/bin/sh
        i=1
        while [ $i -le 30 ]; do echo "line $i"; i=$((i+1)); done
        printf 'args: %s\\n' "$*" >&2
        exit 7
        """);
    Files.setPosixFilePermissions(fake, PosixFilePermissions.fromString("rwx------"));
    Path target = Files.createDirectory(temp.resolve("rootfs"));
    List<String> progress = new ArrayList<>();

    assertThatThrownBy(
            () ->
                new MmdebstrapBuilder(fake.toString(), Optional.empty())
                    .build(target, progress::add))
        .isInstanceOf(ImageBuildException.class)
        .isInstanceOf(WorkspaceException.class)
        .satisfies(
            e -> {
              List<String> lines = e.getMessage().lines().toList();
              assertThat(lines.getFirst()).contains("exit 7");
              assertThat(lines.subList(1, lines.size()))
                  .hasSize(20)
                  .startsWith("line 12")
                  .contains("line 30");
            });

    assertThat(progress).hasSize(31).startsWith("line 1", "line 2");
    String args = progress.getLast();
    assertThat(args)
        .contains("--variant=minbase")
        .contains("--format=directory")
        .contains(
            "--include=git,python3,nodejs,ripgrep,sudo,ca-certificates,procps,iproute2,curl,catatonit,util-linux,coreutils,findutils")
        .contains("--customize-hook=")
        .endsWith("bookworm " + target);
  }

  @Test
  void aMirrorFollowsTheTarget() {
    Path target = temp.resolve("rootfs");
    List<String> argv =
        new MmdebstrapBuilder("mmdebstrap", Optional.of("http://mirror.example/debian"))
            .command(Path.of("/usr/bin/mmdebstrap"), target);

    assertThat(argv.subList(argv.size() - 3, argv.size()))
        .containsExactly("bookworm", target.toString(), "http://mirror.example/debian");
    assertThat(
            new MmdebstrapBuilder("mmdebstrap", Optional.empty())
                .command(Path.of("/usr/bin/mmdebstrap"), target)
                .getLast())
        .isEqualTo(target.toString());
  }

  // ---- helpers

  /** Builds (or finds) the real default image once per test JVM, in the engine's shared store. */
  private static synchronized Image sharedDefault() {
    requireRoot();
    Prerequisites.require(onPath("mmdebstrap"), "mmdebstrap (apt-get install mmdebstrap)");
    if (sharedDefault == null) {
      long start = System.nanoTime();
      AtomicInteger lines = new AtomicInteger();
      sharedDefault =
          new ImageStore(SHARED_IMAGES)
              .ensureDefault(
                  line -> {
                    lines.incrementAndGet();
                    System.out.println("[image build] " + line);
                  });
      System.out.printf(
          "default image: %s, %d bytes, %s in %d ms (%d progress lines)%n",
          sharedDefault.layers(),
          sharedDefault.sizeBytes(),
          lines.get() == 0 ? "found" : "built",
          (System.nanoTime() - start) / 1_000_000,
          lines.get());
    }
    return sharedDefault;
  }

  private static void requireRoot() {
    boolean root;
    try {
      root = ((Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid")) == 0;
    } catch (IOException | UnsupportedOperationException e) {
      root = false;
    }
    Prerequisites.require(root, "root (images are owned by host uids 100000+)");
  }

  private static boolean onPath(String program) {
    String path = Optional.ofNullable(System.getenv("PATH")).orElse("/usr/bin:/bin");
    return Stream.of(path.split(File.pathSeparator))
        .filter(d -> !d.isEmpty())
        .anyMatch(d -> Files.isExecutable(Path.of(d, program)));
  }

  private static int unix(Path path, String attribute) throws IOException {
    return (Integer) Files.getAttribute(path, "unix:" + attribute, NOFOLLOW);
  }

  private static List<Path> ownedBelowShift(Path root) throws IOException {
    List<Path> found = new ArrayList<>();
    Files.walkFileTree(
        root,
        new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs)
              throws IOException {
            check(dir);
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFile(Path file, BasicFileAttributes attrs)
              throws IOException {
            check(file);
            return FileVisitResult.CONTINUE;
          }

          private void check(Path p) throws IOException {
            if (unix(p, "uid") < Image.UID_SHIFT || unix(p, "gid") < Image.UID_SHIFT) {
              found.add(p);
            }
          }
        });
    return found;
  }

  /** Lays out an image as the store does, by hand: the on-disk format is the contract. */
  private static void writeImage(Path images, String name, Instant created, String description)
      throws IOException {
    Path dir = images.resolve(name);
    Files.createDirectories(dir.resolve("rootfs/etc"));
    Files.writeString(dir.resolve("rootfs/etc/hostname"), name + "\n");
    Files.writeString(
        dir.resolve("image.json"),
        """
        {"formatVersion": 1, "name": "%s", "created": "%s", "sizeBytes": 1234,
         "description": "%s", "packages": ["coreutils"]}
        """
            .formatted(name, created, description));
  }

  private static void writeSandboxRecord(Path dir, String image, List<String> layers)
      throws IOException {
    Files.createDirectories(dir);
    new SandboxRecord(
            SandboxRecord.FORMAT_VERSION,
            dir.getFileName().toString(),
            SandboxRecord.Status.RUNNING,
            image,
            Instant.now().toString(),
            Map.of(),
            1,
            1L << 30,
            100,
            layers)
        .write(dir.resolve("state.json"));
  }

  private static List<String> leftovers(Path images) throws IOException {
    try (Stream<Path> entries = Files.list(images)) {
      return entries
          .map(p -> p.getFileName().toString())
          .filter(n -> n.startsWith(".build-") || n.startsWith(".old-"))
          .toList();
    }
  }

  /**
   * Starts a JVM that takes the lock a builder takes and holds it until its stdin closes; returns
   * once it holds the lock.
   */
  private Process holdLockInAnotherJvm(Path lockFile) throws IOException {
    Path source = temp.resolve("HoldLock.java");
    Files.writeString(
        source,
        """
        import java.nio.channels.FileChannel;
        import java.nio.file.Path;
        import java.nio.file.StandardOpenOption;

        public class HoldLock {
          public static void main(String[] args) throws Exception {
            try (FileChannel channel = FileChannel.open(Path.of(args[0]),
                    StandardOpenOption.CREATE, StandardOpenOption.WRITE);
                var lock = channel.lock()) {
              System.out.println("locked");
              System.out.flush();
              while (System.in.read() >= 0) {}
            }
          }
        }
        """);
    String java = ProcessHandle.current().info().command().orElseThrow();
    Process process =
        new ProcessBuilder(java, source.toString(), lockFile.toString())
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .start();
    BufferedReader out = process.inputReader(StandardCharsets.UTF_8);
    String first = out.readLine();
    if (!"locked".equals(first)) {
      process.destroyForcibly();
      throw new IllegalStateException("the lock-holding JVM said " + first);
    }
    return process;
  }

  /** Writes a tiny rootfs and counts its invocations; {@code during} runs mid-build. */
  private static final class FakeBuilder implements RootfsBuilder {
    final AtomicInteger builds = new AtomicInteger();
    private final Runnable during;

    FakeBuilder(Runnable during) {
      this.during = during;
    }

    @Override
    public void build(Path target, Consumer<String> progress) throws IOException {
      int n = builds.incrementAndGet();
      progress.accept("fake build " + n);
      Files.createDirectories(target.resolve("usr/bin"));
      during.run();
      Files.writeString(target.resolve("usr/bin/marker"), "build " + n);
      Files.createDirectories(target.resolve("etc"));
      Files.writeString(target.resolve("etc/passwd"), "root:x:0:0:root:/root:/bin/bash\n");
    }
  }

  private static <T> T awaitThen(CountDownLatch latch, java.util.concurrent.Callable<T> then)
      throws Exception {
    await(latch);
    return then.call();
  }

  private static void await(CountDownLatch latch) {
    try {
      if (!latch.await(30, TimeUnit.SECONDS)) {
        throw new IllegalStateException("latch not released");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private static void sleep(Duration duration) {
    try {
      Thread.sleep(duration);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new UncheckedIOException(new IOException("interrupted", e));
    }
  }
}
