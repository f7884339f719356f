package dev.sandbox4j.runtime.internal.image;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.TestImages;
import dev.sandbox4j.runtime.internal.linux.OverlayMarks;
import java.io.IOException;
import java.io.InputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.List;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A store layer written as an OCI layer tarball, read back by GNU tar: ids shifted back, overlayfs
 * markers as OCI whiteouts, what is left out, what is refused, and the same bytes every time.
 */
class LayerExportTest {
  private static final int ROOT = Image.UID_SHIFT;
  private static final int USER = Image.UID_SHIFT + 1000;

  @TempDir Path temp;

  private Path layer;

  @BeforeEach
  void setUp() throws Exception {
    Prerequisites.requireLocalEngine(); // root: owners, whiteouts, trusted.* attributes
    layer = Files.createDirectory(temp.resolve("layer"));
    Path etc = dir("etc", ROOT, 0755);
    file("etc/kept", ROOT, 0644, "kept\n");
    OverlayMarks.mknodWhiteout(etc.resolve("gone")); // owned by host root, as overlayfs makes them
    OverlayMarks.setOpaque(dir("opq", ROOT, 0755));
    file("opq/new", ROOT, 0644, "new\n");
    dir("home", ROOT, 0755);
    dir("home/sandbox", USER, 0750);
    file("home/sandbox/private", USER, 0640, "mine\n");
    file("home/sandbox/café.txt", USER, 0644, "ü\n");
    dir("bin", ROOT, 0755);
    file("bin/su", ROOT, 04755, "#!/bin/sh\n");
    file("bin/one", ROOT, 0755, "two names\n");
    Files.createLink(layer.resolve("bin/two"), layer.resolve("bin/one"));
    Files.createSymbolicLink(layer.resolve("bin/sh"), Path.of("busybox"));
    Files.setAttribute(layer.resolve("bin/sh"), "unix:uid", ROOT, LinkOption.NOFOLLOW_LINKS);
    Files.setAttribute(layer.resolve("bin/sh"), "unix:gid", ROOT, LinkOption.NOFOLLOW_LINKS);
    Path run = dir("run", ROOT, 0755);
    TestImages.run(List.of("mkfifo", run.resolve("fifo").toString()));
    own(run.resolve("fifo"), ROOT);
    try (ServerSocketChannel socket = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
      socket.bind(UnixDomainSocketAddress.of(run.resolve("socket")));
    }
    TestImages.run(List.of("mknod", run.resolve("null").toString(), "c", "1", "3"));
    own(layer, ROOT);
  }

  @Test
  void aLayerBecomesAnOciLayerWithTheImagesIdsAndWhiteouts() throws Exception {
    LayerExport.Exported exported = LayerExport.export(layer, temp.resolve("layer.tar.gz"));

    List<String> listing = list(exported.file());
    assertThat(listing)
        .containsSubsequence(
            "drwxr-xr-x 0/0 bin/",
            "-rwxr-xr-x 0/0 bin/one",
            "lrwxrwxrwx 0/0 bin/sh -> busybox",
            "-rwsr-xr-x 0/0 bin/su",
            "hrwxr-xr-x 0/0 bin/two link to bin/one",
            "drwxr-xr-x 0/0 etc/",
            "---------- 0/0 etc/.wh.gone",
            "-rw-r--r-- 0/0 etc/kept",
            "drwxr-xr-x 0/0 home/",
            "drwxr-x--- 1000/1000 home/sandbox/",
            "-rw-r--r-- 1000/1000 home/sandbox/café.txt",
            "-rw-r----- 1000/1000 home/sandbox/private",
            "drwxr-xr-x 0/0 opq/",
            "---------- 0/0 opq/.wh..wh..opq",
            "-rw-r--r-- 0/0 opq/new",
            "drwxr-xr-x 0/0 run/",
            "prw-r--r-- 0/0 run/fifo");
    assertThat(listing).noneMatch(l -> l.contains("run/socket") || l.contains("run/null"));
    assertThat(exported.skipped()).isEqualTo(2);
    assertThat(exported.size()).isEqualTo(Files.size(exported.file()));
    assertThat(exported.digest()).isEqualTo("sha256:" + ImageArchive.sha256File(exported.file()));
    try (InputStream tar = new GZIPInputStream(Files.newInputStream(exported.file()))) {
      assertThat(exported.diffId()).isEqualTo("sha256:" + ImageStore.sha256Hex(tar.readAllBytes()));
    }

    LayerExport.Exported again = LayerExport.export(layer, temp.resolve("again.tar.gz"));
    assertThat(again.digest()).as("the same layer, the same bytes").isEqualTo(exported.digest());
  }

  @Test
  void aFileOwnedByAnIdOutsideTheImagesBlockIsRefused() throws Exception {
    Files.setAttribute(layer.resolve("etc/kept"), "unix:uid", 0);

    assertThatThrownBy(() -> LayerExport.export(layer, temp.resolve("layer.tar.gz")))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining(layer.resolve("etc/kept") + ": it is owned by host uid 0")
        .hasMessageContaining("100000..165535");
  }

  @Test
  void aNameThatIsNotValidInTheJvmsEncodingIsRefusedNotChanged() throws Exception {
    TestImages.run(
        List.of("sh", "-c", "touch \"$1/$(printf 'bad\\377name')\"", "sh", layer.toString()));

    assertThatThrownBy(() -> LayerExport.export(layer, temp.resolve("layer.tar.gz")))
        .isInstanceOf(ImageBuildException.class)
        .hasMessageContaining("its name is not valid");
  }

  /** {@code tar -tv}'s lines without sizes and times: MODE UID/GID NAME[ -> TARGET]. */
  private static List<String> list(Path tarball) throws Exception {
    return TestImages.run(
            List.of("tar", "-t", "-v", "-z", "--numeric-owner", "-f", tarball.toString()))
        .lines()
        .map(l -> l.split(" +", 6))
        .map(f -> f[0] + " " + f[1] + " " + f[5])
        .toList();
  }

  private Path dir(String name, int owner, int mode) throws IOException {
    Path dir = Files.createDirectory(layer.resolve(name));
    own(dir, owner);
    Files.setAttribute(dir, "unix:mode", mode);
    return dir;
  }

  private void file(String name, int owner, int mode, String content) throws IOException {
    Path file = Files.writeString(layer.resolve(name), content);
    own(file, owner);
    Files.setAttribute(file, "unix:mode", mode); // after the chown, which clears setuid
  }

  private static void own(Path path, int id) throws IOException {
    Files.setAttribute(path, "unix:uid", id, LinkOption.NOFOLLOW_LINKS);
    Files.setAttribute(path, "unix:gid", id, LinkOption.NOFOLLOW_LINKS);
  }
}
