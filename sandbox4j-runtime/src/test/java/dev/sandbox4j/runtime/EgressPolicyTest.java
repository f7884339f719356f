package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.InetAddress;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class EgressPolicyTest {

  @Test
  void allowSplitsDomainsAndCidrsAndNormalizes() {
    EgressPolicy p = EgressPolicy.allow("API.Example.com.", "*.pkg.dev", "198.51.100.0/24", "::1");

    assertThat(p.mode()).isEqualTo(EgressPolicy.Mode.ALLOWLIST);
    assertThat(p.domains()).containsExactly("api.example.com", "*.pkg.dev");
    assertThat(p.cidrs()).containsExactly("198.51.100.0/24", "0:0:0:0:0:0:0:1/128");
  }

  @Test
  void exactAndWildcardDomainsMatchCaseInsensitivelyWithTrailingDot() {
    EgressPolicy p = EgressPolicy.allow("api.example.com", "*.pkg.dev");

    assertThat(p.allowsName("API.EXAMPLE.COM.")).isTrue();
    assertThat(p.allowsName("x.api.example.com")).isFalse();
    assertThat(p.allowsName("example.com")).isFalse();
    assertThat(p.allowsName("a.pkg.dev")).isTrue();
    assertThat(p.allowsName("a.b.pkg.dev")).isTrue();
    assertThat(p.allowsName("pkg.dev")).isFalse();
    assertThat(p.allowsName("evilpkg.dev")).isFalse();
    assertThat(EgressPolicy.all().allowsName("anything.example")).isTrue();
    assertThat(EgressPolicy.none().allowsName("api.example.com")).isFalse();
  }

  @Test
  void cidrRulesCoverTheirAddressesOnly() throws Exception {
    EgressPolicy p = EgressPolicy.allow("198.51.100.0/24", "203.0.113.7");

    assertThat(p.cidrAllows(InetAddress.ofLiteral("198.51.100.255"))).isTrue();
    assertThat(p.cidrAllows(InetAddress.ofLiteral("198.51.101.0"))).isFalse();
    assertThat(p.cidrAllows(InetAddress.ofLiteral("203.0.113.7"))).isTrue();
    assertThat(p.cidrAllows(InetAddress.ofLiteral("203.0.113.8"))).isFalse();
    assertThat(EgressPolicy.allow("0.0.0.0/0").cidrAllows(InetAddress.ofLiteral("10.1.2.3")))
        .isTrue();
  }

  @Test
  void malformedRulesFailNamingTheRule() {
    assertThatThrownBy(() -> EgressPolicy.allow("exa mple.com"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("exa mple.com");
    assertThatThrownBy(() -> EgressPolicy.allow("*"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'*'");
    assertThatThrownBy(() -> EgressPolicy.allow("a.*.example.com"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> EgressPolicy.allow("-bad.example.com"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> EgressPolicy.allow("198.51.100.1/24"))
        .hasMessageContaining("did you mean 198.51.100.0/24");
    assertThatThrownBy(() -> EgressPolicy.allow("198.51.100.0/33"))
        .hasMessageContaining("prefix length");
    assertThatThrownBy(() -> EgressPolicy.allow("300.1.1.1")).hasMessageContaining("300.1.1.1");
    assertThatThrownBy(() -> EgressPolicy.allow("bücher.example")).hasMessageContaining("xn--");
    assertThatThrownBy(() -> EgressPolicy.allow("a".repeat(64) + ".example.com"))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void headerRulesValidateAndTheLaterRuleWins() {
    EgressPolicy p =
        EgressPolicy.allow("api.example.com")
            .withHeader("api.example.com", "Authorization", "Bearer one")
            .withHeader("*.example.com", "X-Key", "k")
            .withHeader("api.example.com", "authorization", "Bearer two");

    assertThat(p.headersFor("API.example.com."))
        .isEqualTo(Map.of("X-Key", "k", "authorization", "Bearer two"));
    assertThat(p.headersFor("other.example.org")).isEmpty();
    assertThat(p.headerRules()).hasSize(2);

    EgressPolicy base = EgressPolicy.all();
    assertThatThrownBy(() -> base.withHeader("api.example.com", "Host", "x"))
        .hasMessageContaining("Host");
    assertThatThrownBy(() -> base.withHeader("api.example.com", "Bad Name", "x"))
        .hasMessageContaining("Bad Name");
    assertThatThrownBy(() -> base.withHeader("api.example.com", "X-Key", "secret\r\nInjected: 1"))
        .hasMessageContaining("index 6")
        .satisfies(e -> assertThat(e.getMessage()).doesNotContain("secret"));
    assertThatThrownBy(() -> EgressPolicy.none().withHeader("a.example", "X-Key", "v"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> EgressPolicy.none().withInterceptTls(true))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void toStringNeverShowsHeaderValues() {
    EgressPolicy p =
        EgressPolicy.allow("api.example.com")
            .withHeader("api.example.com", "Authorization", "Bearer s3cr3t-value")
            .withInterceptTls(true);

    assertThat(p.toString())
        .contains("api.example.com", "Authorization", "interceptTls")
        .doesNotContain("s3cr3t");
    assertThat(p.headerRules().getFirst().toString()).doesNotContain("s3cr3t");
  }

  @Test
  void jsonRoundTripKeepsEverything() {
    List<EgressPolicy> policies =
        List.of(
            EgressPolicy.none(),
            EgressPolicy.all(),
            EgressPolicy.all().withHeader("*.example.com", "X-Key", "v\tw"),
            EgressPolicy.allow(),
            EgressPolicy.allow("api.example.com", "*.pkg.dev", "198.51.100.0/24", "2001:db8::/32")
                .withHeader("api.example.com", "Authorization", "Bearer x")
                .withInterceptTls(true));
    for (EgressPolicy p : policies) {
      assertThat(EgressPolicy.fromJson(p.toJson())).isEqualTo(p);
    }
  }

  @Test
  void hostileJsonIsRefusedWithAReason() {
    assertThatThrownBy(() -> EgressPolicy.fromJson("{")).hasMessageContaining("not valid JSON");
    assertThatThrownBy(() -> EgressPolicy.fromJson("[]")).hasMessageContaining("not an object");
    assertThatThrownBy(() -> EgressPolicy.fromJson("{\"mode\":\"open\"}"))
        .hasMessageContaining("none, all or allowlist");
    assertThatThrownBy(() -> EgressPolicy.fromJson("{\"mode\":\"all\",\"allow\":[\"a.example\"]}"))
        .hasMessageContaining("takes no allow rules");
    assertThatThrownBy(
            () -> EgressPolicy.fromJson("{\"mode\":\"allowlist\",\"allow\":[\"bad host\"]}"))
        .hasMessageContaining("bad host");
    assertThatThrownBy(
            () ->
                EgressPolicy.fromJson(
                    "{\"mode\":\"all\",\"headers\":[{\"domain\":\"a.example\",\"name\":\"X\"}]}"))
        .hasMessageContaining("value");
  }

  @Test
  void describeAllowedListsRulesForDenialMessages() {
    assertThat(EgressPolicy.allow("api.example.com", "198.51.100.0/24").describeAllowed())
        .isEqualTo("api.example.com, 198.51.100.0/24");
    assertThat(EgressPolicy.none().describeAllowed()).isEqualTo("nothing");
  }
}
