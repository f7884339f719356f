package dev.sandbox4j.runtime.internal.oci;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.internal.util.HostCommand;
import dev.sandbox4j.workspace.WorkspaceException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** How setup reads Debian's binary package index, unpacks a .deb and installs a file. */
class DebianSourceTest {

  @TempDir Path temp;

  /** What {@code apt-cache show --no-all-versions runsc} printed for Debian trixie (trimmed). */
  private static final String TRIXIE_SHOW_RUNSC =
      """
      Package: runsc
      Source: golang-gvisor-gvisor (0.0~20240729.0-4)
      Version: 0.0~20240729.0-4+b7
      Installed-Size: 29613
      Architecture: amd64
      Description: gVisor container sandbox runtime
      Homepage: https://github.com/google/gvisor
      Section: admin
      Filename: pool/main/g/golang-gvisor-gvisor/runsc_0.0~20240729.0-4+b7_amd64.deb
      Size: 7121792
      MD5sum: 74d2616e31afb7b288744627b4bd6616
      SHA256: 3c25a5130dfac2f71237d5baad56ac86a255de87a0400f11b36a555156dc325a
      """;

  @Test
  void theIndexGivesTheDebAndItsSha256() {
    assertThat(DebianSource.PackageEntry.parse("runsc", TRIXIE_SHOW_RUNSC))
        .contains(
            new DebianSource.PackageEntry(
                "0.0~20240729.0-4+b7",
                "pool/main/g/golang-gvisor-gvisor/runsc_0.0~20240729.0-4+b7_amd64.deb",
                "3c25a5130dfac2f71237d5baad56ac86a255de87a0400f11b36a555156dc325a"));
  }

  @Test
  void theStanzaOfTheAskedPackageIsTheOne() {
    String other = TRIXIE_SHOW_RUNSC.replace("Package: runsc", "Package: runsc-dbg");
    assertThat(DebianSource.PackageEntry.parse("runsc", other + "\n" + TRIXIE_SHOW_RUNSC))
        .hasValueSatisfying(e -> assertThat(e.version()).isEqualTo("0.0~20240729.0-4+b7"));
    assertThat(DebianSource.PackageEntry.parse("runsc", other)).isEmpty();
  }

  @Test
  void anEntryWithoutAHashOrWithAStrangeFileNameGivesNothing() {
    assertThat(DebianSource.PackageEntry.parse("runsc", "")).isEmpty();
    assertThat(
            DebianSource.PackageEntry.parse(
                "runsc", TRIXIE_SHOW_RUNSC.replaceAll("(?m)^SHA256: .*\n", "")))
        .isEmpty();
    assertThat(
            DebianSource.PackageEntry.parse(
                "runsc",
                TRIXIE_SHOW_RUNSC.replace("runsc_0.0~20240729.0-4+b7_amd64.deb", "r s.deb")))
        .isEmpty();
    assertThat(
            DebianSource.PackageEntry.parse(
                "runsc", TRIXIE_SHOW_RUNSC.replace("_amd64.deb", "_amd64.tar")))
        .isEmpty();
  }

  @Test
  void onlyAPathInsideThePackageIsExtracted() {
    Path deb = temp.resolve("x.deb");
    for (String member : List.of("/usr/bin/runsc", "../etc/passwd", "usr/../../x", "")) {
      assertThatThrownBy(() -> DebianSource.extract("runsc", deb, member, temp))
          .as(member)
          .isInstanceOf(IllegalArgumentException.class);
    }
  }

  @Test
  void aFailedPlaceKeepsTheOldFileAndLeavesNoTemporaryOne() throws Exception {
    Path dir = Files.createDirectories(temp.resolve("libexec"));
    Path target = Files.writeString(dir.resolve("tool"), "old");

    assertThatThrownBy(
            () -> DebianSource.place("tool", temp.resolve("missing"), target, "rwxr-xr-x"))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageStartingWith("tool: cannot install " + target);

    assertThat(target).hasContent("old");
    try (Stream<Path> files = Files.list(dir)) {
      assertThat(files).containsExactly(target);
    }
  }

  @Test
  void aPackageDebianDoesNotHaveIsNamedInTheError() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Prerequisites.require(HostCommand.onPath("apt-get"), "apt-get (a Debian host)");
    List<String> progress = new ArrayList<>();

    assertThatThrownBy(() -> DebianSource.binary("sandbox4j-no-such-package", temp, progress::add))
        .isInstanceOf(WorkspaceException.class)
        .hasMessageStartingWith(
            "sandbox4j-no-such-package: Debian trixie has no sandbox4j-no-such-package package");
    assertThat(progress).anySatisfy(line -> assertThat(line).contains("package index"));
  }
}
