package dev.sandbox4j.server;

import java.io.IOException;
import java.nio.charset.StandardCharsets;

/** The routes served without a key: the health check, the metrics and the OpenAPI document. */
final class OpenRoutes {

  private final Metrics metrics;
  private final byte[] openApi;

  OpenRoutes(Metrics metrics, byte[] openApi) {
    this.metrics = metrics;
    this.openApi = openApi;
  }

  void health(Call c) throws IOException {
    c.response.setContentType("text/plain");
    c.response.getOutputStream().write("ok".getBytes(StandardCharsets.US_ASCII));
  }

  void metrics(Call c) throws IOException {
    c.response.setContentType("text/plain; version=0.0.4; charset=utf-8");
    metrics.write(c.response.getOutputStream());
  }

  void openApi(Call c) throws IOException {
    c.response.setContentType("application/json");
    c.response.getOutputStream().write(openApi);
  }
}
