package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.engine.Overlay;
import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.runtime.internal.image.ImageBuildException;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.linux.OverlayMarks;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Importing root filesystem tarballs, {@code docker save} archives and OCI layouts, all made here
 * from a busybox root filesystem of a few MB, and running sandboxes on them.
 */
class ImageImportTest {
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path temp;

  private Path home;
  private LocalSandbox sandboxes;
  private ImageStore store;
  private final List<String> progress = new CopyOnWriteArrayList<>();

  @BeforeEach
  void setUp() throws IOException {
    Prerequisites.requireLocalEngine();
    TestImages.requireBusybox();
    home = TestImages.privateHome(temp);
    sandboxes = LocalSandbox.builder().home(home).progress(progress::add).build();
    store = sandboxes.engine().images();
  }

  /** Destroys what a failed test left and deletes the store here (its absolute links too). */
  @AfterEach
  void tearDown() throws IOException {
    TestImages.destroyAllAndDelete(sandboxes, home);
  }

  @Test
  void aCompressedRootfsTarballBecomesOneLayerThatSandboxesRun() throws Exception {
    Path rootfs = TestImages.busyboxRootfs(temp.resolve("rootfs"));
    Files.writeString(rootfs.resolve("etc/marker"), "from the tarball\n");
    TestImages.mknod(rootfs.resolve("dev/sda"), "b", 8, 0); // must not reach the host's store
    TestImages.mknod(rootfs.resolve("dev/kmsg"), "c", 1, 11);
    Path archive = TestImages.tar(rootfs, temp.resolve("rootfs.tar.gz"), "--gzip");

    Image image = store.importArchive("bb", archive, progress::add);

    assertThat(image.layers()).hasSize(1);
    Path layer = image.layers().getFirst();
    assertThat(layer.getParent()).isEqualTo(home.resolve("images/layers"));
    assertThat(unix(layer.resolve("bin/busybox"), "uid")).isEqualTo(100_000);
    assertThat(unix(layer.resolve("home/sandbox"), "uid")).isEqualTo(101_000);
    assertThat(unix(layer.resolve("home/sandbox"), "gid")).isEqualTo(101_000);
    assertThat(unix(layer.resolve("tmp"), "mode") & 07777).isEqualTo(01777);
    assertThat(layer.resolve("dev/sda")).doesNotExist();
    assertThat(layer.resolve("dev/kmsg")).doesNotExist();
    assertThat(unix(home.resolve("images/layers"), "mode") & 0777).isEqualTo(0700);
    assertThat(store.find("bb")).contains(image);
    assertThat(image.description()).contains("rootfs.tar.gz", "root filesystem tarball");

    CommandResult r = runIn("bb", "id -u; pwd; cat /etc/marker; ls -ld /bin/busybox");
    assertThat(r.stdoutText()).startsWith("1000\n/home/sandbox\nfrom the tarball\n");
    assertThat(r.stdoutText().lines().toList().get(3)).contains(" root ");

    // The same bytes again: the layer is reused, nothing is extracted.
    progress.clear();
    Image again = store.importArchive("bb-again", archive, progress::add);
    assertThat(again.layerIds()).isEqualTo(image.layerIds());
    assertThat(progress).anyMatch(l -> l.contains("already in the store"));
    assertThat(progress).noneMatch(l -> l.endsWith(": extracting"));
  }

  @Test
  void aDockerSaveArchiveKeepsItsLayersAndTheirWhiteouts() throws Exception {
    Path archive = temp.resolve("docker.tar");
    List<Path> layers = twoLayers();
    Path dir = Files.createDirectories(temp.resolve("docker"));
    Files.createDirectories(dir.resolve("aaa"));
    Files.createDirectories(dir.resolve("bbb"));
    Files.copy(layers.get(0), dir.resolve("aaa/layer.tar"));
    // Docker 25+ makes layer paths symlinks into blobs/: one of them is one here.
    Files.createDirectories(dir.resolve("blobs/sha256"));
    Files.copy(layers.get(1), dir.resolve("blobs/sha256/second"));
    Files.createSymbolicLink(dir.resolve("bbb/layer.tar"), Path.of("../blobs/sha256/second"));
    Files.writeString(dir.resolve("config.json"), "{}");
    Files.writeString(
        dir.resolve("manifest.json"),
        JSON.writeValueAsString(
            List.of(
                Map.of(
                    "Config",
                    "config.json",
                    "RepoTags",
                    List.of("test:1"),
                    "Layers",
                    List.of("aaa/layer.tar", "bbb/layer.tar")))));
    TestImages.tar(dir, archive);

    Image image = store.importArchive("docker-bb", archive, progress::add);

    assertThat(image.layers()).hasSize(2);
    assertThat(image.description()).contains("docker save archive", "2 layers");
    assertOverlayMarkers(image.layers().get(1));
    assertWhiteoutsTookEffect("docker-bb");
  }

  @Test
  void anOciLayoutWithGzipAndZstdLayersKeepsItsWhiteouts() throws Exception {
    List<Path> layers = twoLayers();
    Path dir = Files.createDirectories(temp.resolve("oci"));
    Path blobs = Files.createDirectories(dir.resolve("blobs/sha256"));
    Path gz = TestImages.compress(layers.get(0), "gzip");
    Path zst = TestImages.compress(layers.get(1), "zstd");
    String l1 = TestImages.addBlob(blobs, Files.readAllBytes(gz));
    String l2 = TestImages.addBlob(blobs, Files.readAllBytes(zst));
    String config =
        TestImages.addBlob(
            blobs,
            "{\"architecture\":\"amd64\",\"os\":\"linux\"}".getBytes(StandardCharsets.UTF_8));
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
                    "sha256:" + config,
                    "size",
                    1),
                "layers",
                List.of(
                    Map.of(
                        "mediaType",
                        "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest",
                        "sha256:" + l1,
                        "size",
                        Files.size(gz)),
                    Map.of(
                        "mediaType",
                        "application/vnd.oci.image.layer.v1.tar+zstd",
                        "digest",
                        "sha256:" + l2,
                        "size",
                        Files.size(zst)))));
    String manifestDigest = TestImages.addBlob(blobs, manifest);
    Files.writeString(dir.resolve("oci-layout"), "{\"imageLayoutVersion\":\"1.0.0\"}");
    Files.writeString(
        dir.resolve("index.json"),
        JSON.writeValueAsString(
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
                        manifest.length,
                        "platform",
                        Map.of("os", "linux", "architecture", "amd64"))))));
    Path archive = TestImages.tar(dir, temp.resolve("oci.tar"));

    Image image = store.importArchive("oci-bb", archive, progress::add);

    assertThat(image.layers()).hasSize(2);
    assertThat(image.description()).contains("OCI image layout");
    assertOverlayMarkers(image.layers().get(1));
    assertWhiteoutsTookEffect("oci-bb");

    // A blob whose bytes do not match its digest is refused.
    Files.write(blobs.resolve(l2), new byte[] {1, 2, 3});
    Path tampered = TestImages.tar(dir, temp.resolve("oci-tampered.tar"));
    assertThatThrownBy(() -> store.importArchive("oci-tampered", tampered, progress::add))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("does not match its digest");
    assertThat(store.find("oci-tampered")).isEmpty();
  }

  @Test
  void anArchiveCannotWriteOutsideItsStagingDirectory() throws Exception {
    Path outside = Files.createDirectories(temp.resolve("outside"));
    Path evil = TestImages.evilArchive(temp.resolve("evil-src"), outside, temp.resolve("evil.tar"));

    assertThatThrownBy(() -> store.importArchive("evil", evil, progress::add))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("archive is refused")
        .hasMessageContaining("Member name contains '..'");

    try (Stream<Path> written = Files.list(outside)) {
      assertThat(written).as("files written outside").isEmpty();
    }
    assertThat(store.find("evil")).isEmpty();
    try (Stream<Path> entries = Files.list(home.resolve("images"))) {
      assertThat(entries.map(p -> p.getFileName().toString()))
          .noneMatch(n -> n.startsWith(".build-"));
    }
    Path layers = home.resolve("images/layers");
    if (Files.exists(layers)) {
      try (Stream<Path> entries = Files.list(layers)) {
        assertThat(entries).as("layers").isEmpty();
      }
    }
  }

  @Test
  void aFileThatIsNoTarArchiveIsRefused() throws Exception {
    Path notTar = Files.writeString(temp.resolve("notes.tar"), "just some text\n".repeat(100));

    assertThatThrownBy(() -> store.importArchive("notes", notTar, progress::add))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("is not a tar archive");
    assertThat(store.find("notes")).isEmpty();
  }

  @Test
  void idsTheUserNamespaceCannotMapAreRefused() throws Exception {
    Path rootfs = Files.createDirectories(temp.resolve("ids/etc"));
    Files.writeString(rootfs.resolve("owned-by-70000"), "x");
    Files.setAttribute(rootfs.resolve("owned-by-70000"), "unix:uid", 70_000);
    Path archive = TestImages.tar(rootfs.getParent(), temp.resolve("ids.tar"));

    assertThatThrownBy(() -> store.importArchive("ids", archive, progress::add))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("owned by uid 70000, outside the ids a sandbox maps");
    assertThat(store.find("ids")).isEmpty();
  }

  @Test
  void anImageWithoutAnyProgramStillServesFilesAndNamesWhatIsMissing() throws Exception {
    Path rootfs = Files.createDirectories(temp.resolve("noshell/etc"));
    Files.writeString(rootfs.resolve("hostname"), "x\n");
    store.importArchive(
        "noshell", TestImages.tar(rootfs.getParent(), temp.resolve("noshell.tar")), progress::add);

    LocalSandbox noShell =
        LocalSandbox.builder().home(home).image("noshell").workingDirectory("/work").build();
    Workspace ws = Workspace.of(noShell.newBackend());
    assertThatThrownBy(() -> ws.run(Command.shell("true")))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("has no /bin/sh (its image 'noshell' does not provide it)");
    assertThat(ws.run(Command.argv("true")).exitCode()).as("no true either").isEqualTo(127);
    ws.writeText("note", "kept\n");
    assertThat(ws.readText("/work/note")).isEqualTo("kept\n");
  }

  @Test
  void manyLayersMountTopLastInTheOrderGiven() throws Exception {
    Path layers = Files.createDirectories(temp.resolve("many/layers"));
    List<Path> bottomFirst = new java.util.ArrayList<>();
    for (int i = 0; i < 45; i++) {
      Path layer =
          Files.createDirectories(layers.resolve(ImageStore.sha256Hex(new byte[] {(byte) i})));
      Files.writeString(layer.resolve("top"), "layer " + i);
      Files.writeString(layer.resolve("only-" + i), "x");
      bottomFirst.add(layer);
    }
    OverlayMarks.mknodWhiteout(bottomFirst.getLast().resolve("only-0"));
    Path upper = Files.createDirectories(temp.resolve("many/upper"));
    Path work = Files.createDirectories(temp.resolve("many/work"));
    Path root = Files.createDirectories(temp.resolve("many/root"));
    // 45 absolute paths of ~100 bytes exceed a page: the mount names them relative to layers/.
    assertThat(bottomFirst.stream().mapToInt(p -> p.toString().length() + 1).sum())
        .isGreaterThan(4096);

    Overlay.mount(bottomFirst, upper, work, root);
    try {
      assertThat(root.resolve("top")).hasContent("layer 44");
      assertThat(root.resolve("only-1")).exists();
      assertThat(root.resolve("only-0")).as("hidden by the top layer's whiteout").doesNotExist();
    } finally {
      Overlay.unmount(root);
    }
  }

  // ---- helpers

  /**
   * Layer 1: busybox rootfs with /data/{keep,gone.txt}, /opq/{old1,old2}, /replaced/inner. Layer 2:
   * deletes /data/gone.txt, makes /opq opaque and adds /opq/new, replaces directory /replaced by a
   * new one (whiteout plus same name: must hide /replaced/inner).
   */
  private List<Path> twoLayers() throws Exception {
    Path first = TestImages.busyboxRootfs(temp.resolve("layer1"));
    Files.createDirectories(first.resolve("data"));
    Files.writeString(first.resolve("data/keep"), "keep\n");
    Files.writeString(first.resolve("data/gone.txt"), "gone\n");
    Files.createDirectories(first.resolve("opq"));
    Files.writeString(first.resolve("opq/old1"), "1");
    Files.writeString(first.resolve("opq/old2"), "2");
    Files.createDirectories(first.resolve("replaced"));
    Files.writeString(first.resolve("replaced/inner"), "inner");
    Path second = Files.createDirectories(temp.resolve("layer2"));
    Files.createDirectories(second.resolve("data"));
    Files.writeString(second.resolve("data/.wh.gone.txt"), "");
    Files.createDirectories(second.resolve("opq"));
    Files.writeString(second.resolve("opq/.wh..wh..opq"), "");
    Files.writeString(second.resolve("opq/new"), "new");
    Files.createDirectories(second.resolve("replaced"));
    Files.writeString(second.resolve(".wh.replaced"), "");
    Files.writeString(second.resolve("replaced/fresh"), "fresh");
    return List.of(
        TestImages.tar(first, temp.resolve("layer1.tar")),
        TestImages.tar(second, temp.resolve("layer2.tar")));
  }

  private static void assertOverlayMarkers(Path upperLayer) throws IOException {
    Path whiteout = upperLayer.resolve("data/gone.txt");
    assertThat(unix(whiteout, "mode") & 0170000).as("a character device").isEqualTo(0020000);
    assertThat((Long) Files.getAttribute(whiteout, "unix:rdev", NOFOLLOW)).isZero();
    assertThat(upperLayer.resolve("data/.wh.gone.txt")).doesNotExist();
    assertThat(OverlayMarks.isOpaque(upperLayer.resolve("opq"))).isTrue();
    assertThat(upperLayer.resolve("opq/.wh..wh..opq")).doesNotExist();
    assertThat(OverlayMarks.isOpaque(upperLayer.resolve("replaced"))).isTrue();
    assertThat(OverlayMarks.isOpaque(upperLayer.resolve("data"))).isFalse();
  }

  private void assertWhiteoutsTookEffect(String image) {
    CommandResult r = runIn(image, "ls /data; echo --; ls /opq; echo --; ls /replaced");
    assertThat(r.stdoutText()).isEqualTo("keep\n--\nnew\n--\nfresh\n");
  }

  private CommandResult runIn(String image, String script) {
    LocalSandbox onImage = LocalSandbox.builder().home(home).image(image).build();
    Workspace ws = Workspace.of(onImage.newBackend());
    try {
      CommandResult r = ws.run(Command.shell(script));
      assertThat(r.exitCode()).as(r.stderrText()).isZero();
      return r;
    } finally {
      ws.ref().ifPresent(onImage::destroy);
    }
  }

  private static int unix(Path path, String attribute) throws IOException {
    return (Integer) Files.getAttribute(path, "unix:" + attribute, NOFOLLOW);
  }
}
