package dev.sandbox4j.modal;

import java.util.Map;

/**
 * The fake Modal ({@link FakeModal}) for other modules' tests (the CLI's): a control plane on
 * loopback over local sandboxes, and the environment variables a client of it needs.
 */
public final class FakeModalServer implements AutoCloseable {
  private final FakeModal fake;

  /** Starts the fake; the local engine must be usable (root, {@code sandbox4j setup}). */
  public FakeModalServer() {
    LocalEngine.require();
    this.fake = new FakeModal();
  }

  /** {@code MODAL_SERVER_URL}, {@code MODAL_TOKEN_ID} and {@code MODAL_TOKEN_SECRET} of it. */
  public Map<String, String> environment() {
    return Map.of(
        "MODAL_SERVER_URL",
        fake.url(),
        "MODAL_TOKEN_ID",
        FakeModal.TOKEN_ID,
        "MODAL_TOKEN_SECRET",
        FakeModal.TOKEN_SECRET);
  }

  @Override
  public void close() {
    fake.close();
  }
}
