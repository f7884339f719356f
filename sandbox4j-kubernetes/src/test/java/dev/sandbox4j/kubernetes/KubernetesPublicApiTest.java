package dev.sandbox4j.kubernetes;

import dev.sandbox4j.workspace.conformance.PublicApi;
import org.junit.jupiter.api.Test;

/** The kubernetes module's public API against {@code api/public-api.txt}. */
class KubernetesPublicApiTest {

  @Test
  void publicApiMatchesTheCheckedInDump() throws Exception {
    PublicApi.assertMatchesDump(KubernetesSandbox.class);
  }
}
