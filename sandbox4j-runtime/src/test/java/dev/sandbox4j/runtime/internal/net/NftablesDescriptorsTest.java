package dev.sandbox4j.runtime.internal.net;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.Prerequisites;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * A JVM that holds more than FD_SETSIZE (1024) descriptors still changes nftables rules. Before the
 * JVM kept one early-made context, libnftables' {@code select(2)} on a socket numbered past 1023
 * made glibc abort the whole JVM ("bit out of range 0 - FD_SETSIZE on fd_set"): {@code
 * bench/density}'s bench JVM died so at about 500 sandboxes, one exec helper socket each.
 */
class NftablesDescriptorsTest {

  private static final int HELD = 1100;

  @Test
  void aTransactionSucceedsWhileTheJvmHoldsMoreThanFdSetSizeDescriptors() throws IOException {
    Prerequisites.requireLocalEngine();
    Prerequisites.require(Nftables.unavailable().isEmpty(), "nftables (sandbox4j setup)");
    Nftables.prepare(); // as an engine does when it is built, before its sandboxes' descriptors
    String table = "s4jtest_fd_" + ProcessHandle.current().pid();
    List<FileChannel> held = new ArrayList<>();
    try {
      for (int i = 0; i < HELD; i++) {
        held.add(FileChannel.open(Path.of("/dev/null")));
      }
      assertThat(openDescriptors()).as("descriptors this JVM holds").isGreaterThan(1024);

      Nftables.run("add table inet " + table + "\nadd chain inet " + table + " probe\n");

      assertThat(Nftables.run("list table inet " + table)).contains("chain probe");
    } finally {
      for (FileChannel c : held) {
        c.close();
      }
      try {
        Nftables.run("delete table inet " + table);
      } catch (RuntimeException e) {
        // never made
      }
    }
  }

  private static long openDescriptors() throws IOException {
    try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
      return fds.count();
    }
  }
}
