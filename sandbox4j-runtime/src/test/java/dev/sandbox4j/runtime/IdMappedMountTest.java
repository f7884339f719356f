package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.internal.engine.IdBlocks;
import dev.sandbox4j.runtime.internal.engine.Overlay;
import dev.sandbox4j.runtime.internal.image.Image;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The building block of distinct id ranges per sandbox (issue 13 item 4): a layer stored with the
 * canonical ids, mounted as an overlay lower through a detached idmapped clone ({@link
 * Overlay#mount(List, Path, Path, Path, int)}), shows its files owned by the sandbox's block,
 * without a chown, and keeps setuid; the layer itself is unchanged and nothing is left mounted but
 * the overlay.
 */
class IdMappedMountTest {
  @TempDir Path temp;

  @Test
  void anOverlayOfIdmappedLayersShowsTheCanonicalIdsAsTheSandboxsBlock() throws Exception {
    Prerequisites.requireLocalEngine();
    Path layer = Files.createDirectories(temp.resolve("layer/usr/bin"));
    Path sudo = Files.writeString(layer.resolve("sudo"), "binary");
    for (Path p : List.of(layer.getParent().getParent(), layer.getParent(), layer, sudo)) {
      Files.setAttribute(p, "unix:uid", Image.UID_SHIFT, LinkOption.NOFOLLOW_LINKS);
      Files.setAttribute(p, "unix:gid", Image.UID_SHIFT + 1000, LinkOption.NOFOLLOW_LINKS);
    }
    Files.setAttribute(sudo, "unix:mode", 04755);
    Path upper = Files.createDirectories(temp.resolve("upper"));
    Path work = Files.createDirectories(temp.resolve("work"));
    Path root = Files.createDirectories(temp.resolve("root"));
    int block = (int) IdBlocks.BASE + 7 * Image.ID_RANGE;
    Overlay.mount(List.of(layer.getParent().getParent()), upper, work, root, block);
    try {
      Path seen = root.resolve("usr/bin/sudo");
      assertThat(Files.getAttribute(seen, "unix:uid", LinkOption.NOFOLLOW_LINKS)).isEqualTo(block);
      assertThat(Files.getAttribute(seen, "unix:gid", LinkOption.NOFOLLOW_LINKS))
          .isEqualTo(block + 1000);
      assertThat((Integer) Files.getAttribute(seen, "unix:mode") & 04000)
          .as("setuid kept: the idmapped lowers are not nosuid")
          .isNotZero();
      assertThat(Files.getAttribute(sudo, "unix:uid")).isEqualTo(Image.UID_SHIFT);
      assertThat(
              Files.readAllLines(Path.of("/proc/self/mountinfo")).stream()
                  .filter(l -> l.contains(temp.toString()))
                  .map(l -> l.split(" ")[4])
                  .toList())
          .as("only the overlay is mounted")
          .containsExactly(root.toString());
    } finally {
      Overlay.unmount(root);
    }
  }
}
