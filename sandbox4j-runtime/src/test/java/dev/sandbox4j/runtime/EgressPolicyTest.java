package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.machine.EgressRules;
import java.net.InetAddress;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class EgressPolicyTest {

  @Test
  void allowSplitsDomainsAndCidrsAndNormalizes() {
    EgressPolicy p =
        EgressPolicy.allow("API.Example.com.", "*.pkg.dev", "198.51.100.0/24", "2001:db8::1");

    assertThat(p.mode()).isEqualTo(EgressPolicy.Mode.ALLOWLIST);
    assertThat(p.domains()).containsExactly("api.example.com", "*.pkg.dev");
    assertThat(p.cidrs()).containsExactly("198.51.100.0/24", "2001:db8:0:0:0:0:0:1/128");
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

    assertThat(p.headersFor("API.example.com.", 443, true))
        .isEqualTo(Map.of("X-Key", "k", "authorization", "Bearer two"));
    assertThat(p.headersFor("other.example.org", 443, true)).isEmpty();
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

  // ---- what no policy opens ----

  @Test
  void aCidrInsideARangeNoPolicyOpensIsRefusedNamingTheRange() {
    Map<String, String> rules =
        Map.ofEntries(
            Map.entry("127.0.0.0/8", "127.0.0.0/8 (loopback"),
            Map.entry("127.0.0.1", "127.0.0.0/8 (loopback"),
            Map.entry("10.64.0.0/10", "10.64.0.0/10 (the engine's own range"),
            Map.entry("10.70.0.0/16", "10.64.0.0/10 (the engine's own range"),
            Map.entry("10.70.0.1", "10.64.0.0/10"),
            Map.entry("169.254.0.0/16", "169.254.0.0/16 (link-local"),
            Map.entry("169.254.169.254", "169.254.0.0/16 (link-local"),
            Map.entry("0.0.0.0/8", "0.0.0.0/8"),
            Map.entry("0.0.0.0", "0.0.0.0/8"),
            Map.entry("::1", "0:0:0:0:0:0:0:1/128 (loopback"),
            Map.entry("::", "0:0:0:0:0:0:0:0/128"),
            Map.entry("fe80::/10", "fe80:0:0:0:0:0:0:0/10 (link-local"),
            Map.entry("fe80::1", "fe80:0:0:0:0:0:0:0/10 (link-local"),
            Map.entry("::ffff:127.0.0.1", "127.0.0.0/8 (loopback"),
            Map.entry("::7f00:1", "loopback: the host's own services, in its IPv4-compatible form"),
            Map.entry("::ffff:0:7f00:1", "in its IPv4-translated form"),
            Map.entry("64:ff9b::7f00:1", "loopback: the host's own services, in its NAT64 form"),
            Map.entry("64:ff9b::a9fe:a9fe", "link-local: cloud metadata services, in its NAT64"),
            Map.entry("64:ff9b:1:7f00:0:100::", "in its local-use NAT64 form"),
            Map.entry("2002:7f00:1::/48", "loopback: the host's own services, in its 6to4 form"),
            Map.entry("2002:a40::/32", "the engine's own range"));
    rules.forEach(
        (rule, range) -> {
          assertThatThrownBy(() -> EgressPolicy.allow("api.example.com", rule))
              .as(rule)
              .isInstanceOf(IllegalArgumentException.class)
              .hasMessageContaining("egress rule '" + rule + "' lies inside")
              .hasMessageContaining(range)
              .hasMessageContaining("which no egress policy opens");
          // A record stored before such rules were refused still loads (enforcement refuses them).
          assertThat(
                  EgressPolicy.fromJson("{\"mode\":\"allowlist\",\"allow\":[\"" + rule + "\"]}")
                      .cidrs())
              .as(rule)
              .hasSize(1);
        });
  }

  @Test
  void aDomainRuleForLocalhostIsRefused() {
    for (String rule : List.of("localhost", "LocalHost.", "*.localhost", "8080-abc.localhost")) {
      assertThatThrownBy(() -> EgressPolicy.allow(rule))
          .as(rule)
          .hasMessageContaining("egress rule '" + rule + "' names loopback");
    }
    assertThat(EgressPolicy.allow("localhost.example.com", "*.notlocalhost").domains()).hasSize(2);
  }

  @Test
  void aWideCidrIsNarrowedAndSaysWhatItDoesNotOpen() {
    EgressPolicy p = EgressPolicy.allow("0.0.0.0/0", "10.0.0.0/8", "::/0", "198.51.100.0/24");

    assertThat(p.cidrs())
        .containsExactly("0.0.0.0/0", "10.0.0.0/8", "0:0:0:0:0:0:0:0/0", "198.51.100.0/24");
    assertThat(p.narrowings()).hasSize(3);
    assertThat(p.narrowings().get(0))
        .startsWith("egress rule 0.0.0.0/0 does not open ")
        .contains("0.0.0.0/8", "127.0.0.0/8 (loopback", "169.254.0.0/16", "10.64.0.0/10");
    assertThat(p.narrowings().get(1))
        .startsWith("egress rule 10.0.0.0/8 does not open 10.64.0.0/10")
        .doesNotContain("127.0.0.0/8");
    assertThat(p.narrowings().get(2))
        .startsWith("egress rule 0:0:0:0:0:0:0:0/0 does not open ")
        .contains("0:0:0:0:0:0:0:1/128 (loopback", "fe80:0:0:0:0:0:0:0/10", "IPv6 forms");
    assertThat(EgressPolicy.allow("198.51.100.0/24", "api.example.com").narrowings()).isEmpty();
  }

  // ---- where header rules apply ----

  @Test
  void aHeaderRuleReachesIntercepted443ByDefaultAndOtherwiseOnlyItsListedPorts() {
    EgressPolicy byDefault =
        EgressPolicy.allow("api.example.com").withHeader("api.example.com", "X-Key", "k");
    assertThat(byDefault.headersFor("api.example.com", 443, true)).containsEntry("X-Key", "k");
    assertThat(byDefault.headersFor("api.example.com", 80, false))
        .as("cleartext on port 80")
        .isEmpty();
    assertThat(byDefault.headersFor("api.example.com", 8080, false)).isEmpty();
    assertThat(byDefault.headersFor("api.example.com", 443, false))
        .as("cleartext HTTP sent to port 443")
        .isEmpty();
    assertThat(byDefault.headersFor("api.example.com", 8443, true)).isEmpty();

    EgressPolicy listed =
        EgressPolicy.allow("api.example.com")
            .withHeader("api.example.com", "X-Key", "k", List.of(8080, 80, 8080));
    assertThat(listed.headerRules().getFirst().ports()).containsExactly(80, 8080);
    assertThat(listed.headersFor("api.example.com", 80, false)).containsEntry("X-Key", "k");
    assertThat(listed.headersFor("api.example.com", 8080, true)).containsEntry("X-Key", "k");
    assertThat(listed.headersFor("api.example.com", 443, true)).isEmpty();
    assertThat(listed.headersFor("api.example.com", 81, false)).isEmpty();
    assertThat(listed.toString()).contains("ports [80, 8080]").doesNotContain(": k");
    assertThat(EgressPolicy.fromJson(listed.toJson())).isEqualTo(listed);

    for (Integer bad : java.util.Arrays.asList(0, -1, 65536, null)) {
      assertThatThrownBy(
              () ->
                  EgressPolicy.all()
                      .withHeader("a.example", "X-Key", "v", java.util.Arrays.asList(bad)))
          .as("port %s", bad)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("port " + bad + " is outside 1..65535");
    }
    assertThatThrownBy(
            () ->
                EgressPolicy.fromJson(
                    "{\"mode\":\"all\",\"headers\":[{\"domain\":\"a.example\",\"name\":\"X\","
                        + "\"value\":\"v\",\"ports\":[\"80\"]}]}"))
        .hasMessageContaining("port is not a number");
  }

  @Test
  void rulesRoundTripAndAreValidatedAsTheFactoriesDo() {
    EgressPolicy policy =
        EgressPolicy.allow("API.example.com.", "198.51.100.7")
            .withHeader("api.example.com", "X-Key", "v", List.of(80))
            .withInterceptTls(true);

    EgressRules rules = policy.toRules();
    assertThat(rules.mode()).isEqualTo(EgressRules.Mode.ALLOWLIST);
    assertThat(rules.allow())
        .as("normalized")
        .containsExactly("api.example.com", "198.51.100.7/32");
    assertThat(rules.headers())
        .containsExactly(new EgressRules.Header("api.example.com", "X-Key", "v", List.of(80)));
    assertThat(rules.interceptTls()).isTrue();
    assertThat(EgressPolicy.of(rules)).isEqualTo(policy);
    assertThat(EgressPolicy.of(EgressRules.none())).isEqualTo(EgressPolicy.none());
    assertThat(EgressPolicy.all().toRules()).isEqualTo(EgressRules.all());

    assertThatThrownBy(() -> EgressPolicy.of(EgressRules.allow(List.of("127.0.0.0/8"))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lies inside 127.0.0.0/8");
    assertThatThrownBy(
            () ->
                EgressPolicy.of(
                    new EgressRules(
                        EgressRules.Mode.NONE,
                        List.of(),
                        List.of(new EgressRules.Header("a.example", "X", "v", List.of())),
                        false)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("cannot inject header");
  }
}
