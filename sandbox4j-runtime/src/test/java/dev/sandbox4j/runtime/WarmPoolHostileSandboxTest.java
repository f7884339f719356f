package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;

/**
 * The hostile-sandbox suite against sandboxes a warm pool made ahead of need: every sandbox it
 * attacks (but the first, made before the pool filled) was a member of the pool, claimed, and must
 * hold exactly as a fresh one does, in every state the suite puts it in.
 */
class WarmPoolHostileSandboxTest extends HostileSandboxTest {
  private static final int SIZE = 2;
  private static final Duration FILL = Duration.ofMinutes(2);

  @Override
  int warmPool() {
    return SIZE;
  }

  /** A sandbox claimed from the pool: it waits for a member, and checks that it got one. */
  @Override
  Target create(String what) {
    if (reference == null) {
      return super.create(what); // made while the pool starts filling
    }
    Set<String> members = awaitMembers();
    Target claimed = super.create(what + " (from a warm pool)");
    assertThat(members).as("%s was a member of the warm pool", what).contains(claimed.ref().id());
    return claimed;
  }

  private Set<String> awaitMembers() {
    long end = System.nanoTime() + FILL.toNanos();
    try {
      while (sandboxes.warmSandboxes() < 1) {
        if (System.nanoTime() > end) {
          throw new AssertionError("the warm pool held no sandbox after " + FILL);
        }
        Thread.sleep(20);
      }
      return parked();
    } catch (InterruptedException | IOException e) {
      throw new AssertionError(e);
    }
  }

  private Set<String> parked() throws IOException {
    Set<String> ids = new TreeSet<>();
    try (Stream<Path> dirs = Files.list(home.resolve("sandboxes"))) {
      for (Path dir : dirs.toList()) {
        if (Files.exists(dir.resolve("parked"))) {
          ids.add(dir.getFileName().toString());
        }
      }
    }
    return ids;
  }
}
