package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.runtime.TestRegistry.Auth;
import dev.sandbox4j.runtime.internal.image.ImageStore;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The test registry as a client sees it over plain HTTP: what skopeo pushed there, and the
 * challenges and answers of each kind of auth.
 */
class TestRegistryTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final String ACCEPT_MANIFESTS =
      RegistryImages.MANIFEST + ", " + RegistryImages.INDEX;
  private static final Pattern CHALLENGE_PARAMETER = Pattern.compile("(\\w+)=\"([^\"]*)\"");

  @TempDir Path temp;

  private final HttpClient http = HttpClient.newHttpClient();

  @BeforeEach
  void requirePrerequisites() {
    TestRegistry.requireRegistry();
    TestImages.requireBusybox();
  }

  @Test
  void anAnonymousRegistryServesThePushedManifestUnderItsDigest() throws Exception {
    RegistryImages.Configured configured =
        RegistryImages.configured(temp.resolve("image"), RegistryImages.NUMERIC_USER);
    try (TestRegistry registry = TestRegistry.start(temp.resolve("registry"), Auth.ANONYMOUS)) {
      registry.push(configured.image().layout(), "busybox/configured:1");

      HttpResponse<byte[]> manifest = get(registry, "/v2/busybox/configured/manifests/1", null);

      assertThat(manifest.statusCode()).isEqualTo(200);
      assertThat(manifest.headers().firstValue("Docker-Content-Digest"))
          .contains(configured.image().digest());
      assertThat(digestOf(manifest.body())).isEqualTo(configured.image().digest());
      assertThat(registry.manifestDigest("busybox/configured:1"))
          .isEqualTo(configured.image().digest());
      JsonNode config = blobJson(registry, "busybox/configured", manifest.body());
      assertThat(config.at("/config/User").asText()).isEqualTo(RegistryImages.NUMERIC_USER);
      assertThat(config.at("/config/WorkingDir").asText()).isEqualTo("/srv/app");
      assertThat(config.at("/config/Env").toString()).contains("GREETING=hello");
    }
  }

  @Test
  void aBasicAuthRegistryAnswersOnlyTheRightCredentials() throws Exception {
    RegistryImages.Configured configured =
        RegistryImages.configured(temp.resolve("image"), RegistryImages.NAMED_USER);
    try (TestRegistry registry = TestRegistry.start(temp.resolve("registry"), Auth.BASIC)) {
      registry.push(configured.image().layout(), "busybox/named:1");
      String path = "/v2/busybox/named/manifests/1";

      HttpResponse<byte[]> anonymous = get(registry, path, null);
      HttpResponse<byte[]> right =
          get(registry, path, TestRegistry.basic(registry.user(), registry.password()));
      HttpResponse<byte[]> wrong = get(registry, path, TestRegistry.basic(registry.user(), "no"));

      assertThat(anonymous.statusCode()).isEqualTo(401);
      assertThat(anonymous.headers().firstValue("WWW-Authenticate"))
          .hasValueSatisfying(challenge -> assertThat(challenge).startsWith("Basic "));
      assertThat(right.statusCode()).isEqualTo(200);
      assertThat(right.headers().firstValue("Docker-Content-Digest"))
          .contains(configured.image().digest());
      assertThat(wrong.statusCode()).isEqualTo(401);
    }
  }

  @Test
  void aTokenAuthRegistryAcceptsTheTokensItsRealmIssuesForTheRightCredentials() throws Exception {
    RegistryImages.Configured configured =
        RegistryImages.configured(temp.resolve("image"), RegistryImages.NUMERIC_USER);
    try (TestRegistry registry = TestRegistry.start(temp.resolve("registry"), Auth.TOKEN)) {
      registry.push(configured.image().layout(), "busybox/token:1");
      String path = "/v2/busybox/token/manifests/1";

      HttpResponse<byte[]> unauthorized = get(registry, path, null);
      assertThat(unauthorized.statusCode()).isEqualTo(401);
      String challenge = unauthorized.headers().firstValue("WWW-Authenticate").orElseThrow();
      assertThat(challenge).startsWith("Bearer ");
      Map<String, String> parameters = challengeParameters(challenge);
      assertThat(parameters)
          .containsEntry("service", TestRegistry.TOKEN_SERVICE)
          .containsEntry("scope", "repository:busybox/token:pull")
          .containsKey("realm");
      URI tokenUri =
          URI.create(
              parameters.get("realm")
                  + "?service="
                  + encode(parameters.get("service"))
                  + "&scope="
                  + encode(parameters.get("scope")));

      HttpResponse<byte[]> granted =
          send(tokenUri, TestRegistry.basic(registry.user(), registry.password()));
      HttpResponse<byte[]> refused = send(tokenUri, TestRegistry.basic(registry.user(), "no"));
      HttpResponse<byte[]> anonymousToken = send(tokenUri, null);

      assertThat(granted.statusCode()).isEqualTo(200);
      String token = tokenOf(granted);
      HttpResponse<byte[]> withToken = get(registry, path, "Bearer " + token);
      assertThat(withToken.statusCode()).isEqualTo(200);
      assertThat(withToken.headers().firstValue("Docker-Content-Digest"))
          .contains(configured.image().digest());
      String forged = token.substring(0, token.lastIndexOf('.') + 1) + "AAAA";
      assertThat(get(registry, path, "Bearer " + forged).statusCode()).isEqualTo(401);
      assertThat(refused.statusCode()).isEqualTo(401);
      // like Docker Hub's for a private repository: a token, but one that grants nothing
      assertThat(anonymousToken.statusCode()).isEqualTo(200);
      assertThat(get(registry, path, "Bearer " + tokenOf(anonymousToken)).statusCode())
          .isEqualTo(401);
    }
  }

  @Test
  void aMultiPlatformPushIsAnIndexOfOneManifestPerArchitecture() throws Exception {
    RegistryImages.MultiPlatform image = RegistryImages.multiPlatform(temp.resolve("image"));
    try (TestRegistry registry = TestRegistry.start(temp.resolve("registry"), Auth.ANONYMOUS)) {
      registry.push(image.layout(), "busybox/multi:1");

      HttpResponse<byte[]> index = get(registry, "/v2/busybox/multi/manifests/1", null);

      assertThat(index.statusCode()).isEqualTo(200);
      assertThat(index.headers().firstValue("Docker-Content-Digest")).contains(image.indexDigest());
      JsonNode manifests = JSON.readTree(index.body()).path("manifests");
      assertThat(manifests).hasSize(2);
      Map<String, String> digestByArchitecture = new LinkedHashMap<>();
      for (JsonNode m : manifests) {
        digestByArchitecture.put(
            m.at("/platform/architecture").asText(), m.path("digest").asText());
      }
      assertThat(digestByArchitecture)
          .containsExactlyInAnyOrderEntriesOf(
              Map.of(
                  "amd64", image.byArchitecture().get("amd64").digest(),
                  "arm64", image.byArchitecture().get("arm64").digest()));
      for (String digest : digestByArchitecture.values()) {
        // --all pushed each platform's manifest, not only the index
        assertThat(get(registry, "/v2/busybox/multi/manifests/" + digest, null).statusCode())
            .isEqualTo(200);
      }
    }
  }

  @Test
  void aZstdLayerIsServedAsZstdAndWhiteoutsAndSharedBasesAsBuilt() throws Exception {
    RegistryImages.Image zstd = RegistryImages.zstdLayer(temp.resolve("zstd"));
    RegistryImages.Image whiteouts = RegistryImages.withWhiteouts(temp.resolve("whiteouts"));
    RegistryImages.SharingBase sharing = RegistryImages.sharingBase(temp.resolve("sharing"));
    try (TestRegistry registry = TestRegistry.start(temp.resolve("registry"), Auth.ANONYMOUS)) {
      registry.push(zstd.layout(), "busybox/zstd:1");
      registry.push(whiteouts.layout(), "busybox/whiteouts:1");
      registry.push(sharing.first().layout(), "busybox/first:1");
      registry.push(sharing.second().layout(), "busybox/second:1");

      JsonNode zstdManifest = manifest(registry, "busybox/zstd", "1");
      assertThat(zstdManifest.at("/layers/0/mediaType").asText())
          .isEqualTo(RegistryImages.LAYER_ZSTD);
      byte[] zstdBlob =
          blob(registry, "busybox/zstd", zstdManifest.at("/layers/0/digest").asText());
      assertThat(Arrays.copyOf(zstdBlob, 4)).containsExactly(0x28, 0xB5, 0x2F, 0xFD); // zstd magic

      JsonNode whiteoutManifest = manifest(registry, "busybox/whiteouts", "1");
      Path upper = temp.resolve("upper.tar.gz");
      Files.write(
          upper,
          blob(registry, "busybox/whiteouts", whiteoutManifest.at("/layers/1/digest").asText()));
      assertThat(TestImages.run(List.of("tar", "-tzf", upper.toString())).lines())
          .contains("./srv/.wh.deleted.txt", "./opaque/.wh..wh..opq", "./opaque/new.txt");

      String shared = sharing.sharedLayer().digest();
      assertThat(manifest(registry, "busybox/first", "1").at("/layers/0/digest").asText())
          .isEqualTo(shared);
      assertThat(manifest(registry, "busybox/second", "1").at("/layers/0/digest").asText())
          .isEqualTo(shared);
      assertThat(manifest(registry, "busybox/first", "1").at("/layers/1/digest").asText())
          .isNotEqualTo(manifest(registry, "busybox/second", "1").at("/layers/1/digest").asText());
    }
  }

  @Test
  void aLargeLayerIsServedInRanges() throws Exception {
    long size = 16L << 20;
    RegistryImages.LargeFile large = RegistryImages.largeLayer(temp.resolve("large"), size);
    try (TestRegistry registry = TestRegistry.start(temp.resolve("registry"), Auth.ANONYMOUS)) {
      registry.push(large.image().layout(), "busybox/large:1");
      RegistryImages.Layer layer = large.image().layers().getLast();
      assertThat(layer.size()).isGreaterThan(size); // random data does not compress

      HttpRequest tail =
          HttpRequest.newBuilder(
                  registry.baseUri().resolve("/v2/busybox/large/blobs/" + layer.digest()))
              .header("Range", "bytes=" + (layer.size() - 1000) + "-")
              .build();
      HttpResponse<byte[]> response = http.send(tail, HttpResponse.BodyHandlers.ofByteArray());

      assertThat(response.statusCode()).isEqualTo(206);
      assertThat(response.body()).hasSize(1000);
      byte[] blob = Files.readAllBytes(blobPath(large.image(), layer));
      assertThat(response.body())
          .containsExactly(Arrays.copyOfRange(blob, blob.length - 1000, blob.length));
    }
  }

  private static Path blobPath(RegistryImages.Image image, RegistryImages.Layer layer) {
    return image.layout().resolve("blobs/sha256").resolve(layer.digest().substring(7));
  }

  private JsonNode manifest(TestRegistry registry, String repo, String reference)
      throws IOException, InterruptedException {
    HttpResponse<byte[]> response = get(registry, "/v2/" + repo + "/manifests/" + reference, null);
    assertThat(response.statusCode()).as("GET manifest %s:%s", repo, reference).isEqualTo(200);
    return JSON.readTree(response.body());
  }

  private byte[] blob(TestRegistry registry, String repo, String digest)
      throws IOException, InterruptedException {
    HttpResponse<byte[]> response = get(registry, "/v2/" + repo + "/blobs/" + digest, null);
    assertThat(response.statusCode()).as("GET blob %s", digest).isEqualTo(200);
    assertThat(digestOf(response.body())).isEqualTo(digest);
    return response.body();
  }

  /** The config blob that {@code manifest} names. */
  private JsonNode blobJson(TestRegistry registry, String repo, byte[] manifest)
      throws IOException, InterruptedException {
    return JSON.readTree(
        blob(registry, repo, JSON.readTree(manifest).at("/config/digest").asText()));
  }

  private HttpResponse<byte[]> get(TestRegistry registry, String path, String authorization)
      throws IOException, InterruptedException {
    return send(registry.baseUri().resolve(path), authorization);
  }

  private HttpResponse<byte[]> send(URI uri, String authorization)
      throws IOException, InterruptedException {
    HttpRequest.Builder request = HttpRequest.newBuilder(uri).header("Accept", ACCEPT_MANIFESTS);
    if (authorization != null) {
      request.header("Authorization", authorization);
    }
    return http.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
  }

  private static Map<String, String> challengeParameters(String challenge) {
    Map<String, String> parameters = new LinkedHashMap<>();
    Matcher m = CHALLENGE_PARAMETER.matcher(challenge);
    while (m.find()) {
      parameters.put(m.group(1), m.group(2));
    }
    return parameters;
  }

  private static String tokenOf(HttpResponse<byte[]> tokenResponse) throws IOException {
    return JSON.readTree(tokenResponse.body()).path("token").asText();
  }

  private static String encode(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }

  private static String digestOf(byte[] content) {
    return "sha256:" + ImageStore.sha256Hex(content);
  }
}
