package dev.sandbox4j.modal;

import dev.sandbox4j.workspace.conformance.PublicApi;
import org.junit.jupiter.api.Test;

/** The modal module's public API against {@code api/public-api.txt}. */
class ModalPublicApiTest {

  @Test
  void publicApiMatchesTheCheckedInDump() throws Exception {
    PublicApi.assertMatchesDump(ModalSandbox.class);
  }
}
