package dev.sandbox4j.runtime.internal.oci;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.engine.IdBlocks;
import dev.sandbox4j.workspace.WorkspaceException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A live fork's checkpoint copy gets the fork's own host ids (issue 13 item 4): CRIU restores the
 * user namespace's maps from {@code userns-<id>.img}, which {@link CriuUserns#rebase} rewrites.
 */
class CriuUsernsTest {
  @TempDir Path temp;

  /** {@code userns-11.img} as CRIU 4.1.1 wrote it for a sandbox mapped 0 -> 100000, 65536 ids. */
  private static final String CANONICAL =
      "19435654" // IMG_COMMON_MAGIC, little-endian
          + "06494755" // USERNS_MAGIC
          + "18000000" // the entry's size: 24
          + "0a0a"
          + "0800"
          + "10a08d06"
          + "18808004" // uid_map {first 0, lower_first, count}
          + "120a"
          + "0800"
          + "10a08d06"
          + "18808004"; // gid_map

  @Test
  void theImageCriuWritesIsReadAndRewritten() throws Exception {
    byte[] canonical = HexFormat.of().parseHex(CANONICAL);
    CriuUserns.Maps maps = CriuUserns.read(canonical);
    CriuUserns.Extent extent = new CriuUserns.Extent(0, 100000, 65536);
    assertThat(maps.uid()).containsExactly(extent);
    assertThat(maps.gid()).containsExactly(extent);
    assertThat(CriuUserns.write(maps)).isEqualTo(canonical);

    Path images = Files.createDirectories(temp.resolve("images"));
    Files.write(images.resolve("userns-11.img"), canonical);
    long block = IdBlocks.BASE + 5 * 65536L;
    CriuUserns.moveTo(images, (int) block);
    CriuUserns.Maps moved = CriuUserns.read(Files.readAllBytes(images.resolve("userns-11.img")));
    CriuUserns.Extent expected = new CriuUserns.Extent(0, block, 65536);
    assertThat(moved).isEqualTo(new CriuUserns.Maps(List.of(expected), List.of(expected)));
  }

  @Test
  void aMapOtherThanOneBlockFromContainerZeroIsRefused() throws Exception {
    Path images = Files.createDirectories(temp.resolve("images"));
    CriuUserns.Extent half = new CriuUserns.Extent(0, 300000, 1000);
    Files.write(
        images.resolve("userns-11.img"),
        CriuUserns.write(new CriuUserns.Maps(List.of(half), List.of(half))));
    assertThatThrownBy(() -> CriuUserns.moveTo(images, (int) IdBlocks.BASE))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("refusing to restore it");
    Path empty = Files.createDirectories(temp.resolve("empty"));
    assertThatThrownBy(() -> CriuUserns.moveTo(empty, (int) IdBlocks.BASE))
        .hasMessageContaining("no user namespace image");
  }
}
