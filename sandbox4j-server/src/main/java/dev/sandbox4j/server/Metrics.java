package dev.sandbox4j.server;

import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The server's Prometheus metrics: requests by route and status, errors by code, exec latency, and
 * the owned sandboxes by state (read from the engine at scrape time). Aggregates only: no ids, no
 * organizations. Thread-safe.
 */
final class Metrics {

  private final PrometheusRegistry registry = new PrometheusRegistry();
  private final Counter requests =
      Counter.builder()
          .name("sandbox4j_server_requests_total")
          .help("HTTP requests by method, route template and status")
          .labelNames("method", "route", "status")
          .register(registry);
  private final Counter errors =
      Counter.builder()
          .name("sandbox4j_server_errors_total")
          .help("Error answers and exec error events by code")
          .labelNames("code")
          .register(registry);
  private final Histogram execSeconds =
      Histogram.builder()
          .name("sandbox4j_server_exec_duration_seconds")
          .help("Time from an exec request to its last event")
          .classicOnly()
          .classicUpperBounds(
              0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
          .register(registry);
  private final Gauge sandboxes =
      Gauge.builder()
          .name("sandbox4j_server_sandboxes")
          .help("Sandboxes owned by the server's organizations, by state")
          .labelNames("state")
          .register(registry);
  private final Supplier<Map<String, Long>> countByState;

  Metrics(Supplier<Map<String, Long>> countByState) {
    this.countByState = countByState;
  }

  void request(String method, String route, int status) {
    requests.labelValues(method, route, Integer.toString(status)).inc();
  }

  void error(ErrorCode code) {
    errors.labelValues(code.spelling()).inc();
  }

  void exec(long nanos) {
    execSeconds.observe(nanos / 1e9);
  }

  synchronized void write(OutputStream out) throws IOException {
    Map<String, Long> counts = countByState.get();
    for (String state : Sandboxes.STATES) {
      sandboxes.labelValues(state).set(counts.getOrDefault(state, 0L));
    }
    PrometheusTextFormatWriter.create().write(out, registry.scrape());
  }
}
