package dev.sandbox4j.runtime.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.internal.oci.OciConfig;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The installed helper binary keeps its side of the version contract (docs/design.md, "Fast exec"):
 * it says its version in READY, and sends a SPARE only to an engine that started it with {@code
 * --spares}, so an engine that did not ask never gets a reply it does not know. Run on the host
 * with pipes for its stdin and stdout: it reports before any request, and exits when its stdin
 * ends.
 */
class ExecHelperVersionTest {
  private static final int READY = 4;
  private static final int SPARE = 5;

  @BeforeAll
  static void helperInstalled() {
    Prerequisites.require(OciConfig.hasExecHelper(), "the exec helper (sandbox4j setup)");
  }

  /** What the helper said before its stdin ended, as 16-byte replies of four ints. */
  private static int[][] repliesUntilEof(Process helper) throws Exception {
    helper.getOutputStream().close(); // it has said what it says unasked; now it ends
    byte[] all;
    try (InputStream out = helper.getInputStream()) {
      all = out.readAllBytes();
    }
    assertThat(helper.waitFor(10, TimeUnit.SECONDS)).isTrue();
    assertThat(all.length % 16).as("whole replies").isZero();
    ByteBuffer b = ByteBuffer.wrap(all).order(ByteOrder.nativeOrder());
    int[][] replies = new int[all.length / 16][];
    for (int i = 0; i < replies.length; i++) {
      replies[i] = new int[] {b.getInt(), b.getInt(), b.getInt(), b.getInt()};
    }
    return replies;
  }

  @Test
  void withoutSparesItSaysItsVersionAndNothingElse() throws Exception {
    Process helper = new ProcessBuilder(OciConfig.HOST_EXEC_HELPER.toString()).start();
    int[] ready = readReply(helper.getInputStream());
    assertThat(ready[0]).isEqualTo(READY);
    assertThat(ready[2]).as("version").isEqualTo(3);
    Thread.sleep(300); // a spare would be reported at once
    assertThat(repliesUntilEof(helper)).as("no SPARE to an engine that did not ask").isEmpty();
  }

  @Test
  void withSparesItReportsItsSpareKeeperWhichHoldsNothingElse() throws Exception {
    Process helper = new ProcessBuilder(OciConfig.HOST_EXEC_HELPER.toString(), "--spares").start();
    int[] ready = readReply(helper.getInputStream());
    assertThat(ready[0]).isEqualTo(READY);
    int[] spare = readReply(helper.getInputStream());
    assertThat(spare[0]).isEqualTo(SPARE);
    assertThat(spare[1]).as("its sequence number").isEqualTo(1);
    long pid = spare[2];
    assertThat(Files.readString(Path.of("/proc/" + pid + "/status")))
        .as("the spare is the helper's child")
        .contains("PPid:\t" + helper.pid() + "\n");
    // once it waits (just forked, it still holds the helper's descriptors for a moment)
    long settle = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (fdCount(pid) != 5 && System.nanoTime() < settle) {
      Thread.sleep(10);
    }
    assertThat(fdCount(pid))
        .as("/dev/null as stdio, its socket to the helper, its report pipe")
        .isEqualTo(5);
    assertThat(Files.readSymbolicLink(Path.of("/proc/" + pid + "/fd/0")).toString())
        .isEqualTo("/dev/null");

    assertThat(repliesUntilEof(helper)).as("nothing more").isEmpty();
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (running(pid) && System.nanoTime() < end) {
      Thread.sleep(10);
    }
    assertThat(running(pid)).as("the spare ends with its helper").isFalse();
  }

  private static long fdCount(long pid) throws Exception {
    try (var fds = Files.list(Path.of("/proc/" + pid + "/fd"))) {
      return fds.count();
    }
  }

  /** Whether process {@code pid} exists and has not exited (a zombie has). */
  private static boolean running(long pid) throws Exception {
    try {
      String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
      return stat.charAt(stat.lastIndexOf(')') + 2) != 'Z';
    } catch (java.nio.file.NoSuchFileException gone) {
      return false;
    }
  }

  private static int[] readReply(InputStream in) throws Exception {
    byte[] m = in.readNBytes(16);
    assertThat(m).hasSize(16);
    ByteBuffer b = ByteBuffer.wrap(m).order(ByteOrder.nativeOrder());
    return new int[] {b.getInt(), b.getInt(), b.getInt(), b.getInt()};
  }
}
