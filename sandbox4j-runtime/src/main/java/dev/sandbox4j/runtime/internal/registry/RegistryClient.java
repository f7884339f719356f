package dev.sandbox4j.runtime.internal.registry;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.function.LongConsumer;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A client of the OCI Distribution API (v2) for pulling: image manifests and indexes by tag or
 * digest, and blobs by digest, every byte verified against its digest; and for pushing: blobs
 * (unless the repository has them) and image manifests.
 *
 * <p><b>Auth.</b> A request goes out without credentials first, as the docker CLI's does; a {@code
 * 401} names the scheme in {@code WWW-Authenticate}: for {@code Bearer}, a token is fetched from
 * the realm for the repository's {@code pull} scope, or {@code pull,push} for a push (with the
 * host's {@link RegistryCredentials}, or anonymously, as Docker Hub serves public images), and
 * cached per repository and actions until it expires; for {@code Basic}, the credentials go with
 * every request to that host. A registry that refuses them gets an error naming where they came
 * from.
 *
 * <p><b>Transport.</b> HTTPS, except to a loopback host ({@code localhost}, {@code 127.0.0.0/8},
 * {@code ::1}) or one listed as plain, which get HTTP: docker's own default for insecure
 * registries. Redirects (blob storage behind a CDN) are followed by hand, up to five, and the
 * {@code Authorization} header goes only to the registry's own origin (not to a CDN, nor to an
 * upload location elsewhere). Every response is bounded: a manifest or config by {@value
 * #MAX_DOCUMENT} bytes, a blob by the size its descriptor gives; a body that sends nothing for
 * {@value #STALL_SECONDS} s is given up (and resumed, for a blob).
 *
 * <p><b>Blobs</b> are downloaded to a file that survives an interruption: the next download of the
 * same blob continues where it stopped with a {@code Range} request (a registry that ignores it
 * sends the whole blob again), and a transfer cut midway is resumed the same way, up to {@value
 * #ATTEMPTS} attempts. A finished blob whose sha256 is not its digest is deleted and refused.
 *
 * <p><b>Uploads</b> are monolithic: a {@code POST} opens one, a {@code PUT} with the digest sends
 * the whole blob and closes it (the registry checks the digest), started again from the {@code
 * POST} if the transfer breaks. A manifest is put by tag, and the digest the registry answers must
 * be the one computed here.
 */
public final class RegistryClient {
  /** What {@code Accept} asks for: every manifest and index type this client reads. */
  public static final List<String> MANIFEST_TYPES =
      List.of(
          "application/vnd.oci.image.index.v1+json",
          "application/vnd.oci.image.manifest.v1+json",
          "application/vnd.docker.distribution.manifest.list.v2+json",
          "application/vnd.docker.distribution.manifest.v2+json");

  /** The actions a pull asks a token for. */
  private static final String PULL = "pull";

  /** The actions a push asks a token for: a push reads too (does the registry have this blob?). */
  private static final String PUSH = "pull,push";

  static final int MAX_DOCUMENT = 4 * 1024 * 1024;
  static final int STALL_SECONDS = 60;
  static final int ATTEMPTS = 4;
  private static final int MAX_REDIRECTS = 5;
  private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(30);
  private static final Duration HEADERS_TIMEOUT = Duration.ofSeconds(60);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern CHALLENGE_PARAM =
      Pattern.compile("([A-Za-z_]+)=(?:\"([^\"]*)\"|([^,\\s]*))");

  /** A manifest or index as the registry sent it, with its digest (verified). */
  public record Document(byte[] body, String mediaType, String digest) {}

  private final RegistryCredentials credentials;
  private final Set<String> plainHttpHosts;
  private final HttpClient http;

  /** {@code Authorization} values by host and repository (Bearer) or host (Basic). */
  private final Map<String, Authorization> authorizations = new ConcurrentHashMap<>();

  private record Authorization(String header, long expiresAtNanos) {
    boolean valid() {
      return System.nanoTime() - expiresAtNanos < 0;
    }
  }

  /**
   * A client with {@code credentials}, speaking plain HTTP to loopback hosts and to {@code
   * plainHttpHosts} ({@code host[:port]}), HTTPS to every other.
   */
  public RegistryClient(RegistryCredentials credentials, Set<String> plainHttpHosts) {
    this.credentials = credentials;
    this.plainHttpHosts = Set.copyOf(plainHttpHosts);
    this.http =
        HttpClient.newBuilder()
            .connectTimeout(CONNECT_TIMEOUT)
            .followRedirects(HttpClient.Redirect.NEVER)
            .version(HttpClient.Version.HTTP_1_1)
            .build();
  }

  // ---- manifests and small blobs ------------------------------------------------------------

  /**
   * The manifest or index {@code ref} names (its tag, or its digest if it has one); its digest is
   * computed from the bytes and must equal the reference's digest if that was given.
   */
  public Document manifest(ImageReference ref) {
    return manifest(ref, ref.manifestReference());
  }

  /** The manifest or index at {@code tagOrDigest} in {@code ref}'s repository. */
  public Document manifest(ImageReference ref, String tagOrDigest) {
    URI uri = uri(ref, "/manifests/" + tagOrDigest);
    HttpResponse<InputStream> response =
        send(
            ref,
            uri,
            Map.of("Accept", String.join(", ", MANIFEST_TYPES)),
            "the manifest of " + ref);
    byte[] body = readBounded(response, MAX_DOCUMENT, "the manifest of " + ref);
    String digest = "sha256:" + sha256Hex(body);
    if (tagOrDigest.startsWith("sha256:") && !digest.equals(tagOrDigest)) {
      throw new RegistryException(
          "registry "
              + ref.host()
              + " sent a manifest for "
              + ref.repository()
              + "@"
              + tagOrDigest
              + " whose digest is "
              + digest
              + ": refused");
    }
    String type = response.headers().firstValue("Content-Type").orElse("");
    int semicolon = type.indexOf(';');
    if (semicolon >= 0) {
      type = type.substring(0, semicolon).strip();
    }
    if (!MANIFEST_TYPES.contains(type)) {
      // Some registries send a generic type: the document's own mediaType decides.
      type = mediaTypeIn(body);
    }
    return new Document(body, type, digest);
  }

  /** A small blob (an image config), verified against {@code digest}. */
  public byte[] smallBlob(ImageReference ref, String digest) {
    String what = "blob " + digest + " of " + ref;
    HttpResponse<InputStream> response = send(ref, uri(ref, "/blobs/" + digest), Map.of(), what);
    byte[] body = readBounded(response, MAX_DOCUMENT, what);
    String actual = "sha256:" + sha256Hex(body);
    if (!actual.equals(digest)) {
      throw new RegistryException(
          "registry " + ref.host() + " sent " + what + " with digest " + actual + ": refused");
    }
    return body;
  }

  // ---- layer blobs ---------------------------------------------------------------------------

  /**
   * Downloads blob {@code digest} of {@code size} bytes to {@code file}, continuing a partial
   * download that is there, and returns once {@code file} holds exactly the blob. {@code progress}
   * hears the total bytes in the file as they arrive (first the bytes already there); {@code
   * retrying} hears why a transfer broke, each time it is resumed.
   *
   * @throws RegistryException if the registry fails {@value #ATTEMPTS} times in a row, or the bytes
   *     do not match the digest (the file is then deleted)
   */
  public void downloadBlob(
      ImageReference ref,
      String digest,
      long size,
      Path file,
      LongConsumer progress,
      Consumer<String> retrying) {
    String what = "blob " + digest + " of " + ref;
    try (FileChannel out =
        FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE)) {
      MessageDigest sha = sha256();
      long have = Math.min(out.size(), size);
      out.truncate(have);
      hashPrefix(file, have, sha);
      progress.accept(have);
      RegistryException last = null;
      for (int attempt = 1; attempt <= ATTEMPTS && have < size; attempt++) {
        try {
          have = transfer(ref, digest, size, have, out, sha, progress, what);
          last = null;
        } catch (RegistryException e) {
          if (!e.isTransient()) {
            throw e;
          }
          last = e;
          have = out.size();
          if (attempt < ATTEMPTS) {
            retrying.accept(
                e.getMessage() + "; resuming (attempt " + (attempt + 1) + " of " + ATTEMPTS + ")");
            sleepBeforeRetry(attempt);
          }
        }
      }
      if (last != null) {
        throw last;
      }
      String actual = "sha256:" + HexFormat.of().formatHex(sha.digest());
      if (!actual.equals(digest)) {
        out.close();
        Files.deleteIfExists(file);
        throw new RegistryException(
            "registry "
                + ref.host()
                + " sent "
                + what
                + " whose sha256 is "
                + actual
                + ": refused");
      }
      out.force(true);
    } catch (IOException e) {
      throw new RegistryException("cannot write " + what + " to " + file + ": " + e, e);
    }
  }

  /** One GET of the blob from byte {@code have}; returns how many bytes the file then holds. */
  private long transfer(
      ImageReference ref,
      String digest,
      long size,
      long have,
      FileChannel out,
      MessageDigest sha,
      LongConsumer progress,
      String what)
      throws IOException {
    Map<String, String> headers = have > 0 ? Map.of("Range", "bytes=" + have + "-") : Map.of();
    HttpResponse<InputStream> response = send(ref, uri(ref, "/blobs/" + digest), headers, what);
    if (response.statusCode() == 200 && have > 0) {
      // The registry ignores ranges: start again from the first byte.
      out.truncate(0);
      sha.reset();
      have = 0;
      progress.accept(0);
    } else if (response.statusCode() == 206) {
      String range = response.headers().firstValue("Content-Range").orElse("");
      if (!range.startsWith("bytes " + have + "-")) {
        response.body().close();
        throw new RegistryException(
            "registry " + ref.host() + " answered a range request for " + what + " with " + range);
      }
    }
    out.position(have);
    byte[] buffer = new byte[256 * 1024];
    try (InputStream in = new StallGuard(response.body(), STALL_SECONDS).stream()) {
      int n;
      while ((n = in.read(buffer, 0, (int) Math.min(buffer.length, size - have + 1))) > 0) {
        if (have + n > size) {
          throw new RegistryException(
              "registry " + ref.host() + " sent more than the " + size + " bytes of " + what);
        }
        out.write(java.nio.ByteBuffer.wrap(buffer, 0, n));
        sha.update(buffer, 0, n);
        have += n;
        progress.accept(have);
      }
    } catch (IOException e) {
      throw new RegistryException(
          "the download of " + what + " from " + ref.host() + " broke at byte " + have + ": " + e,
          e,
          true);
    }
    if (have < size) {
      throw new RegistryException(
          "the download of "
              + what
              + " from "
              + ref.host()
              + " ended at byte "
              + have
              + " of "
              + size,
          null,
          true);
    }
    return have;
  }

  private static void sleepBeforeRetry(int attempt) {
    try {
      Thread.sleep(250L * attempt);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new RegistryException("interrupted while downloading", e);
    }
  }

  private static void hashPrefix(Path file, long length, MessageDigest sha) throws IOException {
    try (InputStream in = Files.newInputStream(file)) {
      byte[] buffer = new byte[1 << 20];
      long left = length;
      while (left > 0) {
        int n = in.read(buffer, 0, (int) Math.min(buffer.length, left));
        if (n < 0) {
          throw new IOException(file + " shrank while being read");
        }
        sha.update(buffer, 0, n);
        left -= n;
      }
    }
  }

  // ---- pushing -------------------------------------------------------------------------------

  /** Whether the registry has blob {@code digest} in {@code ref}'s repository (a HEAD). */
  public boolean hasBlob(ImageReference ref, String digest) {
    String what = "blob " + digest + " of " + ref.repository();
    HttpResponse<InputStream> response =
        exchange(ref, "HEAD", uri(ref, "/blobs/" + digest), Map.of(), null, PUSH, what);
    if (response.statusCode() == 404) {
      discard(response);
      return false;
    }
    discard(checked(ref, response, what));
    return true;
  }

  /**
   * Uploads {@code file} as blob {@code digest} of {@code ref}'s repository in one request: a
   * {@code POST} opens the upload, a {@code PUT} of the whole file to the location it names closes
   * it with the digest, which the registry checks. {@code progress} hears the bytes sent so far. A
   * transfer that breaks is started again, up to {@value #ATTEMPTS} attempts.
   */
  public void uploadBlob(ImageReference ref, String digest, Path file, LongConsumer progress) {
    long size;
    try {
      size = Files.size(file);
    } catch (IOException e) {
      throw new RegistryException("cannot read " + file + " to upload it: " + e, e);
    }
    upload(
        ref,
        digest,
        () ->
            HttpRequest.BodyPublishers.fromPublisher(
                HttpRequest.BodyPublishers.ofInputStream(() -> counting(file, progress)), size));
  }

  /** Uploads {@code content} (an image config) as blob {@code digest}, as {@link #uploadBlob}. */
  public void uploadBlob(ImageReference ref, String digest, byte[] content) {
    upload(ref, digest, () -> HttpRequest.BodyPublishers.ofByteArray(content));
  }

  private void upload(ImageReference ref, String digest, Supplier<HttpRequest.BodyPublisher> body) {
    String what = "the upload of blob " + digest + " to " + ref.repository();
    for (int attempt = 1; ; attempt++) {
      try {
        URI start = uri(ref, "/blobs/uploads/");
        HttpResponse<InputStream> opened =
            checked(ref, exchange(ref, "POST", start, Map.of(), null, PUSH, what), what);
        discard(opened);
        String location =
            opened
                .headers()
                .firstValue("Location")
                .orElseThrow(
                    () ->
                        new RegistryException(
                            "registry " + ref.host() + " opened " + what + " without a Location"));
        URI session = start.resolve(location);
        URI put =
            URI.create(
                session
                    + (session.getRawQuery() == null ? "?" : "&")
                    + "digest="
                    + URLEncoder.encode(digest, StandardCharsets.UTF_8));
        discard(
            checked(
                ref,
                exchange(
                    ref,
                    "PUT",
                    put,
                    Map.of("Content-Type", "application/octet-stream"),
                    body,
                    PUSH,
                    what),
                what));
        return;
      } catch (RegistryException e) {
        if (!e.isTransient() || attempt >= ATTEMPTS) {
          throw e;
        }
        sleepBeforeRetry(attempt);
      }
    }
  }

  /**
   * Puts image manifest {@code body} of media type {@code mediaType} as tag {@code tag} of {@code
   * ref}'s repository and returns its digest, which the registry must confirm.
   */
  public String putManifest(ImageReference ref, String tag, String mediaType, byte[] body) {
    String digest = "sha256:" + sha256Hex(body);
    String what = "the manifest " + ref.repository() + ":" + tag;
    HttpResponse<InputStream> response =
        checked(
            ref,
            exchange(
                ref,
                "PUT",
                uri(ref, "/manifests/" + tag),
                Map.of("Content-Type", mediaType),
                () -> HttpRequest.BodyPublishers.ofByteArray(body),
                PUSH,
                what),
            what);
    discard(response);
    Optional<String> confirmed = response.headers().firstValue("Docker-Content-Digest");
    if (confirmed.isPresent() && !confirmed.get().equals(digest)) {
      throw new RegistryException(
          "registry "
              + ref.host()
              + " stored "
              + what
              + " as "
              + confirmed.get()
              + ", not as its digest "
              + digest);
    }
    return digest;
  }

  /** {@code file} to read from, telling {@code progress} how many bytes were read so far. */
  private static InputStream counting(Path file, LongConsumer progress) {
    InputStream in;
    try {
      in = Files.newInputStream(file);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    progress.accept(0);
    return new java.io.FilterInputStream(in) {
      private long read;

      @Override
      public int read() throws IOException {
        int b = super.read();
        if (b >= 0) {
          progress.accept(++read);
        }
        return b;
      }

      @Override
      public int read(byte[] buffer, int offset, int length) throws IOException {
        int n = super.read(buffer, offset, length);
        if (n > 0) {
          read += n;
          progress.accept(read);
        }
        return n;
      }
    };
  }

  // ---- requests, auth, redirects -------------------------------------------------------------

  /** Sends a GET for pulling, authenticating as the registry asks; a 2xx response, or fails. */
  private HttpResponse<InputStream> send(
      ImageReference ref, URI uri, Map<String, String> headers, String what) {
    return checked(ref, exchange(ref, "GET", uri, headers, null, PULL, what), what);
  }

  /** {@code response} if it is a 2xx; else fails with what the registry said. */
  private HttpResponse<InputStream> checked(
      ImageReference ref, HttpResponse<InputStream> response, String what) {
    int status = response.statusCode();
    if (status / 100 != 2) {
      String detail = errorDetail(response);
      throw new RegistryException(
          switch (status) {
            case 403 ->
                "registry "
                    + ref.host()
                    + " denied access to "
                    + what
                    + detail
                    + credentialsSource(ref).map(s -> " for the credentials from " + s).orElse("");
            case 404 -> what + " was not found in registry " + ref.host() + detail;
            case 429 ->
                "registry " + ref.host() + " refused " + what + ": too many requests" + detail;
            default -> "registry " + ref.host() + " answered " + status + " for " + what + detail;
          },
          null,
          status >= 500);
    }
    return response;
  }

  /**
   * Sends a request for {@code actions} ({@link #PULL} or {@link #PUSH}) of the repository,
   * authenticating as the registry asks (a second time with a body made anew by {@code body}); the
   * response whatever its status, but a 401 after authenticating, which fails.
   */
  private HttpResponse<InputStream> exchange(
      ImageReference ref,
      String method,
      URI uri,
      Map<String, String> headers,
      Supplier<HttpRequest.BodyPublisher> body,
      String actions,
      String what) {
    HttpResponse<InputStream> response =
        request(ref, method, uri, headers, body, authorization(ref, actions), what);
    if (response.statusCode() == 401) {
      String challenge = response.headers().firstValue("WWW-Authenticate").orElse("");
      discard(response);
      Authorization auth = authenticate(ref, challenge, actions, what);
      response = request(ref, method, uri, headers, body, auth.header(), what);
      if (response.statusCode() == 401) {
        discard(response);
        throw refused(ref, actions, what);
      }
    }
    return response;
  }

  /**
   * One request, following redirects of a GET or HEAD; the Authorization header only to the
   * registry's own host and port.
   */
  private HttpResponse<InputStream> request(
      ImageReference ref,
      String method,
      URI uri,
      Map<String, String> headers,
      Supplier<HttpRequest.BodyPublisher> body,
      String authorization,
      String what) {
    boolean follows = method.equals("GET") || method.equals("HEAD");
    URI target = uri;
    for (int hop = 0; ; hop++) {
      HttpRequest.Builder request =
          HttpRequest.newBuilder(target)
              .timeout(HEADERS_TIMEOUT)
              .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : body.get());
      headers.forEach(request::header);
      // Not even to where the registry itself sends a client (an upload's Location, a redirect).
      if (authorization != null && sameOrigin(target, uri(ref, "/"))) {
        request.header("Authorization", authorization);
      }
      HttpResponse<InputStream> response;
      try {
        response = http.send(request.build(), HttpResponse.BodyHandlers.ofInputStream());
      } catch (ConnectException e) {
        throw new RegistryException(
            "cannot reach registry " + ref.host() + " at " + target.getAuthority() + ": " + e,
            e,
            true);
      } catch (HttpTimeoutException e) {
        throw new RegistryException(
            "cannot reach registry " + ref.host() + ": no answer within " + HEADERS_TIMEOUT,
            e,
            true);
      } catch (IOException e) {
        throw new RegistryException(
            "cannot reach registry " + ref.host() + " for " + what + ": " + e, e, true);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new RegistryException("interrupted while sending " + what, e);
      }
      int status = response.statusCode();
      if (follows
          && (status == 301 || status == 302 || status == 303 || status == 307 || status == 308)) {
        Optional<String> location = response.headers().firstValue("Location");
        discard(response);
        if (location.isEmpty() || hop >= MAX_REDIRECTS) {
          throw new RegistryException(
              "registry " + ref.host() + " redirected " + what + " too often or nowhere");
        }
        target = target.resolve(location.get());
        if (!target.getScheme().equals("https") && !target.getScheme().equals("http")) {
          throw new RegistryException(
              "registry "
                  + ref.host()
                  + " redirected "
                  + what
                  + " to a "
                  + target.getScheme()
                  + " URL");
        }
        continue;
      }
      return response;
    }
  }

  private String authorization(ImageReference ref, String actions) {
    Authorization bearer = authorizations.get(tokenKey(ref, actions));
    if (bearer != null && bearer.valid()) {
      return bearer.header();
    }
    Authorization basic = authorizations.get(ref.host());
    return basic != null ? basic.header() : null;
  }

  /** Where a Bearer token for {@code actions} of {@code ref}'s repository is cached. */
  private static String tokenKey(ImageReference ref, String actions) {
    return ref.host() + "/" + ref.repository() + ":" + actions;
  }

  /**
   * Answers a {@code 401}'s challenge: a Bearer token for {@code actions} of the repository, or
   * Basic.
   */
  private Authorization authenticate(
      ImageReference ref, String challenge, String actions, String what) {
    Optional<RegistryCredentials.Credentials> creds = credentials.forHost(ref.host());
    String scheme = challenge.strip().split("\\s+", 2)[0].toLowerCase(Locale.ROOT);
    if (scheme.equals("basic")) {
      RegistryCredentials.Credentials c =
          creds.orElseThrow(() -> needsCredentials(ref, actions, what));
      if (c.username() == null || c.password() == null) {
        throw new RegistryException(
            "registry "
                + ref.host()
                + " asks for a user and password; "
                + c.source()
                + " holds an identity token");
      }
      Authorization basic = new Authorization(basic(c), Long.MAX_VALUE);
      authorizations.put(ref.host(), basic);
      return basic;
    }
    if (!scheme.equals("bearer")) {
      throw new RegistryException(
          "registry "
              + ref.host()
              + " asks for authentication this client does not speak: '"
              + challenge
              + "'");
    }
    Map<String, String> params = challengeParams(challenge);
    String realm = params.get("realm");
    if (realm == null || realm.isEmpty()) {
      throw new RegistryException(
          "registry " + ref.host() + " asks for a Bearer token without naming its realm");
    }
    String scope = "repository:" + ref.repository() + ":" + actions;
    Authorization token =
        fetchToken(ref, URI.create(realm), params.get("service"), scope, actions, creds);
    authorizations.put(tokenKey(ref, actions), token);
    return token;
  }

  private Authorization fetchToken(
      ImageReference ref,
      URI realm,
      String service,
      String scope,
      String actions,
      Optional<RegistryCredentials.Credentials> creds) {
    if (!realm.getScheme().equals("https")
        && !(realm.getScheme().equals("http") && isPlain(realm.getAuthority()))) {
      throw new RegistryException(
          "registry "
              + ref.host()
              + " names token realm "
              + realm
              + ", which is neither HTTPS nor a plain-HTTP registry host");
    }
    StringBuilder query = new StringBuilder();
    if (service != null) {
      query.append("service=").append(URLEncoder.encode(service, StandardCharsets.UTF_8));
    }
    query
        .append(query.isEmpty() ? "" : "&")
        .append("scope=")
        .append(URLEncoder.encode(scope, StandardCharsets.UTF_8));
    HttpRequest.Builder request;
    RegistryCredentials.Credentials c = creds.orElse(null);
    if (c != null && c.identityToken() != null) {
      // OAuth2 refresh-token grant, as docker does with an identity token.
      String form =
          query
              + "&grant_type=refresh_token&client_id=sandbox4j&refresh_token="
              + URLEncoder.encode(c.identityToken(), StandardCharsets.UTF_8);
      request =
          HttpRequest.newBuilder(realm)
              .header("Content-Type", "application/x-www-form-urlencoded")
              .POST(HttpRequest.BodyPublishers.ofString(form));
    } else {
      String separator = realm.getQuery() == null ? "?" : "&";
      request = HttpRequest.newBuilder(URI.create(realm + separator + query)).GET();
      if (c != null) {
        request.header("Authorization", basic(c));
      }
    }
    HttpResponse<InputStream> response;
    try {
      response =
          http.send(
              request.timeout(HEADERS_TIMEOUT).build(), HttpResponse.BodyHandlers.ofInputStream());
    } catch (IOException e) {
      throw new RegistryException(
          "cannot reach the token service " + realm + " of registry " + ref.host() + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new RegistryException("interrupted while asking " + realm + " for a token", e);
    }
    if (response.statusCode() == 401 || response.statusCode() == 403) {
      discard(response);
      if (c == null) {
        throw needsCredentials(ref, actions, "a token for " + scope);
      }
      throw refused(ref, actions, "a token for " + scope);
    }
    if (response.statusCode() / 100 != 2) {
      String detail = errorDetail(response);
      throw new RegistryException(
          "the token service "
              + realm
              + " of registry "
              + ref.host()
              + " answered "
              + response.statusCode()
              + detail);
    }
    JsonNode answer;
    try {
      answer = JSON.readTree(readBounded(response, 1024 * 1024, "a token"));
    } catch (IOException e) {
      throw new RegistryException("the token service " + realm + " sent no JSON: " + e, e);
    }
    String token = answer.path("token").asText("");
    if (token.isEmpty()) {
      token = answer.path("access_token").asText("");
    }
    if (token.isEmpty()) {
      throw new RegistryException("the token service " + realm + " sent no token");
    }
    long seconds = Math.max(answer.path("expires_in").asLong(60), 60) - 10;
    return new Authorization("Bearer " + token, System.nanoTime() + seconds * 1_000_000_000L);
  }

  static Map<String, String> challengeParams(String challenge) {
    String[] parts = challenge.strip().split("\\s+", 2);
    Map<String, String> params = new java.util.HashMap<>();
    if (parts.length < 2) {
      return params;
    }
    Matcher m = CHALLENGE_PARAM.matcher(parts[1]);
    while (m.find()) {
      params.put(m.group(1).toLowerCase(Locale.ROOT), m.group(2) != null ? m.group(2) : m.group(3));
    }
    return params;
  }

  private static String basic(RegistryCredentials.Credentials c) {
    return "Basic "
        + Base64.getEncoder()
            .encodeToString((c.username() + ":" + c.password()).getBytes(StandardCharsets.UTF_8));
  }

  private RegistryException needsCredentials(ImageReference ref, String actions, String what) {
    return new RegistryException(
        "registry "
            + ref.host()
            + " needs credentials for "
            + what
            + ", and none are configured: run `docker login "
            + ref.host()
            + "` (read from ~/.docker/config.json), or give them: `sandbox4j image "
            + (actions.equals(PUSH) ? "push" : "pull")
            + " --registry-auth "
            + ref.host()
            + "=USER:PASSWORD`, LocalSandbox.Builder.registryAuth");
  }

  private RegistryException refused(ImageReference ref, String actions, String what) {
    Optional<RegistryCredentials.Credentials> creds = credentials.forHost(ref.host());
    return new RegistryException(
        creds
            .map(
                c ->
                    "registry "
                        + ref.host()
                        + " refused the credentials"
                        + (c.username() != null ? " of user " + c.username() : "")
                        + " (from "
                        + c.source()
                        + ") for "
                        + what
                        + ": wrong user or password, or no access")
            .orElseGet(() -> needsCredentials(ref, actions, what).getMessage()));
  }

  /** Where the credentials for {@code ref}'s registry come from, if there are any. */
  private Optional<String> credentialsSource(ImageReference ref) {
    return credentials.forHost(ref.host()).map(RegistryCredentials.Credentials::source);
  }

  // ---- helpers -------------------------------------------------------------------------------

  private URI uri(ImageReference ref, String path) {
    String scheme = isPlain(ref.apiHost()) ? "http" : "https";
    return URI.create(scheme + "://" + ref.apiHost() + "/v2/" + ref.repository() + path);
  }

  /** Whether {@code a} and {@code b} have the same scheme, host and port (a default one or not). */
  static boolean sameOrigin(URI a, URI b) {
    return a.getScheme().equalsIgnoreCase(b.getScheme())
        && a.getHost() != null
        && a.getHost().equalsIgnoreCase(b.getHost())
        && port(a) == port(b);
  }

  private static int port(URI uri) {
    return uri.getPort() != -1
        ? uri.getPort()
        : uri.getScheme().equalsIgnoreCase("https") ? 443 : 80;
  }

  /** Whether {@code authority} ({@code host[:port]}) gets plain HTTP. */
  boolean isPlain(String authority) {
    if (plainHttpHosts.contains(authority)) {
      return true;
    }
    String host = authority;
    if (host.startsWith("[")) {
      host = host.substring(1, host.indexOf(']'));
    } else if (host.indexOf(':') >= 0) {
      host = host.substring(0, host.indexOf(':'));
    }
    if (host.equals("localhost")) {
      return true;
    }
    if (!host.matches("[0-9.]+|[0-9A-Fa-f:]+")) {
      return false; // a name: never resolved just to decide this
    }
    try {
      return InetAddress.getByName(host).isLoopbackAddress();
    } catch (IOException e) {
      return false;
    }
  }

  private static String mediaTypeIn(byte[] body) {
    try {
      return JSON.readTree(body).path("mediaType").asText("");
    } catch (IOException e) {
      throw new RegistryException("a registry sent a manifest that is not JSON: " + e, e);
    }
  }

  private static byte[] readBounded(HttpResponse<InputStream> response, int max, String what) {
    try (InputStream in = new StallGuard(response.body(), STALL_SECONDS).stream()) {
      byte[] body = in.readNBytes(max + 1);
      if (body.length > max) {
        throw new RegistryException(what + " is larger than " + max + " bytes: refused");
      }
      return body;
    } catch (IOException e) {
      throw new RegistryException("reading " + what + " failed: " + e, e);
    }
  }

  /** The registry's error codes and messages ({@code {"errors":[{code, message}]}}), if any. */
  private static String errorDetail(HttpResponse<InputStream> response) {
    try (InputStream in = response.body()) {
      JsonNode errors = JSON.readTree(in.readNBytes(64 * 1024)).path("errors");
      List<String> parts = new ArrayList<>();
      for (JsonNode e : errors) {
        parts.add(
            e.path("code").asText("?")
                + ": "
                + e.path("message").asText("").replaceAll("\\p{Cntrl}", "?"));
        if (parts.size() == 3) {
          break;
        }
      }
      return parts.isEmpty() ? "" : " (" + String.join("; ", parts) + ")";
    } catch (IOException | RuntimeException e) {
      return "";
    }
  }

  private static void discard(HttpResponse<InputStream> response) {
    try {
      response.body().close();
    } catch (IOException e) {
      // nothing to keep
    }
  }

  static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  static String sha256Hex(byte[] bytes) {
    return HexFormat.of().formatHex(sha256().digest(bytes));
  }
}
