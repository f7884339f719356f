package dev.sandbox4j.runtime.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.image.Image;
import dev.sandbox4j.workspace.WorkspaceException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The allocator of sandboxes' host id blocks (issue 13 item 4): distinct blocks for every sandbox
 * of every home on the host, never the canonical block nor a host user's subordinate ids, kept
 * until freed, taken over only from a sandbox that no longer exists. Runs against a claims
 * directory of its own.
 */
class IdBlocksTest {
  @TempDir Path temp;

  private Path sandbox(Path home, String id) throws Exception {
    return Files.createDirectories(home.resolve("sandboxes").resolve(id));
  }

  @Test
  void everySandboxOfEveryHomeGetsADistinctBlockOutsideTheCanonicalOne() throws Exception {
    Path claims = temp.resolve("claims");
    Set<Long> seen = new HashSet<>();
    for (String h : List.of("home-a", "home-b")) {
      Path home = temp.resolve(h);
      for (int i = 0; i < 50; i++) {
        String id = "s" + i; // the same ids in both homes
        sandbox(home, id);
        long base = IdBlocks.allocate(claims, home, id);
        assertThat(IdBlocks.isBlock(base)).as("%d is a block", base).isTrue();
        assertThat(base >= Image.UID_SHIFT + Image.ID_RANGE).isTrue();
        assertThat(base + Image.ID_RANGE).isLessThanOrEqualTo(1L << 31);
        assertThat(seen.add(base)).as("%s/%s got a block nobody else has", h, id).isTrue();
      }
    }
  }

  @Test
  void aBlockIsKeptUntilFreedAndTakenOverOnlyFromASandboxThatIsGone() throws Exception {
    Path claims = temp.resolve("claims");
    Path home = temp.resolve("home");
    Path a = sandbox(home, "a");
    long blockA = IdBlocks.allocate(claims, home, "a");
    Path claim = claims.resolve(Long.toString((blockA - IdBlocks.BASE) / Image.ID_RANGE));
    assertThat(Files.readString(claim)).isEqualTo(home.toAbsolutePath() + "\na");

    // A sandbox that no longer exists (a crash before its destroy freed it): its gc frees it.
    Files.delete(a);
    assertThat(IdBlocks.gc(claims, home)).hasSize(1);
    assertThat(claim).doesNotExist();

    sandbox(home, "b");
    long blockB = IdBlocks.allocate(claims, home, "b");
    IdBlocks.free(claims, home, "other", blockB); // not its holder: nothing happens
    assertThat(IdBlocks.gc(claims, home)).isEmpty();
    IdBlocks.reclaim(claims, home, "b", blockB); // its own: fine
    sandbox(home, "c");
    assertThatThrownBy(() -> IdBlocks.reclaim(claims, home, "c", blockB))
        .as("a block a live sandbox holds is never shared")
        .isInstanceOf(WorkspaceException.class)
        .hasMessageContaining("claimed by");
    IdBlocks.free(claims, home, "b", blockB);
    IdBlocks.reclaim(claims, home, "c", blockB); // free now: claimed again (a lost claim, say)
    assertThat(
            Files.readString(
                claims.resolve(Long.toString((blockB - IdBlocks.BASE) / Image.ID_RANGE))))
        .endsWith("\nc");
  }

  @Test
  void theCanonicalBlockAndRecordsWithoutABlockAreNeverClaimed() throws Exception {
    assertThat(IdBlocks.isBlock(0)).isFalse();
    assertThat(IdBlocks.isBlock(Image.UID_SHIFT)).isFalse();
    assertThat(IdBlocks.hostBase(0)).isEqualTo(Image.UID_SHIFT);
    Path claims = temp.resolve("claims");
    IdBlocks.reclaim(claims, temp.resolve("home"), "old", 0);
    assertThat(claims).doesNotExist();
  }

  @Test
  void subordinateIdsOfHostUsersAreRead() {
    // Whatever this host's /etc/subuid says, no block handed out overlaps it.
    for (long[] r : IdBlocks.subordinateRanges()) {
      assertThat(r[1]).isPositive();
    }
  }
}
