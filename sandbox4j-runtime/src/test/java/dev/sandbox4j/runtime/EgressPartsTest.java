package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.time.Instant;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The egress proxy's parts: what counts as public, the hosts file, the CA, policy files. */
class EgressPartsTest {
  @TempDir Path temp;

  @Test
  void privateLoopbackLinkLocalMulticastAndReservedRangesAreNotPublic() {
    for (String a :
        List.of(
            "0.1.2.3",
            "10.1.2.3",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "ff02::1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1")) {
      assertThat(PublicAddresses.isPublic(InetAddress.ofLiteral(a))).as(a).isFalse();
    }
    for (String a :
        List.of(
            "8.8.8.8",
            "198.18.0.1",
            "198.19.255.254",
            "172.32.0.1",
            "100.128.0.1",
            "2001:4860::8888")) {
      assertThat(PublicAddresses.isPublic(InetAddress.ofLiteral(a))).as(a).isTrue();
    }
  }

  @Test
  void theHostsFileIsReadFirstAndRereadWhenItChanges() throws Exception {
    Path hosts = temp.resolve("hosts");
    Files.writeString(
        hosts, "198.18.0.5 api.fake  # comment\nnot-an-address bad.fake\n198.18.0.6 API.Fake\n");
    EgressResolver resolver = new EgressResolver(hosts);

    assertThat(resolver.resolve("api.fake"))
        .containsExactly(InetAddress.ofLiteral("198.18.0.5"), InetAddress.ofLiteral("198.18.0.6"));

    Files.writeString(hosts, "198.18.0.7 api.fake other.fake\n");
    Files.setLastModifiedTime(
        hosts, java.nio.file.attribute.FileTime.from(Instant.now().plusSeconds(5)));
    assertThat(resolver.resolve("other.fake")).containsExactly(InetAddress.ofLiteral("198.18.0.7"));
    assertThat(resolver.resolve("api.fake")).containsExactly(InetAddress.ofLiteral("198.18.0.7"));

    Files.delete(hosts);
    assertThatThrownBy(() -> resolver.resolve("other.fake.invalid"))
        .isInstanceOf(java.net.UnknownHostException.class);
  }

  @Test
  void theCaIsCreatedOnceWithAPrivateKeyAndSignsLeavesForNamesAndAddresses() throws Exception {
    Path dir = temp.resolve("ca");
    ProxyCa first = ProxyCa.loadOrCreate(dir);
    ProxyCa again = ProxyCa.loadOrCreate(dir);

    assertThat(again.certificatePem()).isEqualTo(first.certificatePem());
    assertThat(Files.getPosixFilePermissions(dir.resolve("ca.key")))
        .isEqualTo(Set.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE));
    assertThat(first.certificate().getBasicConstraints()).isZero();

    var leaf = first.signLeaf("api.example.com", Instant.now());
    leaf.verify(first.certificate().getPublicKey());
    assertThat(leaf.getSubjectAlternativeNames()).containsExactly(List.of(2, "api.example.com"));
    assertThat(leaf.getBasicConstraints()).isEqualTo(-1);
    var ipLeaf = first.signLeaf("198.18.0.5", Instant.now());
    assertThat(ipLeaf.getSubjectAlternativeNames()).containsExactly(List.of(7, "198.18.0.5"));
    assertThat(first.serverContext("api.example.com"))
        .isSameAs(first.serverContext("api.example.com"));
  }

  @Test
  void aPolicyFileIsPrivateAndReadsBack() throws Exception {
    Path file = temp.resolve("egress.json");
    EgressPolicy p =
        EgressPolicy.allow("api.example.com").withHeader("api.example.com", "X-Key", "secret");

    p.write(file);

    assertThat(EgressPolicy.read(file)).isEqualTo(p);
    assertThat(Files.getPosixFilePermissions(file))
        .isEqualTo(Set.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE));
    Files.writeString(file, "{\"mode\":\"sometimes\"}");
    assertThatThrownBy(() -> EgressPolicy.read(file))
        .hasMessageContaining(file.toString())
        .hasMessageContaining("none, all or allowlist");
  }
}
