package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The building block of distinct id ranges per sandbox (issue 13 item 4): an idmapped bind shows a
 * layer's stored ids (the image's canonical 100000..) as another range, without a chown.
 */
class IdMappedMountTest {
  @TempDir Path temp;

  @Test
  void anIdmappedBindShowsTheStoredIdsAsAnotherRange() throws Exception {
    Prerequisites.requireLocalEngine();
    Path layer = Files.createDirectories(temp.resolve("layer/etc"));
    Files.writeString(layer.resolve("passwd"), "root:x:0:0::/root:/bin/sh\n");
    for (Path p : new Path[] {layer.getParent(), layer, layer.resolve("passwd")}) {
      Files.setAttribute(p, "unix:uid", Image.UID_SHIFT, LinkOption.NOFOLLOW_LINKS);
      Files.setAttribute(p, "unix:gid", Image.UID_SHIFT + 1000, LinkOption.NOFOLLOW_LINKS);
    }
    Path target = Files.createDirectories(temp.resolve("mapped"));
    long start = System.nanoTime();
    int ns = UserNamespaces.create(Image.UID_SHIFT, 300_000, Image.ID_RANGE);
    long made = System.nanoTime();
    try {
      NativeFs.idmappedBind(
          layer.getParent(), target, ns, NativeFs.MOUNT_ATTR_RDONLY | NativeFs.MOUNT_ATTR_NODEV);
      long mounted = System.nanoTime();
      System.out.printf(
          "user namespace %.2f ms, idmapped bind %.2f ms%n",
          (made - start) / 1e6, (mounted - made) / 1e6);
      Path seen = target.resolve("etc/passwd");
      assertThat(Files.getAttribute(seen, "unix:uid", LinkOption.NOFOLLOW_LINKS))
          .isEqualTo(300_000);
      assertThat(Files.getAttribute(seen, "unix:gid", LinkOption.NOFOLLOW_LINKS))
          .isEqualTo(301_000);
      assertThat(Files.getAttribute(layer.resolve("passwd"), "unix:uid")).isEqualTo(100_000);
    } finally {
      NativeFs.close(ns);
      NativeFs.umount2(target, NativeFs.MNT_DETACH);
    }
  }
}
