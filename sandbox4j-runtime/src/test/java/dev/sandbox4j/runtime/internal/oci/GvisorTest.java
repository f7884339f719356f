package dev.sandbox4j.runtime.internal.oci;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.HostCheck;
import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * gVisor's runsc: what doctor reports, and setup's step that installs Debian trixie's binary. The
 * host tests need Linux and root (and a prepared host, or Debian's archive for the fresh install):
 * they are skipped without, except under {@code CI=true}, where {@code .ci/run} ran {@code
 * sandbox4j setup} first.
 */
class GvisorTest {

  @TempDir Path temp;

  @Test
  void onlyRunscsOwnVersionLineCountsAsAnAnswer() {
    assertThat(Gvisor.isVersionLine("runsc version 0.0~20240729.0")).isTrue();
    assertThat(Gvisor.isVersionLine("runsc version release-20250113.0")).isTrue();
    assertThat(Gvisor.isVersionLine("")).as("no answer").isFalse();
    assertThat(Gvisor.isVersionLine("runsc version ")).isFalse();
    assertThat(Gvisor.isVersionLine("crun version 1.21")).isFalse();
  }

  @Test
  void setupInstallsNextToItsCrunOffPath() {
    assertThat(Gvisor.BINARY).isEqualTo(Path.of("/usr/local/libexec/sandbox4j/runsc"));
    assertThat(Gvisor.BINARY.getParent()).isEqualTo(OciRuntime.FIXED_CRUN.getParent());
  }

  @Test
  void aPreparedHostHasARunscThatAnswersAndDoctorSaysWhichOne() {
    requireRunsc();
    Path runsc = Gvisor.find().orElseThrow();

    HostCheck check = Gvisor.check();

    assertThat(check.ok()).isTrue();
    assertThat(check.name()).isEqualTo("gVisor (runsc)");
    assertThat(check.detail()).startsWith(runsc + " (runsc version ");
    HostCommand.Result version = HostCommand.run(List.of(runsc.toString(), "--version"));
    assertThat(version.ok()).as(version.output()).isTrue();
    assertThat(version.stdout()).startsWith("runsc version ");
  }

  @Test
  void doctorReportsAMissingRunscAsInformationWithTheFix() {
    HostCheck check = Gvisor.check(Optional.empty());

    assertThat(check.ok()).as("gVisor is optional: crun stays the default").isTrue();
    assertThat(check.detail())
        .startsWith("not installed: gVisor isolation")
        .contains("sandboxes run under crun")
        .contains("`sudo sandbox4j setup` installs Debian trixie's runsc into " + Gvisor.BINARY);
    assertThat(Gvisor.unavailable(Optional.empty()))
        .hasValue(
            "gVisor isolation needs gVisor's runsc, which is not installed: `sudo sandbox4j"
                + " setup` installs Debian trixie's runsc into "
                + Gvisor.BINARY
                + " (about 20 MB from deb.debian.org, a few seconds)");
  }

  @Test
  void aRunscThatDoesNotAnswerIsUnavailableAndSaysWhatItSaid() throws IOException {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Path broken =
        Files.writeString(temp.resolve("runsc"), "#!/bin/sh\necho 'no kernel' >&2\nexit 3\n");
    Files.setPosixFilePermissions(broken, PosixFilePermissions.fromString("rwxr-xr-x"));

    HostCheck check = Gvisor.check(Optional.of(broken));

    assertThat(check.ok()).isTrue();
    assertThat(check.detail())
        .startsWith(broken + " does not answer `runsc --version` (exit 3: no kernel)")
        .contains("sudo sandbox4j setup");
    assertThat(Gvisor.unavailable(Optional.of(broken)))
        .hasValueSatisfying(
            why ->
                assertThat(why)
                    .contains(broken + " does not answer `runsc --version` (exit 3: no kernel)")
                    .contains("sudo sandbox4j setup"));
  }

  @Test
  void installOnAPreparedHostChangesNothing() throws IOException {
    requireRoot();
    requireRunsc();
    Path runsc = Gvisor.find().orElseThrow();
    Snapshot before = Snapshot.of(runsc);
    List<String> progress = new CopyOnWriteArrayList<>();

    Gvisor.install(progress::add);

    assertThat(Snapshot.of(runsc)).as("%s", progress).isEqualTo(before);
    assertThat(progress).singleElement().asString().contains(runsc + " (runsc version ");
    assertThat(progress.getFirst()).endsWith("nothing to install");
  }

  @Test
  void anInstallReplacesARunscThatDoesNotAnswerAndASecondChangesNothing() throws IOException {
    requireRoot();
    Prerequisites.require(HostCommand.onPath("apt-get"), "apt-get (a Debian host)");
    Prerequisites.require(HostCommand.onPath("dpkg-deb"), "dpkg-deb (a Debian host)");
    // a broken runsc at the target is found before any runsc on PATH, so the test fetches
    // Debian's on every host
    Path target = Files.createDirectories(temp.resolve("libexec")).resolve("runsc");
    Files.writeString(target, "#!/bin/sh\nexit 1\n");
    Files.setPosixFilePermissions(target, PosixFilePermissions.fromString("rwxr-xr-x"));
    List<String> progress = new CopyOnWriteArrayList<>();

    Gvisor.install(target, progress::add);

    assertThat(target).as("%s", progress).isRegularFile();
    assertThat(Files.getPosixFilePermissions(target))
        .isEqualTo(PosixFilePermissions.fromString("rwxr-xr-x"));
    assertThat(OciConfig.isStaticElf(target)).isTrue();
    assertThat(Gvisor.version(target)).startsWith("runsc version ");
    assertThat(String.join("\n", progress))
        .contains("runsc: " + target + " does not answer `runsc --version` (exit 1, no output)")
        .contains("runsc: runsc_")
        .contains("matches the SHA-256 in Debian trixie's signed index")
        .contains("is a static executable and answers: runsc version ")
        .contains("runsc: installed runsc version ");
    try (Stream<Path> files = Files.list(target.getParent())) {
      assertThat(files).as("no temporary file left").containsExactly(target);
    }

    Snapshot installed = Snapshot.of(target);
    progress.clear();
    Gvisor.install(target, progress::add);

    assertThat(Snapshot.of(target)).isEqualTo(installed);
    assertThat(progress).singleElement().asString().endsWith("nothing to install");
  }

  /** What a second install must not change: the same file (inode), size and time. */
  private record Snapshot(Object fileKey, long size, long modifiedMillis) {
    static Snapshot of(Path file) throws IOException {
      BasicFileAttributes a = Files.readAttributes(file, BasicFileAttributes.class);
      return new Snapshot(a.fileKey(), a.size(), a.lastModifiedTime().toMillis());
    }
  }

  private static void requireRoot() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
  }

  private static void requireRunsc() {
    Prerequisites.require(
        Gvisor.unavailable().isEmpty(),
        "gVisor's runsc (sandbox4j setup): " + Gvisor.unavailable().orElse(""));
  }
}
