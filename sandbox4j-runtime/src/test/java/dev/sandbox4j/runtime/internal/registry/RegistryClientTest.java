package dev.sandbox4j.runtime.internal.registry;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Credentials go to the registry's own origin only: not to another host or port where it sends a
 * client (a redirect to a CDN, an upload's Location), whatever way the port is written.
 */
class RegistryClientTest {
  @ParameterizedTest
  @CsvSource({
    "https://registry.example.com/v2/a/blobs/uploads/1, https://registry.example.com/, true",
    "https://registry.example.com:443/v2/a/blobs/uploads/1, https://registry.example.com/, true",
    "https://REGISTRY.example.com/v2/, https://registry.example.com/, true",
    "http://127.0.0.1:5000/v2/a, http://127.0.0.1:5000/, true",
    "https://cdn.example.com/blob, https://registry.example.com/, false",
    "https://registry.example.com:8443/v2/, https://registry.example.com/, false",
    "http://registry.example.com/v2/, https://registry.example.com/, false",
    "http://127.0.0.1:5001/v2/a, http://127.0.0.1:5000/, false",
  })
  void onlyTheRegistrysOwnOriginIsTheSameOrigin(String target, String registry, boolean same) {
    assertThat(RegistryClient.sameOrigin(URI.create(target), URI.create(registry))).isEqualTo(same);
  }
}
