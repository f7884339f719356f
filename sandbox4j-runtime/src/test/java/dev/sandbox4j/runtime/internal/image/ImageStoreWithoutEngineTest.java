package dev.sandbox4j.runtime.internal.image;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The image store as another backend uses it (see the package's documentation): opened on a
 * directory with that backend's own {@link ImageStore.LayerUsers}, with no engine, OCI runtime or
 * sandbox record anywhere. It imports an archive, lists and resolves images to layers, and its gc
 * keeps exactly the layers the backend says its containers run on.
 */
class ImageStoreWithoutEngineTest {
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;

  @TempDir Path temp;

  /** The layers the other backend's containers run on, as it would track them. */
  private final Set<String> containerLayers = ConcurrentHashMap.newKeySet();

  @Test
  void anotherBackendImportsListsAndCollectsWithItsOwnLayerUsers() throws Exception {
    requireRoot(); // an import shifts ownership to the sandboxes' host ids
    ImageStore store = new ImageStore(temp.resolve("images"), () -> Set.copyOf(containerLayers));
    Path archive = rootfsTarball("hello from another backend\n");
    List<String> progress = new ArrayList<>();

    Image image = store.importArchive("tiny", archive, progress::add);
    Image again = store.importArchive("tiny-too", archive, progress::add);

    assertThat(store.list()).extracting(Image::name).containsExactly("tiny", "tiny-too");
    assertThat(store.find("tiny")).contains(image);
    assertThat(again.layerIds()).as("same archive bytes, same layer").isEqualTo(image.layerIds());
    Path layer = image.layers().getFirst();
    assertThat(layer.resolve("etc/marker")).hasContent("hello from another backend");
    assertThat(Files.getAttribute(layer.resolve("etc/marker"), "unix:uid", NOFOLLOW))
        .as("owned by the canonical host ids")
        .isEqualTo(Image.UID_SHIFT);
    assertThat(progress).anyMatch(l -> l.startsWith("image tiny imported: 1 layer(s)"));

    // Its container runs on the image: it records the layers, then asks the store to keep them.
    containerLayers.addAll(image.layerIds());
    store.checkLayersKept(image);
    store.remove("tiny");
    store.remove("tiny-too");

    assertThat(store.list()).isEmpty();
    assertThat(store.gc()).as("the container still runs on it").isEmpty();
    assertThat(layer).isDirectory();

    containerLayers.clear(); // the container is gone
    assertThat(store.gc())
        .containsExactly("unused image layer " + image.layerIds().getFirst().substring(0, 12));
    assertThat(layer).doesNotExist();
  }

  /** A root filesystem tarball of one file, made with the host's tar. */
  private Path rootfsTarball(String marker) throws IOException, InterruptedException {
    Path rootfs = Files.createDirectories(temp.resolve("rootfs/etc")).getParent();
    Files.writeString(rootfs.resolve("etc/marker"), marker);
    Path archive = temp.resolve("rootfs.tar");
    Process tar =
        new ProcessBuilder("tar", "-C", rootfs.toString(), "-cf", archive.toString(), ".")
            .inheritIO()
            .start();
    assertThat(tar.waitFor()).as("tar's exit code").isZero();
    return archive;
  }

  private static void requireRoot() throws IOException {
    Prerequisites.require(
        ((Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid")) == 0, "root");
  }
}
