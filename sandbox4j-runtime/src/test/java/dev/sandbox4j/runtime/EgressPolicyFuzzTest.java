package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import java.util.List;

/**
 * Fuzzes egress rules as a client sends them ({@link EgressPolicy#allow}) and the saved form the
 * engine reads back ({@link EgressPolicy#fromJson}, a file a crash may have torn): a rule set is
 * either a policy that reads back equal from its JSON, or an {@link IllegalArgumentException}
 * naming the bad rule, never another exception. Seeds: {@code
 * src/test/resources/dev/sandbox4j/runtime/EgressPolicyFuzzTestInputs}.
 */
class EgressPolicyFuzzTest {

  @FuzzTest(maxDuration = "10s")
  void rulesParseToAPolicyThatRoundTripsOrFailWithIllegalArgument(FuzzedDataProvider data) {
    List<String> rules = List.of(Fuzzing.text(data).split("\n", -1));
    EgressPolicy policy;
    try {
      policy = EgressPolicy.allow(rules);
    } catch (IllegalArgumentException refused) {
      assertThat(refused.getMessage()).as("the error names what was wrong").isNotBlank();
      return;
    }
    assertThat(EgressPolicy.fromJson(policy.toJson())).isEqualTo(policy);
    for (String cidr : policy.cidrs()) {
      assertThat(cidr).as("a rule is stored in its canonical form").matches("[0-9a-f.:]+/[0-9]+");
    }
  }

  @FuzzTest(maxDuration = "10s")
  void savedPoliciesReadBackOrFailWithIllegalArgument(FuzzedDataProvider data) {
    String json = Fuzzing.text(data);
    try {
      EgressPolicy policy = EgressPolicy.fromJson(json);
      assertThat(EgressPolicy.fromJson(policy.toJson())).isEqualTo(policy);
    } catch (IllegalArgumentException refused) {
      assertThat(refused.getMessage()).isNotBlank();
    }
  }
}
