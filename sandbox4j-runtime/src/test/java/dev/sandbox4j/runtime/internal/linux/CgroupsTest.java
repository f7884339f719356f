package dev.sandbox4j.runtime.internal.linux;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Which cgroup hierarchies the engine uses, from a mountinfo file. */
class CgroupsTest {

  @TempDir Path temp;

  @Test
  void aHierarchyCriuMountsAgainWhileRestoringIsNotUsed() throws Exception {
    // CRIU's temporary "cgyard" mounts the host's hierarchies a second time during a restore;
    // a sandbox's cgroup seen through it vanishes when the restore ends.
    Path yard = temp.resolve(".criu.cgyard.x1/pids");
    Files.createDirectories(yard.resolve("sandbox4j/abc"));
    Files.writeString(yard.resolve("sandbox4j/abc/cgroup.procs"), "");
    Path mountinfo = temp.resolve("mountinfo");
    Files.writeString(
        mountinfo,
        """
        30 24 0:26 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,pids
        31 24 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
        90 80 0:26 / %s rw,relatime - cgroup cgroup rw,pids
        91 80 0:27 / %s rw,relatime - cgroup2 cgroup2 rw
        """
            .formatted(yard, temp.resolve(".criu.cgyard.x1/unified")));

    Cgroups cgroups = Cgroups.detect("sandbox4j", mountinfo);

    assertThat(cgroups.v1ProcsFiles("abc")).as("only /sys/fs/cgroup's hierarchies count").isEmpty();
  }

  @Test
  void hierarchiesElsewhereAreUsedWhenTheHostHasNoneUnderSysFsCgroup() throws Exception {
    Path pids = temp.resolve("cg/pids");
    Files.createDirectories(pids.resolve("sandbox4j/abc"));
    Files.writeString(pids.resolve("sandbox4j/abc/cgroup.procs"), "");
    Path mountinfo = temp.resolve("mountinfo");
    Files.writeString(
        mountinfo, "30 24 0:26 / %s rw,relatime - cgroup cgroup rw,pids%n".formatted(pids));

    assertThat(Cgroups.detect("sandbox4j", mountinfo).v1ProcsFiles("abc"))
        .containsExactly(pids.resolve("sandbox4j/abc/cgroup.procs").toString());
  }

  /** A cgroup v2 hierarchy at {@code temp/unified} holding sandbox {@code abc}'s command group. */
  private Path commandGroup(String procs) throws Exception {
    Path unified = temp.resolve("unified");
    Path group = unified.resolve("sandbox4j/abc/cmd-1");
    Files.createDirectories(group);
    // a directory with a file in it cannot be deleted: as a cgroup with processes cannot
    Files.writeString(group.resolve("cgroup.procs"), procs);
    Files.writeString(
        temp.resolve("mountinfo"),
        "31 24 0:27 / %s rw,relatime - cgroup2 cgroup2 rw%n".formatted(unified));
    return group;
  }

  @Test
  void aCommandGroupABackgroundProcessKeepsIsNeverRemovedInTheBackground() throws Exception {
    Path group = commandGroup("4242\n");
    Cgroups cgroups = Cgroups.detect("sandbox4j", temp.resolve("mountinfo"));

    cgroups.removeCommandGroup("abc", "cmd-1");
    // a hibernate killed the process; the restore is about to put it back into this group
    Files.delete(group.resolve("cgroup.procs"));
    Thread.sleep(800); // past the background tries at 50 and 550 ms

    assertThat(group)
        .as("left for the sandbox's destroy: removing it would fail the restore")
        .isDirectory();
  }

  @Test
  void aCommandGroupThatListsNoProcessIsRemovedOnceItCanBe() throws Exception {
    Path group = commandGroup(""); // the kernel is still letting go of an ended process
    Cgroups cgroups = Cgroups.detect("sandbox4j", temp.resolve("mountinfo"));

    cgroups.removeCommandGroup("abc", "cmd-1");
    assertThat(group).isDirectory();
    Files.delete(group.resolve("cgroup.procs")); // it has let go

    long end = System.nanoTime() + 10_000_000_000L;
    while (Files.exists(group) && System.nanoTime() < end) {
      Thread.sleep(10);
    }
    assertThat(group).as("removed by a background try").doesNotExist();
  }
}
