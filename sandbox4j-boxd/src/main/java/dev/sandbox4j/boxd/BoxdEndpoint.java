package dev.sandbox4j.boxd;

import java.net.URI;

/**
 * Where the API is and whether it speaks TLS, read from a base URL as boxd's Python SDK reads
 * {@code BOXD_BASE_URL}: {@code https://} is TLS, {@code http://} is plaintext (h2c), and a bare
 * {@code host:port} is TLS except for localhost and 127.x, which are plaintext.
 */
record BoxdEndpoint(String host, int port, boolean tls) {

  /** The public service, over TLS as boxd's current clients reach it. */
  static final String DEFAULT_BASE_URL = "https://boxd.sh:9443";

  static final int DEFAULT_PORT = 9443;

  BoxdEndpoint {
    if (host.isEmpty()) {
      throw new IllegalArgumentException("the boxd base URL has no host");
    }
    if (port < 1 || port > 65535) {
      throw new IllegalArgumentException("the boxd base URL's port is out of range: " + port);
    }
  }

  /**
   * @throws IllegalArgumentException for a URL with another scheme, a path, or no host
   */
  static BoxdEndpoint parse(String baseUrl) {
    String text = baseUrl.strip();
    boolean schemeGiven = text.contains("://");
    URI uri;
    try {
      uri = URI.create(schemeGiven ? text : "bare://" + text);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("not a boxd base URL: " + baseUrl, e);
    }
    String scheme = uri.getScheme().toLowerCase(java.util.Locale.ROOT);
    if (!scheme.equals("https") && !scheme.equals("http") && !scheme.equals("bare")) {
      throw new IllegalArgumentException(
          "a boxd base URL is https://HOST:PORT, http://HOST:PORT or HOST:PORT, not " + baseUrl);
    }
    if (uri.getRawPath() != null && !uri.getRawPath().isEmpty() && !uri.getRawPath().equals("/")) {
      throw new IllegalArgumentException("a boxd base URL has no path: " + baseUrl);
    }
    String host = uri.getHost();
    if (host == null) {
      throw new IllegalArgumentException("the boxd base URL has no host: " + baseUrl);
    }
    int port = uri.getPort() == -1 ? DEFAULT_PORT : uri.getPort();
    boolean tls =
        switch (scheme) {
          case "https" -> true;
          case "http" -> false;
          default -> !(host.equals("localhost") || host.startsWith("127."));
        };
    return new BoxdEndpoint(host, port, tls);
  }

  @Override
  public String toString() {
    return (tls ? "https://" : "http://") + host + ":" + port;
  }
}
