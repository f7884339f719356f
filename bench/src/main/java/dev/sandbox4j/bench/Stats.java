package dev.sandbox4j.bench;

import java.util.Arrays;

/**
 * Summary of one scenario's latency samples, in milliseconds. Percentiles are nearest-rank on the
 * sorted samples: the p-th percentile is the smallest sample with at least p% of the samples at or
 * below it (no interpolation, so every figure is a measured sample).
 */
record Stats(int n, double p50, double p95, double p99, double max, double mean, double[] samples) {

  /** Summarizes {@code nanos}, kept in measurement order as {@link #samples} (in ms). */
  static Stats ofNanos(long[] nanos) {
    if (nanos.length == 0) {
      throw new IllegalArgumentException("no samples");
    }
    double[] ms = new double[nanos.length];
    for (int i = 0; i < nanos.length; i++) {
      ms[i] = nanos[i] / 1_000_000.0;
    }
    double[] sorted = ms.clone();
    Arrays.sort(sorted);
    return new Stats(
        sorted.length,
        percentile(sorted, 50),
        percentile(sorted, 95),
        percentile(sorted, 99),
        sorted[sorted.length - 1],
        Math.round(Arrays.stream(nanos).average().orElseThrow()) / 1_000_000.0,
        ms);
  }

  /** Nearest rank: the sample at rank ceil(p/100 * n), 1-based, of the ascending {@code sorted}. */
  static double percentile(double[] sorted, double p) {
    if (sorted.length == 0 || p <= 0 || p > 100) {
      throw new IllegalArgumentException("percentile " + p + " of " + sorted.length + " samples");
    }
    int rank = (int) Math.ceil(p * sorted.length / 100.0);
    return sorted[Math.max(rank, 1) - 1];
  }
}
