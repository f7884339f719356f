package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.registry.RegistryException;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.SnapshotInfo;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 20: pushing local images and snapshots to a real registry ({@link TestRegistry}), checked
 * with skopeo and GNU tar, clients independent of ours; and snapshots that go to a registry and
 * come back.
 */
class RegistryPushTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @TempDir Path temp;

  private Path home;
  private LocalSandbox sandboxes;
  private TestRegistry registry;
  private final List<String> progress = new CopyOnWriteArrayList<>();

  @BeforeEach
  void setUp() throws Exception {
    Prerequisites.requireLocalEngine();
    TestImages.requireBusybox();
    TestRegistry.requireRegistry();
    home = TestImages.privateHome(temp);
    sandboxes = LocalSandbox.builder().home(home).progress(progress::add).build();
  }

  @AfterEach
  void tearDown() throws Exception {
    if (registry != null) {
      registry.close();
    }
    TestImages.destroyAllAndDelete(sandboxes, home);
  }

  @Test
  void aPushedImageIsAnOciImageWithTheImagesOwnIdsAndOciWhiteouts() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    importRootfs(
        "rich",
        rootfs -> {
          Path tool = rootfs.resolve("bin/setuid-tool");
          Files.writeString(tool, "#!/bin/sh\n");
          Files.setAttribute(tool, "unix:mode", 04755);
          Files.writeString(rootfs.resolve("bin/hard-a"), "two names\n");
          Files.createLink(rootfs.resolve("bin/hard-b"), rootfs.resolve("bin/hard-a"));
          Path secret = rootfs.resolve("home/sandbox/private.txt");
          Files.writeString(secret, "mine\n");
          Files.setAttribute(secret, "unix:uid", 1000);
          Files.setAttribute(secret, "unix:gid", 1000);
          Files.setAttribute(secret, "unix:mode", 0640);
        });
    RegistryImages.Image whiteouts = RegistryImages.withWhiteouts(temp.resolve("whiteouts"));
    sandboxes
        .engine()
        .images()
        .importArchive(
            "wh", TestImages.tar(whiteouts.layout(), temp.resolve("whiteouts.tar")), progress::add);

    String pushed = sandboxes.pushImage("rich", registry.host() + "/push/rich:1");
    sandboxes.pushImage("wh", registry.host() + "/push/wh:1");

    assertThat(pushed)
        .isEqualTo(registry.host() + "/push/rich:1@" + registry.manifestDigest("push/rich:1"));
    JsonNode manifest = JSON.readTree(registry.rawManifest("push/rich:1"));
    assertThat(manifest.path("mediaType").asText())
        .isEqualTo("application/vnd.oci.image.manifest.v1+json");
    assertThat(manifest.path("layers").get(0).path("mediaType").asText())
        .isEqualTo("application/vnd.oci.image.layer.v1.tar+gzip");
    JsonNode config = JSON.readTree(registry.rawConfig("push/rich:1"));
    assertThat(config.path("os").asText()).isEqualTo("linux");
    assertThat(config.path("architecture").asText()).isEqualTo(RegistryImages.hostArchitecture());
    assertThat(config.path("rootfs").path("diff_ids")).hasSize(1);
    // An image of Sandbox4j's own says how the engine runs it.
    assertThat(config.path("config").path("User").asText()).isEqualTo("1000:1000");
    assertThat(config.path("config").path("WorkingDir").asText()).isEqualTo("/home/sandbox");
    assertThat(texts(config.path("config").path("Env")))
        .contains("HOME=/home/sandbox", "USER=sandbox", "LANG=C.UTF-8")
        .anyMatch(e -> e.startsWith("PATH=/usr/local/sbin:"));

    List<List<String>> rich = layerListings("push/rich:1");
    assertThat(rich).hasSize(1);
    List<String> listing = rich.getFirst();
    assertThat(listing)
        .anyMatch(l -> l.matches("-rwsr-xr-x 0/0 .* bin/setuid-tool"))
        .anyMatch(l -> l.matches("-rw-r----- 1000/1000 .* home/sandbox/private\\.txt"))
        .anyMatch(l -> l.matches("drwxr-xr-x 1000/1000 .* home/sandbox/"))
        .anyMatch(l -> l.matches("drwxrwxrwt 0/0 .* tmp/"))
        .anyMatch(l -> l.matches("lrwxrwxrwx 0/0 .* bin/sh -> busybox"))
        .anyMatch(
            l ->
                l.matches("h.* bin/hard-b link to bin/hard-a")
                    || l.matches("h.* bin/hard-a link to bin/hard-b"));
    assertThat(listing).as("no host ids").noneMatch(l -> l.matches("\\S+ 1\\d{5}/.*"));

    List<List<String>> wh = layerListings("push/wh:1");
    assertThat(wh).hasSize(2);
    assertThat(wh.get(0)).noneMatch(l -> l.contains(".wh."));
    assertThat(wh.get(1))
        .anyMatch(l -> l.matches("-\\S+ 0/0 +0 .* srv/\\.wh\\.deleted\\.txt"))
        .anyMatch(l -> l.matches("-\\S+ 0/0 +0 .* opaque/\\.wh\\.\\.wh\\.\\.opq"))
        .anyMatch(l -> l.endsWith(" opaque/new.txt"));
    // An image that came with a config keeps it.
    JsonNode whConfig = JSON.readTree(registry.rawConfig("push/wh:1")).path("config");
    assertThat(texts(whConfig.path("Cmd"))).containsExactly("/bin/sh");
    assertThat(whConfig.has("User")).isFalse();
  }

  @Test
  void aSnapshotPushedRemovedAndPulledBackKeepsItsFiles() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    importRootfs(
        "base",
        rootfs -> {
          Path doomed = rootfs.resolve("home/sandbox/doomed.txt");
          Files.writeString(doomed, "deleted in the sandbox\n");
          Files.setAttribute(doomed, "unix:uid", 1000);
        });
    LocalSandbox onBase =
        LocalSandbox.builder().home(home).image("base").progress(progress::add).build();
    Workspace source = Workspace.of(onBase.newBackend());
    check(
        source,
        "cd /home/sandbox && echo hello > note.txt && ln -s note.txt link"
            + " && echo secret > private.txt && chmod 0640 private.txt"
            + " && mkdir -p deep/er && echo down > deep/er/file && rm doomed.txt");
    WorkspaceRef ref = source.ref().orElseThrow();
    SnapshotInfo snapshot = onBase.snapshot(ref, "snap");
    onBase.destroy(ref);

    String reference = registry.host() + "/snaps/mine:1";
    String pushed = sandboxes.pushImage("snap", reference);

    JsonNode labels = JSON.readTree(registry.rawConfig("snaps/mine:1")).path("config");
    labels = labels.path("Labels");
    assertThat(labels.path("dev.sandbox4j.snapshot.cpus").asText())
        .isEqualTo(Integer.toString(snapshot.cpus()));
    assertThat(labels.path("dev.sandbox4j.snapshot.memory-bytes").asText())
        .isEqualTo(Long.toString(snapshot.memoryBytes()));
    assertThat(labels.path("dev.sandbox4j.snapshot.pids").asText())
        .isEqualTo(Integer.toString(snapshot.pids()));
    assertThat(labels.path("dev.sandbox4j.snapshot.disk-bytes").asText())
        .isEqualTo(Long.toString(snapshot.diskBytes()));

    assertThat(sandboxes.removeSnapshot("snap")).isTrue();
    assertThat(sandboxes.removeImage("base")).isTrue();
    assertThat(sandboxes.images()).isEmpty();
    try (Stream<Path> layers = Files.list(home.resolve("images/layers"))) {
      assertThat(layers).as("nothing of the snapshot is left here").isEmpty();
    }

    ImageInfo pulled = sandboxes.pullImage(reference);
    assertThat(pulled.reference() + "@" + pulled.digest()).isEqualTo(pushed);
    LocalSandbox onPulled =
        LocalSandbox.builder().home(home).image(pulled.name()).progress(progress::add).build();
    Workspace copy = Workspace.of(onPulled.newBackend());
    try {
      String out =
          check(
              copy,
              "cd /home/sandbox && cat note.txt deep/er/file private.txt && readlink link"
                  + " && stat -c '%a %u %g %n' private.txt note.txt deep"
                  + " && if [ -e doomed.txt ]; then echo doomed is back; fi");
      assertThat(out)
          .isEqualTo(
              """
              hello
              down
              secret
              note.txt
              640 1000 1000 private.txt
              644 1000 1000 note.txt
              755 1000 1000 deep
              """);
      assertThat(check(copy, "stat -c '%u %g' /bin/busybox")).isEqualTo("0 0\n");
    } finally {
      copy.ref().ifPresent(onPulled::destroy);
    }
  }

  @Test
  void aSnapshotOfASandboxThatRanAsItsImageSaidIsPushedWithThatIdentity() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    RegistryImages.Configured configured =
        RegistryImages.configured(temp.resolve("configured"), RegistryImages.NUMERIC_USER);
    registry.push(configured.image().layout(), "apps/configured:1");
    LocalSandbox onImage =
        LocalSandbox.builder()
            .home(home)
            .image(registry.host() + "/apps/configured:1")
            .progress(progress::add)
            .build();
    Workspace source = Workspace.of(onImage.newBackend());
    // /srv/app is the image's root's: its user writes where it may
    check(source, "echo kept > /tmp/made-here.txt");
    WorkspaceRef ref = source.ref().orElseThrow();
    onImage.snapshot(ref, "configured-snap");
    onImage.destroy(ref);

    String reference = registry.host() + "/snaps/configured:1";
    sandboxes.pushImage("configured-snap", reference);
    JsonNode config = JSON.readTree(registry.rawConfig("snaps/configured:1")).path("config");
    assertThat(config.path("User").asText()).isEqualTo(RegistryImages.NUMERIC_USER);
    assertThat(config.path("WorkingDir").asText()).isEqualTo("/srv/app");

    assertThat(sandboxes.removeSnapshot("configured-snap")).isTrue();
    ImageInfo pulled = sandboxes.pullImage(reference);
    LocalSandbox onPulled =
        LocalSandbox.builder().home(home).image(pulled.name()).progress(progress::add).build();
    Workspace copy = Workspace.of(onPulled.newBackend());
    try {
      assertThat(check(copy, "id -u; id -g; pwd; echo $GREETING; cat /tmp/made-here.txt"))
          .isEqualTo("1234\n1234\n/srv/app\nhello\nkept\n");
    } finally {
      copy.ref().ifPresent(onPulled::destroy);
    }
  }

  @Test
  void pushingAgainUploadsNothing() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    int megabytes = 64;
    importRootfs(
        "big",
        rootfs -> {
          byte[] random = new byte[1 << 20];
          Random seeded = new Random(20);
          try (OutputStream out = Files.newOutputStream(rootfs.resolve("random.bin"))) {
            for (int i = 0; i < megabytes; i++) {
              seeded.nextBytes(random);
              out.write(random);
            }
          }
        });
    String reference = registry.host() + "/big/image:1";

    String first = sandboxes.pushImage("big", reference);
    progress.stream()
        .filter(l -> l.contains("upload"))
        .forEach(l -> System.out.println("[push] " + l));
    assertThat(progress).anyMatch(l -> l.startsWith("layer 1/1") && l.contains("uploaded"));
    progress.clear();
    String second = sandboxes.pushImage("big", reference);

    assertThat(second).isEqualTo(first);
    assertThat(progress)
        .anyMatch(l -> l.startsWith("layer 1/1") && l.endsWith("already in the registry"))
        .anyMatch(l -> l.equals("image config: already in the registry"))
        .noneMatch(l -> l.contains("uploading"))
        .as("the layer's digest is remembered from the first push")
        .noneMatch(l -> l.endsWith("exporting"))
        .anyMatch(l -> l.startsWith("pushed ") && l.contains("0.0 MiB uploaded"));

    // The layer made again under its id (as a recipe step after a gc): exported again, not trusted.
    Path layer = sandboxes.engine().images().find("big").orElseThrow().layers().getFirst();
    Path copy = layer.resolveSibling("copy");
    TestImages.run(List.of("cp", "-a", layer.toString(), copy.toString()));
    TestImages.run(List.of("rm", "-rf", layer.toString()));
    Files.move(copy, layer);
    progress.clear();
    assertThat(sandboxes.pushImage("big", reference)).isEqualTo(first);
    assertThat(progress)
        .anyMatch(l -> l.equals("layer 1/1: exporting"))
        .anyMatch(l -> l.startsWith("layer 1/1") && l.endsWith("already in the registry"));

    // Another repository does not have the blob (a registry links blobs per repository).
    progress.clear();
    String other = sandboxes.pushImage("big", registry.host() + "/big/other:1");
    assertThat(other).endsWith(first.substring(first.indexOf('@')));
    assertThat(progress).anyMatch(l -> l.startsWith("layer 1/1") && l.contains("uploaded"));
  }

  @Test
  void aBasicAuthRegistryTakesAPushWithTheRightCredentialsOnly() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.BASIC);
    importRootfs("app", rootfs -> {});
    String reference = registry.host() + "/private/app:1";

    assertThatThrownBy(() -> sandboxes.pushImage("app", reference))
        .isInstanceOf(RegistryException.class)
        .hasMessageContaining("registry " + registry.host() + " needs credentials")
        .hasMessageContaining("sandbox4j image push --registry-auth " + registry.host());
    LocalSandbox wrong =
        LocalSandbox.builder()
            .home(home)
            .registryAuth(registry.host(), registry.user(), "not-the-password")
            .build();
    assertThatThrownBy(() -> wrong.pushImage("app", reference))
        .isInstanceOf(RegistryException.class)
        .hasMessageContaining("refused the credentials of user " + registry.user())
        .hasMessageContaining("LocalSandbox.Builder.registryAuth");

    LocalSandbox right =
        LocalSandbox.builder()
            .home(home)
            .registryAuth(registry.host(), registry.user(), registry.password())
            .build();
    String pushed = right.pushImage("app", reference);
    assertThat(pushed).endsWith("@" + registry.manifestDigest("private/app:1"));
  }

  @Test
  void aTokenAuthRegistryTakesAPushWithATokenForPush() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.TOKEN);
    importRootfs("app", rootfs -> {});
    String reference = registry.host() + "/private/app:1";
    LocalSandbox right =
        LocalSandbox.builder()
            .home(home)
            .registryAuth(registry.host(), registry.user(), registry.password())
            .build();

    // Pulled first: a token for pull only is cached, and must not be used for the push.
    assertThatThrownBy(() -> right.pullImage(reference))
        .hasMessageContaining("was not found in registry");
    String pushed = right.pushImage("app", reference);

    assertThat(pushed).endsWith("@" + registry.manifestDigest("private/app:1"));
    assertThat(layerListings("private/app:1").getFirst()).anyMatch(l -> l.endsWith(" bin/busybox"));
  }

  @Test
  void aReferenceWithADigestOrAnImageNotHereIsRefused() {
    assertThatThrownBy(
            () -> sandboxes.pushImage("default", "localhost:5000/a@sha256:" + "0".repeat(64)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("push to a reference with a tag and no digest");
    assertThatThrownBy(() -> sandboxes.pushImage("nothing-here", "localhost:5000/a:1"))
        .hasMessageContaining("no image 'nothing-here' here");
  }

  /** What a test does to a busybox root filesystem before it is imported. */
  private interface Customizer {
    void accept(Path rootfs) throws IOException;
  }

  /** A busybox root filesystem, customized, imported as image {@code name}: one layer. */
  private void importRootfs(String name, Customizer customizer) throws Exception {
    Path rootfs = TestImages.busyboxRootfs(temp.resolve("rootfs-" + name));
    customizer.accept(rootfs);
    Path archive = TestImages.tar(rootfs, temp.resolve(name + ".tar.gz"), "--gzip");
    ImageStore store = sandboxes.engine().images();
    store.importArchive(name, archive, progress::add);
  }

  /**
   * The image {@code repoAndTag} names, copied out of the registry by skopeo: each layer, bottom
   * first, as {@code tar -tvz --numeric-owner} lists it (spaces squeezed).
   */
  private List<List<String>> layerListings(String repoAndTag) throws Exception {
    Path layout = temp.resolve("copied-" + repoAndTag.replaceAll("[/:]", "-"));
    registry.copyToLayout(repoAndTag, layout);
    JsonNode index = JSON.readTree(layout.resolve("index.json").toFile());
    String manifestDigest = index.path("manifests").get(0).path("digest").asText();
    JsonNode manifest = JSON.readTree(blob(layout, manifestDigest).toFile());
    List<List<String>> listings = new ArrayList<>();
    for (JsonNode layer : manifest.path("layers")) {
      String listing =
          TestImages.run(
              List.of(
                  "tar",
                  "-t",
                  "-v",
                  "-z",
                  "--numeric-owner",
                  "-f",
                  blob(layout, layer.path("digest").asText()).toString()));
      listings.add(listing.lines().map(l -> l.replaceAll(" +", " ")).toList());
    }
    return listings;
  }

  private static Path blob(Path layout, String digest) {
    return layout.resolve("blobs/sha256").resolve(digest.substring("sha256:".length()));
  }

  private static List<String> texts(JsonNode array) {
    List<String> out = new ArrayList<>();
    array.forEach(n -> out.add(n.asText()));
    return out;
  }

  private static String check(Workspace ws, String script) {
    CommandResult r = ws.run(Command.shell(script));
    assertThat(r.exitCode()).as(r.stderrText()).isZero();
    return r.stdoutText();
  }
}
