package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.util.Set;

/**
 * The hostile-sandbox suite against sandboxes a warm pool made ahead of need: every sandbox it
 * attacks (but the first, made before the pool filled) was a member of the pool, claimed, and must
 * hold exactly as a fresh one does, in every state the suite puts it in.
 */
class WarmPoolHostileSandboxTest extends HostileSandboxTest {
  private static final int SIZE = 2;

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
    TestImages.awaitWarm(sandboxes, 1);
    try {
      return TestImages.parked(home);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }
}
