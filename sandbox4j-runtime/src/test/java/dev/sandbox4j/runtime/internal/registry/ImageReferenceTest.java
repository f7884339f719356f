package dev.sandbox4j.runtime.internal.registry;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/** References are read as the docker CLI reads them, and malformed ones are refused by name. */
class ImageReferenceTest {
  private static final String DIGEST = "sha256:" + "ab".repeat(32);

  @ParameterizedTest
  @CsvSource({
    "python, docker.io/library/python:latest",
    "python:3.12-slim, docker.io/library/python:3.12-slim",
    "library/python:3, docker.io/library/python:3",
    "bitnami/redis, docker.io/bitnami/redis:latest",
    "docker.io/python, docker.io/library/python:latest",
    "index.docker.io/library/python:3, docker.io/library/python:3",
    "ghcr.io/org/app:1.2, ghcr.io/org/app:1.2",
    "GHCR.io/org/app, ghcr.io/org/app:latest",
    "localhost/app, localhost/app:latest",
    "localhost:5000/team/app:v1, localhost:5000/team/app:v1",
    "127.0.0.1:5000/a/b/c:x_y.z-w, 127.0.0.1:5000/a/b/c:x_y.z-w",
    "[::1]:5000/app:1, [::1]:5000/app:1",
    "my-registry.example.com/a__b/c--d:T, my-registry.example.com/a__b/c--d:T",
  })
  void normalizesAsTheDockerCliDoes(String given, String canonical) {
    assertThat(ImageReference.parse(given).toString()).isEqualTo(canonical);
  }

  @Test
  void aDigestNeedsNoTagAndKeepsOneIfGiven() {
    ImageReference byDigest = ImageReference.parse("python@" + DIGEST);
    assertThat(byDigest.tag()).isNull();
    assertThat(byDigest.manifestReference()).isEqualTo(DIGEST);
    assertThat(byDigest.toString()).isEqualTo("docker.io/library/python@" + DIGEST);
    ImageReference both = ImageReference.parse("ghcr.io/o/a:1@" + DIGEST);
    assertThat(both.tag()).isEqualTo("1");
    assertThat(both.manifestReference()).isEqualTo(DIGEST);
  }

  @Test
  void dockerHubIsAskedAtItsApiHost() {
    assertThat(ImageReference.parse("python").apiHost()).isEqualTo("registry-1.docker.io");
    assertThat(ImageReference.parse("ghcr.io/o/a").apiHost()).isEqualTo("ghcr.io");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "",
        "Python",
        "python:",
        "python:-tag",
        "python:.tag",
        "a//b",
        "/python",
        "python/",
        "a/../b",
        "a/./b",
        "app@sha256:12",
        "app@sha512:abab",
        "app@md5:abc",
        "exa mple.com/app",
        "app:ttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt",
        "a_-b",
        "a\nb",
        "host:99999x/app",
      })
  void malformedReferencesAreRefusedNamingThem(String given) {
    assertThatThrownBy(() -> ImageReference.parse(given))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageMatching("(?s)(invalid image reference '.*': .+|an image reference is empty)");
  }

  @Test
  void aReferenceLongerThanDistributionAllowsIsRefused() {
    assertThatThrownBy(() -> ImageReference.parse("a/".repeat(128) + "b"))
        .hasMessageContaining("at most 255");
  }
}
