package dev.sandbox4j.boxd;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Map;

/**
 * The fake boxd ({@link FakeBoxd}) for other modules' tests (the CLI's): the gRPC API and the token
 * endpoint on loopback over local sandboxes, and the environment variables a client needs.
 */
public final class FakeBoxdServer implements AutoCloseable {
  private final FakeBoxd fake;

  /** Starts the fake; the local engine must be usable (root, {@code sandbox4j setup}). */
  public FakeBoxdServer() {
    try {
      this.fake = new FakeBoxd();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** {@code BOXD_BASE_URL}, {@code BOXD_TOKEN_URL} and {@code BOXD_API_KEY} of it. */
  public Map<String, String> environment() {
    return Map.of(
        BoxdSandbox.BASE_URL_VARIABLE,
        fake.baseUrl(),
        BoxdSandbox.TOKEN_URL_VARIABLE,
        fake.tokenUrl(),
        BoxdSandbox.KEY_VARIABLE,
        FakeBoxd.API_KEY);
  }

  @Override
  public void close() {
    fake.close();
  }
}
