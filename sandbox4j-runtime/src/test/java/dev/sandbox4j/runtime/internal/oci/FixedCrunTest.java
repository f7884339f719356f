package dev.sandbox4j.runtime.internal.oci;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.runtime.Prerequisites;
import dev.sandbox4j.runtime.TestImages;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** Which crun the engine trusts, and how setup reads Debian's source index. */
class FixedCrunTest {

  private static final Path STATE = Path.of("/var/lib/sandbox4j/run/crun");

  /** What {@code apt-cache showsrc crun} printed for Debian trixie (trimmed). */
  private static final String TRIXIE_SHOWSRC =
      """
      Package: crun
      Binary: crun
      Version: 1.21-1
      Maintainer: Faidon Liambotis <paravoid@debian.org>
      Build-Depends: automake, debhelper-compat (= 13), libcap-dev, libseccomp-dev, libyajl-dev
      Format: 3.0 (quilt)
      Files:
       e26da7a178762ab3a6f9442584a47112 2425 crun_1.21-1.dsc
       62ed24025c6d2e35206a8e6a57d886b6 1788933 crun_1.21.orig.tar.gz
      Checksums-Sha256:
       f513b39c99ca94d5e054c922c9407bb8aeee461ff8385953848a4bc2ebb6189d 2425 crun_1.21-1.dsc
       4bfb700e764a4804a4de3ecf07753f4c391005356d60356df65d80ae0914c486 1788933 crun_1.21.orig.tar.gz
       5817d5f11912ab5d68a6f41a96fac06ad26c110b877aa6785ae6c795c0393be9 484 crun_1.21.orig.tar.gz.asc
       a382dd0713c451f27987b45bc7a3aed8c23cbe9c2478ecae0f4b932bd13c5a67 19112 crun_1.21-1.debian.tar.xz
      Homepage: https://github.com/containers/crun
      Directory: pool/main/c/crun

      Package: crun
      Version: 0.9-1
      Checksums-Sha256:
       0000000000000000000000000000000000000000000000000000000000000000 1 crun_0.9.orig.tar.gz
      """;

  @Test
  void versionsFromNineOnAreSafe() {
    int[] safe = OciRuntime.FIRST_SAFE_CRUN;
    assertThat(OciRuntime.atLeast("crun version 1.8.1", safe)).isFalse();
    assertThat(OciRuntime.atLeast("crun version 1.8", safe)).isFalse();
    assertThat(OciRuntime.atLeast("crun version 0.17", safe)).isFalse();
    assertThat(OciRuntime.atLeast("crun version 1.9", safe)).isTrue();
    assertThat(OciRuntime.atLeast("crun version 1.21", safe)).isTrue();
    assertThat(OciRuntime.atLeast("crun version 2.0", safe)).isTrue();
    assertThat(OciRuntime.atLeast("", safe)).as("unknown is not safe").isFalse();
  }

  @Test
  void onlyAnOldOrUnknownCrunIsUnsafeWhenItsForkFails() {
    Path crun = Path.of("/usr/bin/crun");
    assertThat(new OciRuntime(crun, STATE, "crun version 1.8.1").unsafeWhenForkFails()).isTrue();
    assertThat(new OciRuntime(crun, STATE, "").unsafeWhenForkFails()).isTrue();
    assertThat(new OciRuntime(crun, STATE, "crun version 1.21").unsafeWhenForkFails()).isFalse();
    assertThat(
            new OciRuntime(OciRuntime.FIXED_CRUN, STATE, "crun version 1.21").unsafeWhenForkFails())
        .isFalse();
    assertThat(
            new OciRuntime(Path.of("/usr/sbin/runc"), STATE, "runc version 1.1.5")
                .unsafeWhenForkFails())
        .as("runc does not have crun's bug")
        .isFalse();
  }

  @Test
  void theDefaultRuntimeIsSetupsCrunWhenInstalled() {
    if (Files.isExecutable(OciRuntime.FIXED_CRUN)) {
      assertThat(OciRuntime.defaultCrun()).contains(OciRuntime.FIXED_CRUN);
    } else {
      assertThat(OciRuntime.defaultCrun()).isEqualTo(OciRuntime.find("crun"));
    }
  }

  @Test
  void anExplicitRuntimeWinsOverTheDefaultCrun() {
    Prerequisites.requireLocalEngine();
    Path binary = OciRuntime.find("crun").orElseThrow();
    assertThat(
            TestImages.engineOf(LocalSandbox.builder().runtime(binary.toString()).build())
                .runtime()
                .binary())
        .isEqualTo(binary);
    assertThat(TestImages.engineOf(new LocalSandbox()).runtime().binary())
        .isEqualTo(OciRuntime.defaultCrun().orElseThrow());
  }

  @Test
  void theIndexGivesTheUpstreamTarballAndItsSha256() {
    assertThat(DebianSource.IndexEntry.parse("crun", TRIXIE_SHOWSRC))
        .contains(
            new DebianSource.IndexEntry(
                "1.21-1",
                "crun_1.21.orig.tar.gz",
                "4bfb700e764a4804a4de3ecf07753f4c391005356d60356df65d80ae0914c486"));
  }

  @Test
  void anIndexWithoutATarballOrWithAStrangeNameGivesNothing() {
    assertThat(DebianSource.IndexEntry.parse("crun", "")).isEmpty();
    assertThat(DebianSource.IndexEntry.parse("crun", "Package: crun\nVersion: 1.21-1\n")).isEmpty();
    assertThat(
            DebianSource.IndexEntry.parse(
                "crun",
                "Package: crun\nVersion: 1.21-1\nChecksums-Sha256:\n "
                    + "4bfb700e764a4804a4de3ecf07753f4c391005356d60356df65d80ae0914c486"
                    + " 1 crun_../../x.orig.tar.gz\n"))
        .isEmpty();
  }
}
