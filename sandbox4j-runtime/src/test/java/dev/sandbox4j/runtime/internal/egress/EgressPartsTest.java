package dev.sandbox4j.runtime.internal.egress;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.runtime.internal.addr.PublicAddresses;
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
      // the range alone: which addresses this host has (tests add 198.18.x) is not the point here
      assertThat(PublicAddresses.inReservedRange(InetAddress.ofLiteral(a))).as(a).isFalse();
    }
  }

  @Test
  void theHostsOwnAddressesAreNotPublic() throws Exception {
    List<InetAddress> own =
        java.net.NetworkInterface.networkInterfaces()
            .flatMap(java.net.NetworkInterface::inetAddresses)
            .toList();

    assertThat(own).isNotEmpty();
    for (InetAddress a : own) {
      assertThat(PublicAddresses.isPublic(a)).as(a.toString()).isFalse();
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

  /**
   * Every IPv6 form that carries {@code v4}: compatible, mapped, translated, NAT64, 6to4, Teredo.
   */
  static List<InetAddress> ipv6Forms(String v4) throws Exception {
    byte[] a = InetAddress.ofLiteral(v4).getAddress();
    List<byte[]> forms = new java.util.ArrayList<>();
    forms.add(bytes(new int[] {}, a, 12)); // ::a.b.c.d
    forms.add(bytes(new int[] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, a, 12));
    forms.add(bytes(new int[] {0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0}, a, 12));
    forms.add(bytes(new int[] {0, 0x64, 0xff, 0x9b}, a, 12)); // 64:ff9b::/96
    byte[] local = bytes(new int[] {0, 0x64, 0xff, 0x9b, 0, 1}, new byte[0], 0); // /48
    local[6] = a[0];
    local[7] = a[1];
    local[9] = a[2];
    local[10] = a[3];
    forms.add(local);
    forms.add(bytes(new int[] {0x20, 0x02}, a, 2)); // 2002:AABB:CCDD::
    byte[] teredoClient = bytes(new int[] {0x20, 0x01, 0, 0, 8, 8, 4, 4}, new byte[0], 0);
    for (int i = 0; i < 4; i++) {
      teredoClient[12 + i] = (byte) ~a[i];
    }
    forms.add(teredoClient);
    forms.add(bytes(new int[] {0x20, 0x01, 0, 0}, a, 4)); // Teredo server
    List<InetAddress> out = new java.util.ArrayList<>();
    for (byte[] f : forms) {
      out.add(java.net.Inet6Address.getByAddress(null, f, -1));
    }
    return out;
  }

  private static byte[] bytes(int[] prefix, byte[] v4, int at) {
    byte[] b = new byte[16];
    for (int i = 0; i < prefix.length; i++) {
      b[i] = (byte) prefix[i];
    }
    System.arraycopy(v4, 0, b, at, v4.length);
    return b;
  }

  @Test
  void everyIpv6FormOfANonPublicIpv4AddressIsNotPublic() throws Exception {
    for (String v4 :
        List.of(
            "10.0.0.1",
            "10.70.0.2",
            "127.0.0.1",
            "169.254.169.254",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1")) {
      for (InetAddress form : ipv6Forms(v4)) {
        assertThat(PublicAddresses.isPublic(form)).as("%s as %s", v4, form).isFalse();
        assertThat(PublicAddresses.inReservedRange(form)).as("%s as %s", v4, form).isTrue();
      }
    }
    for (String literal :
        List.of("::7f00:1", "::ffff:0:a00:1", "64:ff9b::a00:1", "2002:c0a8:101::1", "2002:a00::")) {
      assertThat(PublicAddresses.isPublic(InetAddress.ofLiteral(literal))).as(literal).isFalse();
    }
  }

  @Test
  void ipv6FormsOfLoopbackLinkLocalAndTheEngineRangeAreNeverOpen() throws Exception {
    for (String v4 : List.of("127.0.0.1", "169.254.169.254", "10.70.0.2", "0.0.0.0")) {
      for (InetAddress form : ipv6Forms(v4)) {
        assertThat(PublicAddresses.neverOpen(form)).as("%s as %s", v4, form).isPresent();
      }
    }
    assertThat(PublicAddresses.neverOpen(InetAddress.ofLiteral("10.1.2.3"))).isEmpty();
    assertThat(PublicAddresses.neverOpen(InetAddress.ofLiteral("2001:4860::8888"))).isEmpty();
    for (InetAddress form : ipv6Forms("192.168.1.1")) {
      assertThat(PublicAddresses.neverOpen(form)).as("private, not never-open: %s", form).isEmpty();
    }
  }

  @Test
  void ipv6FormsOfAPublicAddressThatRealNetworksRouteStayPublic() throws Exception {
    for (String literal :
        List.of("64:ff9b::808:808", "2002:808:808::1", "2001:0:808:404::f7f7:f7f7")) {
      assertThat(PublicAddresses.inReservedRange(InetAddress.ofLiteral(literal)))
          .as(literal)
          .isFalse();
    }
    assertThat(PublicAddresses.inReservedRange(InetAddress.ofLiteral("::808:808")))
        .as("IPv4-compatible addresses are deprecated and route nowhere")
        .isTrue();
    assertThat(PublicAddresses.inReservedRange(InetAddress.ofLiteral("64:ff9b:1::808:808")))
        .as("the local-use NAT64 prefix is not global")
        .isTrue();
  }
}
