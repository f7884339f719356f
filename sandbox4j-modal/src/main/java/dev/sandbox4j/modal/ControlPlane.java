package dev.sandbox4j.modal;

import dev.sandbox4j.modal.internal.proto.AuthTokenGetRequest;
import dev.sandbox4j.modal.internal.proto.ClientType;
import dev.sandbox4j.modal.internal.proto.ModalClientGrpc;
import dev.sandbox4j.modal.internal.proto.ModalClientGrpc.ModalClientBlockingStub;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.MetadataUtils;
import java.time.Clock;
import java.time.Duration;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * The connection to Modal's control plane ({@code modal.client.ModalClient}): one channel, the
 * headers Modal's clients send on every call, the auth token ({@link AuthTokens}), and libmodal's
 * retries of unary calls ({@link Retries}), each attempt carrying the same {@code
 * x-idempotency-key} so that the server can tell a retry from a new call. Streaming calls are not
 * retried here: their callers resume them where they stopped. Thread-safe.
 */
final class ControlPlane implements AutoCloseable {
  static final Metadata.Key<String> CLIENT_TYPE = key("x-modal-client-type");
  static final Metadata.Key<String> CLIENT_VERSION = key("x-modal-client-version");
  static final Metadata.Key<String> LIBMODAL_VERSION = key("x-modal-libmodal-version");
  static final Metadata.Key<String> TOKEN_ID = key("x-modal-token-id");
  static final Metadata.Key<String> TOKEN_SECRET = key("x-modal-token-secret");
  static final Metadata.Key<String> AUTH_TOKEN = key("x-modal-auth-token");
  static final Metadata.Key<String> IDEMPOTENCY_KEY = key("x-idempotency-key");
  static final Metadata.Key<String> RETRY_ATTEMPT = key("x-retry-attempt");
  static final Metadata.Key<String> RETRY_DELAY = key("x-retry-delay");

  /** The Python SDK version whose behaviour libmodal's clients declare; we declare the same. */
  static final String CLIENT_VERSION_VALUE = "1.0.0";

  static final String LIBMODAL_VERSION_VALUE = "sandbox4j-modal/0.1.0";

  private static final int MAX_MESSAGE_BYTES = 100 << 20;

  private final ModalConfig config;
  private final ManagedChannel channel;
  private final AuthTokens tokens;

  ControlPlane(ModalConfig config, Clock clock) {
    this.config = config;
    this.channel = channel(config.serverUrl(), config.plaintext());
    this.tokens = new AuthTokens(this::fetchToken, clock);
  }

  static ManagedChannel channel(java.net.URI url, boolean plaintext) {
    int port = url.getPort() > 0 ? url.getPort() : plaintext ? 80 : 443;
    NettyChannelBuilder builder =
        NettyChannelBuilder.forAddress(url.getHost(), port)
            .maxInboundMessageSize(MAX_MESSAGE_BYTES)
            .flowControlWindow(64 << 20)
            .keepAliveTime(30, TimeUnit.SECONDS)
            .keepAliveTimeout(10, TimeUnit.SECONDS)
            .keepAliveWithoutCalls(true);
    return (plaintext ? builder.usePlaintext() : builder.useTransportSecurity()).build();
  }

  ModalConfig config() {
    return config;
  }

  /**
   * Makes a unary call, retrying the retryable codes with backoff. {@code what} names the call in
   * error messages.
   *
   * @throws StatusRuntimeException the last failure, for the caller to translate ({@link
   *     ModalErrors})
   */
  <T> T call(Function<ModalClientBlockingStub, T> rpc) {
    String idempotencyKey = UUID.randomUUID().toString();
    long first = System.nanoTime();
    boolean reauthenticated = false;
    for (int attempt = 0; ; attempt++) {
      Metadata headers = headers();
      String token = tokens.current();
      headers.put(AUTH_TOKEN, token);
      headers.put(IDEMPOTENCY_KEY, idempotencyKey);
      headers.put(RETRY_ATTEMPT, Integer.toString(attempt));
      headers.put(
          RETRY_DELAY, String.format(Locale.ROOT, "%.3f", (System.nanoTime() - first) / 1e9));
      try {
        return rpc.apply(stub(headers));
      } catch (StatusRuntimeException e) {
        Status.Code code = e.getStatus().getCode();
        if (code == Status.Code.UNAUTHENTICATED && !reauthenticated) {
          // the token expired early (a clock skew, a revocation): fetch another, once
          tokens.invalidate(token);
          reauthenticated = true;
          attempt--;
          continue;
        }
        if (Thread.currentThread().isInterrupted()) {
          // gRPC cancels a blocking call on an interrupted thread: that is the caller cancelling
          throw new java.util.concurrent.CancellationException("interrupted during a Modal call");
        }
        if (!Retries.retryable(code) || attempt >= Retries.MAX_RETRIES) {
          throw e;
        }
        Retries.sleep(Retries.delay(attempt));
      }
    }
  }

  /** A stub for a streaming call: the headers and the auth token, no retries. */
  ModalClientBlockingStub streaming() {
    Metadata headers = headers();
    headers.put(AUTH_TOKEN, tokens.current());
    return stub(headers);
  }

  private ModalClientBlockingStub stub(Metadata headers) {
    return ModalClientGrpc.newBlockingStub(channel)
        .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers));
  }

  /** The headers of every call, AuthTokenGet's included. */
  private Metadata headers() {
    Metadata headers = new Metadata();
    headers.put(CLIENT_TYPE, Integer.toString(ClientType.CLIENT_TYPE_LIBMODAL_VALUE));
    headers.put(CLIENT_VERSION, CLIENT_VERSION_VALUE);
    headers.put(LIBMODAL_VERSION, LIBMODAL_VERSION_VALUE);
    headers.put(TOKEN_ID, config.tokenId());
    headers.put(TOKEN_SECRET, config.tokenSecret());
    return headers;
  }

  /** AuthTokenGet, retried like any unary call but without an auth token of its own. */
  private String fetchToken() {
    String idempotencyKey = UUID.randomUUID().toString();
    for (int attempt = 0; ; attempt++) {
      Metadata headers = headers();
      headers.put(IDEMPOTENCY_KEY, idempotencyKey);
      headers.put(RETRY_ATTEMPT, Integer.toString(attempt));
      try {
        return stub(headers).authTokenGet(AuthTokenGetRequest.getDefaultInstance()).getToken();
      } catch (StatusRuntimeException e) {
        if (!Retries.retryable(e.getStatus().getCode()) || attempt >= Retries.MAX_RETRIES) {
          throw ModalErrors.translate("getting an auth token from " + config.serverUrl(), e);
        }
        Retries.sleep(Retries.delay(attempt));
      }
    }
  }

  @Override
  public void close() {
    channel.shutdownNow();
    try {
      channel.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static Metadata.Key<String> key(String name) {
    return Metadata.Key.of(name, Metadata.ASCII_STRING_MARSHALLER);
  }

  static Duration sinceNanos(long start) {
    return Duration.ofNanos(System.nanoTime() - start);
  }
}
