package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.image.ImageStore;
import dev.sandbox4j.runtime.internal.registry.ImageReference;
import dev.sandbox4j.runtime.internal.registry.RegistryException;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.Workspace;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 20: pulling images from a real registry (Debian's docker-registry on loopback, started by
 * {@link TestRegistry}) that skopeo, a client independent of ours, filled with images made here
 * from busybox ({@link RegistryImages}); then sandboxes on them.
 */
class RegistryPullTest {
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
  void anImagePulledByReferenceRunsSandboxesAndKeepsItsReferenceAndDigest() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    RegistryImages.Configured configured =
        RegistryImages.configured(temp.resolve("configured"), RegistryImages.NUMERIC_USER);
    registry.push(configured.image().layout(), "tools/app:1.0");
    String reference = registry.host() + "/tools/app:1.0";

    ImageInfo pulled = sandboxes.pullImage(reference);

    assertThat(pulled.reference()).isEqualTo(reference);
    assertThat(pulled.digest()).isEqualTo(configured.image().digest());
    assertThat(pulled.name()).startsWith("app-1.0-");
    assertThat(sandboxes.images()).contains(pulled);
    assertThat(progress).anyMatch(l -> l.startsWith("pulled " + reference + ": 1 layer(s)"));
    assertThat(progress).as("nothing was there to resume").noneMatch(l -> l.contains("resuming"));
    ImageStore.Origin origin =
        sandboxes.engine().images().find(pulled.name()).orElseThrow().origin();
    assertThat(origin.config().workingDir()).isEqualTo("/srv/app");
    assertThat(origin.config().user()).isEqualTo(RegistryImages.NUMERIC_USER);
    assertThat(origin.config().env()).contains("GREETING=hello");

    // By reference (as pulled) or by its local name: the same image, no second download.
    progress.clear();
    assertThat(run(reference, "cat /srv/app/hello.txt").stdoutText())
        .isEqualTo("hello from /srv/app\n");
    assertThat(run(pulled.name(), "cat /srv/app/hello.txt").stdoutText())
        .isEqualTo("hello from /srv/app\n");
    assertThat(progress).noneMatch(l -> l.startsWith("pulling"));

    // Pulled again unchanged: kept as it is.
    sandboxes.pullImage(reference);
    assertThat(progress).anyMatch(l -> l.contains("is up to date (" + pulled.digest() + ")"));

    assertThat(sandboxes.removeImage(reference)).isTrue();
    assertThat(sandboxes.images()).noneMatch(i -> reference.equals(i.reference()));
  }

  @Test
  void aPulledImagesUserWorkingDirAndEnvApplyUnlessTheBuilderSaysOtherwise() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    registry.push(
        RegistryImages.configured(temp.resolve("numeric"), RegistryImages.NUMERIC_USER)
            .image()
            .layout(),
        "config/numeric:1");
    registry.push(
        RegistryImages.configured(temp.resolve("named"), RegistryImages.NAMED_USER)
            .image()
            .layout(),
        "config/named:1");
    String who = "id -u; id -g; pwd; echo $GREETING $HOME";

    assertThat(run(registry.host() + "/config/numeric:1", who).stdoutText())
        .isEqualTo("1234\n1234\n/srv/app\nhello /\n");
    assertThat(run(registry.host() + "/config/named:1", who).stdoutText())
        .as("a name from the image's /etc/passwd")
        .isEqualTo("1000\n1000\n/srv/app\nhello /home/sandbox\n");

    Workspace overridden =
        Workspace.of(
            LocalSandbox.builder()
                .home(home)
                .image(registry.host() + "/config/named:1")
                .user("0")
                .workingDirectory("/tmp")
                .env("GREETING", "bye")
                .build()
                .newBackend());
    CommandResult r = overridden.run(Command.shell(who));
    assertThat(r.stdoutText()).as(r.stderrText()).isEqualTo("0\n0\n/tmp\nbye /root\n");
    // what a listing shows: the sandbox's own working directory, its image's
    assertThat(sandboxes.info(overridden.ref().orElseThrow()).orElseThrow().workingDirectory())
        .isEqualTo("/srv/app");
  }

  @Test
  void aReferenceNotHereIsPulledWhenTheFirstSandboxIsCreated() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    RegistryImages.Image image = RegistryImages.withWhiteouts(temp.resolve("whiteouts"));
    registry.push(image.layout(), "layers/whiteouts:latest");

    // No tag: latest, as docker reads it.
    CommandResult r =
        run(
            registry.host() + "/layers/whiteouts",
            "cat /srv/kept.txt /opaque/new.txt; ls -a /opaque; ls /srv");

    assertThat(progress).anyMatch(l -> l.startsWith("pulling " + registry.host()));
    List<String> lines = r.stdoutText().lines().toList();
    for (Map.Entry<String, String> file : image.files().entrySet()) {
      assertThat(r.stdoutText()).contains(file.getValue().strip());
    }
    assertThat(lines).doesNotContain("old.txt", "deleted.txt", ".wh..wh..opq", ".wh.deleted.txt");
    assertThat(lines).contains("new.txt", "kept.txt");
  }

  @Test
  void anIndexGivesTheManifestOfThisMachinesArchitecture() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    RegistryImages.MultiPlatform multi = RegistryImages.multiPlatform(temp.resolve("multi"));
    registry.push(multi.layout(), "multi/arch:2");
    String arch = RegistryImages.hostArchitecture();

    ImageInfo pulled = sandboxes.pullImage(registry.host() + "/multi/arch:2");

    assertThat(pulled.digest()).isEqualTo(multi.indexDigest());
    assertThat(run(pulled.name(), "cat /platform").stdoutText()).isEqualTo(arch + "\n");
    // Only this platform's layers were downloaded.
    String other =
        multi.byArchitecture().keySet().stream()
            .filter(a -> !a.equals(arch))
            .findFirst()
            .orElseThrow();
    String otherLayer = multi.byArchitecture().get(other).layers().getLast().digest();
    assertThat(progress).noneMatch(l -> l.contains(otherLayer.substring(7, 19)));
  }

  @Test
  void aZstdLayerIsPulledAndTwoImagesSharingALayerStoreItOnce() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    RegistryImages.Image zstd = RegistryImages.zstdLayer(temp.resolve("zstd"));
    registry.push(zstd.layout(), "comp/zstd:1");
    RegistryImages.SharingBase sharing = RegistryImages.sharingBase(temp.resolve("sharing"));
    registry.push(sharing.first().layout(), "shared/first:1");
    registry.push(sharing.second().layout(), "shared/second:1");

    ImageInfo z = sandboxes.pullImage(registry.host() + "/comp/zstd:1");
    assertThat(run(z.name(), "cat /zstd.txt").stdoutText())
        .isEqualTo(zstd.files().get("/zstd.txt"));

    Path layers = home.resolve("images/layers");
    long before = count(layers);
    sandboxes.pullImage(registry.host() + "/shared/first:1");
    assertThat(count(layers)).isEqualTo(before + 2);
    progress.clear();
    ImageInfo second = sandboxes.pullImage(registry.host() + "/shared/second:1");
    assertThat(count(layers)).as("the shared layer is stored once").isEqualTo(before + 3);
    String shared = sharing.sharedLayer().digest().substring(7, 19);
    assertThat(progress)
        .anyMatch(l -> l.contains(shared) && l.endsWith("already in the store"))
        .noneMatch(l -> l.contains(shared) && l.contains("downloaded"));
    assertThat(run(second.name(), "cat /which.txt").stdoutText()).isEqualTo("second\n");
  }

  @Test
  void aBlobWhoseBytesDoNotMatchItsDigestIsRefusedAndNothingIsPublished() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    RegistryImages.Image image = RegistryImages.zstdLayer(temp.resolve("zstd"));
    registry.push(image.layout(), "bad/blob:1");
    String layer = image.layers().getLast().digest().substring("sha256:".length());
    Path data =
        temp.resolve("registry/storage/docker/registry/v2/blobs/sha256")
            .resolve(layer.substring(0, 2))
            .resolve(layer)
            .resolve("data");
    byte[] bytes = Files.readAllBytes(data);
    bytes[bytes.length / 2] ^= 0x5a; // the same size, other bytes
    Files.write(data, bytes);

    assertThatThrownBy(() -> sandboxes.pullImage(registry.host() + "/bad/blob:1"))
        .isInstanceOf(RegistryException.class)
        .hasMessageContaining("sent blob sha256:" + layer)
        .hasMessageContaining("refused");
    assertThat(sandboxes.images()).isEmpty();
    try (Stream<Path> left = Files.list(home.resolve("images/.downloads"))) {
      assertThat(left.map(p -> p.getFileName().toString()))
          .as("the bad download is not kept for a resume")
          .noneMatch(n -> n.equals("sha256-" + layer));
    }
  }

  @Test
  void aDownloadLeftHalfwayIsResumedWhereItStopped() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    RegistryImages.LargeFile large = RegistryImages.largeLayer(temp.resolve("large"), 24 << 20);
    registry.push(large.image().layout(), "big/layer:1");
    // What a pull killed midway leaves: the first half of the big layer's blob in .downloads/.
    RegistryImages.Layer big = large.image().layers().getLast();
    String hex = big.digest().substring("sha256:".length());
    byte[] blob = Files.readAllBytes(large.image().layout().resolve("blobs/sha256/" + hex));
    Path downloads = Files.createDirectories(home.resolve("images/.downloads"));
    Files.write(downloads.resolve("sha256-" + hex), Arrays.copyOf(blob, blob.length / 2));

    ImageInfo pulled = sandboxes.pullImage(registry.host() + "/big/layer:1");

    assertThat(progress)
        .anyMatch(l -> l.contains(hex.substring(0, 12)) && l.contains("resuming at"));
    assertThat(run(pulled.name(), "sha256sum " + large.path()).stdoutText())
        .startsWith(large.sha256());
    assertThat(downloads.resolve("sha256-" + hex)).as("deleted once in the store").doesNotExist();
  }

  @Test
  void aTransferCutMidwayIsResumedWithARangeRequest() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    RegistryImages.LargeFile large = RegistryImages.largeLayer(temp.resolve("large"), 24 << 20);
    registry.push(large.image().layout(), "big/layer:1");
    String hex = large.image().layers().getLast().digest().substring("sha256:".length());
    try (CuttingProxy proxy = new CuttingProxy(registry.baseUri().getPort(), 8 << 20)) {
      ImageInfo pulled = sandboxes.pullImage("127.0.0.1:" + proxy.port() + "/big/layer:1");

      assertThat(proxy.cuts()).as("the proxy cut one transfer").isEqualTo(1);
      assertThat(proxy.rangeRequests()).as("the client asked for the rest").isPositive();
      assertThat(progress)
          .anyMatch(l -> l.contains(hex.substring(0, 12)) && l.contains("resuming (attempt 2"));
      assertThat(run(pulled.name(), "sha256sum " + large.path()).stdoutText())
          .startsWith(large.sha256());
    }
  }

  @Test
  void anImageLargerThanTheLimitAsDownloadedIsRefusedBeforeAnyDownload() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    RegistryImages.LargeFile large = RegistryImages.largeLayer(temp.resolve("large"), 6 << 20);
    registry.push(large.image().layout(), "big/noise:1");
    LocalSandbox limited =
        LocalSandbox.builder().home(home).progress(progress::add).maxImageSize(4 << 20).build();

    assertThatThrownBy(() -> limited.pullImage(registry.host() + "/big/noise:1"))
        .isInstanceOfSatisfying(
            ImageTooLargeException.class,
            e -> {
              assertThat(e.limitBytes()).isEqualTo(4 << 20);
              assertThat(e.sizeBytes()).isGreaterThan(6 << 20);
            })
        .hasMessageContaining(registry.host() + "/big/noise:1 is larger than this engine pulls")
        .hasMessageContaining("compressed")
        .hasMessageContaining("limit of 4.0 MiB");
    assertThat(limited.images()).isEmpty();
    assertThat(progress).noneMatch(l -> l.contains("downloaded"));
    assertThat(downloadsLeft()).isEmpty();
  }

  @Test
  void aLayerThatExpandsPastTheLimitIsRefusedBeforeItIsExtractedAndALargerLimitPullsIt()
      throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    RegistryImages.LargeFile zeros =
        RegistryImages.compressibleLayer(temp.resolve("zeros"), 48 << 20);
    registry.push(zeros.image().layout(), "bomb/zeros:1");
    String reference = registry.host() + "/bomb/zeros:1";
    long compressed = zeros.image().layers().stream().mapToLong(RegistryImages.Layer::size).sum();
    assertThat(compressed)
        .as("the blobs are small: only extracting shows the size")
        .isLessThan(8 << 20);
    LocalSandbox limited =
        LocalSandbox.builder().home(home).progress(progress::add).maxImageSize(16 << 20).build();

    assertThatThrownBy(() -> limited.pullImage(reference))
        .isInstanceOf(ImageTooLargeException.class)
        .hasMessageContaining("extracted, counted up to layer 2/2");
    assertThat(limited.images()).isEmpty();
    assertThat(progress).noneMatch(l -> l.startsWith("layer 2/2") && l.endsWith("extracting"));
    assertThat(downloadsLeft()).as("a refused pull keeps nothing to resume").isEmpty();

    // the same image under a limit it fits: pulled, and the file is all there
    LocalSandbox roomy =
        LocalSandbox.builder().home(home).progress(progress::add).maxImageSize(64 << 20).build();
    ImageInfo pulled = roomy.pullImage(reference);
    assertThat(run(pulled.name(), "sha256sum " + zeros.path()).stdoutText())
        .startsWith(zeros.sha256());
  }

  @Test
  void aPullThatWouldTakeTheDiskBelowItsReserveIsRefused() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.ANONYMOUS);
    RegistryImages.Image image = RegistryImages.zstdLayer(temp.resolve("zstd"));
    registry.push(image.layout(), "tools/small:1");
    long free = Files.getFileStore(temp).getUsableSpace();
    LocalSandbox reserving =
        LocalSandbox.builder().home(home).progress(progress::add).diskReserve(free).build();

    assertThatThrownBy(() -> reserving.pullImage(registry.host() + "/tools/small:1"))
        .isInstanceOfSatisfying(
            InsufficientDiskException.class, e -> assertThat(e.reserveBytes()).isEqualTo(free))
        .hasMessageContaining("keeps as its reserve");
    assertThat(reserving.images()).isEmpty();
    assertThat(downloadsLeft()).isEmpty();
  }

  /** The blobs left in the downloads directory (their lock files aside). */
  private List<String> downloadsLeft() throws IOException {
    Path downloads = home.resolve("images/.downloads");
    if (!Files.isDirectory(downloads)) {
      return List.of();
    }
    try (Stream<Path> left = Files.list(downloads)) {
      return left.map(p -> p.getFileName().toString()).filter(n -> !n.endsWith(".lock")).toList();
    }
  }

  @Test
  void aBasicAuthRegistryNeedsTheRightCredentials() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.BASIC);
    RegistryImages.Image image = RegistryImages.zstdLayer(temp.resolve("zstd"));
    registry.push(image.layout(), "private/app:1");
    String reference = registry.host() + "/private/app:1";

    assertThatThrownBy(() -> sandboxes.pullImage(reference))
        .isInstanceOf(RegistryException.class)
        .hasMessageContaining("registry " + registry.host() + " needs credentials")
        .hasMessageContaining("--registry-auth " + registry.host() + "=USER:PASSWORD");
    LocalSandbox wrong =
        LocalSandbox.builder()
            .home(home)
            .registryAuth(registry.host(), registry.user(), "not-the-password")
            .build();
    assertThatThrownBy(() -> wrong.pullImage(reference))
        .isInstanceOf(RegistryException.class)
        .hasMessageContaining("refused the credentials of user " + registry.user())
        .hasMessageContaining("LocalSandbox.Builder.registryAuth");
    assertThat(sandboxes.images()).isEmpty();

    LocalSandbox right =
        LocalSandbox.builder()
            .home(home)
            .registryAuth(registry.host(), registry.user(), registry.password())
            .build();
    ImageInfo pulled = right.pullImage(reference);
    assertThat(pulled.digest()).isEqualTo(image.digest());
  }

  @Test
  void aTokenAuthRegistryGivesATokenForTheRightCredentialsOnly() throws Exception {
    registry = TestRegistry.start(temp.resolve("registry"), TestRegistry.Auth.TOKEN);
    RegistryImages.Image image = RegistryImages.zstdLayer(temp.resolve("zstd"));
    registry.push(image.layout(), "private/app:1");
    String reference = registry.host() + "/private/app:1";

    // Anonymous: the token service gives a token without access, which the registry refuses.
    assertThatThrownBy(() -> sandboxes.pullImage(reference))
        .isInstanceOf(RegistryException.class)
        .hasMessageContaining("needs credentials");
    LocalSandbox wrong =
        LocalSandbox.builder()
            .home(home)
            .registryAuth(registry.host(), registry.user(), "not-the-password")
            .build();
    assertThatThrownBy(() -> wrong.pullImage(reference))
        .isInstanceOf(RegistryException.class)
        .hasMessageContaining("refused the credentials of user " + registry.user());

    LocalSandbox right =
        LocalSandbox.builder()
            .home(home)
            .progress(progress::add)
            .registryAuth(registry.host(), registry.user(), registry.password())
            .build();
    ImageInfo pulled = right.pullImage(reference);
    assertThat(pulled.digest()).isEqualTo(image.digest());
  }

  @Test
  void badReferencesAreRefusedByName() {
    assertThatThrownBy(() -> sandboxes.pullImage("Upper/Case"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("invalid image reference 'Upper/Case'");
    assertThatThrownBy(() -> sandboxes.pullImage("app@sha256:1234"))
        .hasMessageContaining("its digest must be sha256:");
    assertThat(ImageReference.parse("python").toString())
        .isEqualTo("docker.io/library/python:latest");
  }

  private CommandResult run(String image, String script) {
    LocalSandbox on =
        LocalSandbox.builder().home(home).image(image).progress(progress::add).build();
    Workspace ws = Workspace.of(on.newBackend());
    try {
      CommandResult r = ws.run(Command.shell(script));
      assertThat(r.exitCode()).as(r.stderrText()).isZero();
      return r;
    } finally {
      ws.ref().ifPresent(on::destroy);
    }
  }

  /**
   * A TCP proxy to the registry that closes, once, the first connection that has sent more than
   * {@code cutAfter} bytes back: a network that breaks in the middle of a big blob. It counts the
   * requests that ask for a range.
   */
  private static final class CuttingProxy implements AutoCloseable {
    private final ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    private final int upstreamPort;
    private final long cutAfter;
    private final AtomicInteger cuts = new AtomicInteger();
    private final AtomicInteger ranges = new AtomicInteger();
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();

    CuttingProxy(int upstreamPort, long cutAfter) throws IOException {
      this.upstreamPort = upstreamPort;
      this.cutAfter = cutAfter;
      Thread.ofVirtual().start(this::accept);
    }

    int port() {
      return server.getLocalPort();
    }

    int cuts() {
      return cuts.get();
    }

    int rangeRequests() {
      return ranges.get();
    }

    private void accept() {
      try {
        while (true) {
          Socket client = server.accept();
          Socket upstream = new Socket(InetAddress.getLoopbackAddress(), upstreamPort);
          sockets.add(client);
          sockets.add(upstream);
          Thread.ofVirtual().start(() -> pipeRequests(client, upstream));
          Thread.ofVirtual().start(() -> pipeResponses(upstream, client));
        }
      } catch (IOException closed) {
        // the proxy is closed
      }
    }

    private void pipeRequests(Socket from, Socket to) {
      byte[] buffer = new byte[64 * 1024];
      try (InputStream in = from.getInputStream();
          OutputStream out = to.getOutputStream()) {
        int n;
        while ((n = in.read(buffer)) > 0) {
          if (new String(buffer, 0, n, StandardCharsets.ISO_8859_1)
              .toLowerCase(Locale.ROOT)
              .contains("\r\nrange: bytes=")) {
            ranges.incrementAndGet();
          }
          out.write(buffer, 0, n);
        }
      } catch (IOException e) {
        // one side closed
      }
    }

    private void pipeResponses(Socket from, Socket to) {
      byte[] buffer = new byte[64 * 1024];
      long sent = 0;
      try (InputStream in = from.getInputStream();
          OutputStream out = to.getOutputStream()) {
        int n;
        while ((n = in.read(buffer)) > 0) {
          out.write(buffer, 0, n);
          sent += n;
          if (sent > cutAfter && cuts.compareAndSet(0, 1)) {
            to.close();
            from.close();
            return;
          }
        }
      } catch (IOException e) {
        // one side closed
      }
    }

    @Override
    public void close() throws IOException {
      server.close();
      for (Socket s : sockets) {
        s.close();
      }
    }
  }

  private static long count(Path dir) throws IOException {
    try (Stream<Path> s = Files.list(dir)) {
      return s.count();
    }
  }
}
