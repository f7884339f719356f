package dev.sandbox4j.temporal;

import dev.sandbox4j.workspace.conformance.PublicApi;
import org.junit.jupiter.api.Test;

/** The temporal module's public API against {@code api/public-api.txt}. */
class PublicApiTest {

  @Test
  void publicApiMatchesTheCheckedInDump() throws Exception {
    PublicApi.assertMatchesDump(DurableAgent.class);
  }
}
