package dev.sandbox4j.runtime.internal.util;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The supervisor's check for jars rebuilt or replaced under it. */
class CodeWatchTest {

  @TempDir Path dir;

  private String classPath(Path... entries) {
    return String.join(
        File.pathSeparator, java.util.Arrays.stream(entries).map(Path::toString).toList());
  }

  @Test
  void unchangedJarsAreNoReason() throws Exception {
    Path jar = Files.write(dir.resolve("a.jar"), new byte[] {1, 2, 3});
    CodeWatch watch = new CodeWatch(classPath(jar, dir.resolve("classes")));
    for (int i = 0; i < 3; i++) {
      assertThat(watch.replacedAndSettled()).isFalse();
    }
  }

  @Test
  void aJarRewrittenInPlaceCountsOnceItStaysAsItIs() throws Exception {
    Path jar = Files.write(dir.resolve("a.jar"), new byte[] {1, 2, 3});
    CodeWatch watch = new CodeWatch(classPath(jar));
    Files.write(jar, new byte[] {1, 2, 3, 4}); // same inode, new content
    assertThat(watch.replacedAndSettled()).as("seen once: it may still be written").isFalse();
    Files.write(jar, new byte[] {1, 2, 3, 4, 5});
    assertThat(watch.replacedAndSettled()).as("changed again since").isFalse();
    assertThat(watch.replacedAndSettled()).as("the same for a whole look").isTrue();
  }

  @Test
  void aJarReplacedByAnotherFileCounts() throws Exception {
    Path jar = Files.write(dir.resolve("a.jar"), new byte[] {1, 2, 3});
    CodeWatch watch = new CodeWatch(classPath(jar));
    Path next = Files.write(dir.resolve("a.jar.new"), new byte[] {1, 2, 3});
    Files.move(next, jar, java.nio.file.StandardCopyOption.REPLACE_EXISTING); // a new inode
    assertThat(watch.replacedAndSettled()).isFalse();
    assertThat(watch.replacedAndSettled()).isTrue();
  }

  @Test
  void aMissingJarIsNothingToStartFrom() throws Exception {
    Path jar = Files.write(dir.resolve("a.jar"), new byte[] {1, 2, 3});
    CodeWatch watch = new CodeWatch(classPath(jar));
    Files.delete(jar);
    for (int i = 0; i < 3; i++) {
      assertThat(watch.replacedAndSettled()).isFalse();
    }
  }

  @Test
  void aJarPutBackAsItWasIsNoChange() throws Exception {
    Path jar = Files.write(dir.resolve("a.jar"), new byte[] {1, 2, 3});
    java.nio.file.attribute.FileTime modified = Files.getLastModifiedTime(jar);
    CodeWatch watch = new CodeWatch(classPath(jar));
    Files.write(jar, new byte[] {9, 9, 9});
    assertThat(watch.replacedAndSettled()).isFalse();
    Files.write(jar, new byte[] {1, 2, 3});
    Files.setLastModifiedTime(jar, modified);
    assertThat(watch.replacedAndSettled()).isFalse();
    assertThat(watch.replacedAndSettled()).isFalse();
  }
}
