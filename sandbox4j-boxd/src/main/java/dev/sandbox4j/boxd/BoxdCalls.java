package dev.sandbox4j.boxd;

import dev.sandbox4j.boxd.internal.proto.BoxdApiGrpc;
import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.AbstractStub;
import io.grpc.stub.MetadataUtils;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * The gRPC side of the client: one channel to the API, the bearer token on every call, unary calls
 * with a deadline and retries, and the mapping of gRPC status codes to workspace exceptions. The
 * channel is built on first use, so that building a provider does no I/O. Thread-safe.
 */
final class BoxdCalls implements AutoCloseable {

  /** Unary call retries after the first attempt, as boxd's SDKs default ({@code max_retries}). */
  static final int MAX_RETRIES = 2;

  /** A unary call's deadline per attempt, as boxd's SDKs default ({@code timeout}). */
  static final Duration CALL_TIMEOUT = Duration.ofSeconds(60);

  /** The largest message either side may send; boxd's clients keep frames well under it. */
  static final int MAX_MESSAGE = 4 * 1024 * 1024;

  static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  /** What a call is about: which machine or snapshot NOT_FOUND means is gone. */
  record Target(String kind, String name) {
    static final Target NONE = new Target(null, null);

    static Target machine(String id) {
      return new Target("machine", id);
    }

    static Target snapshot(String name) {
      return new Target("snapshot", name);
    }
  }

  /**
   * Whether a failed call may be sent again: reads and state changes may, creations may not (the
   * API takes no idempotency key, so a retried creation the service did carry out would make a
   * second machine or snapshot).
   */
  enum Retry {
    SAFE,
    NEVER
  }

  private final BoxdEndpoint endpoint;
  private final BoxdTokens tokens;
  private ManagedChannel channel;

  BoxdCalls(BoxdEndpoint endpoint, BoxdTokens tokens) {
    this.endpoint = endpoint;
    this.tokens = tokens;
  }

  BoxdEndpoint endpoint() {
    return endpoint;
  }

  private synchronized ManagedChannel channel() {
    if (channel == null) {
      NettyChannelBuilder builder =
          NettyChannelBuilder.forAddress(endpoint.host(), endpoint.port())
              .maxInboundMessageSize(MAX_MESSAGE);
      channel = (endpoint.tls() ? builder.useTransportSecurity() : builder.usePlaintext()).build();
    }
    return channel;
  }

  /** A stub with the current token attached; returns the token, for {@link #refused}. */
  <S extends AbstractStub<S>> Authorized<S> authorized(Function<ManagedChannel, S> stub) {
    String token = tokens.token();
    Metadata headers = new Metadata();
    headers.put(AUTHORIZATION, "Bearer " + token);
    return new Authorized<>(
        stub.apply(channel()).withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers)),
        token);
  }

  record Authorized<S>(S stub, String token) {}

  /** Forgets a token the service refused; whether a fresh one can be had. */
  boolean refused(String token) {
    tokens.evict(token);
    return tokens.renewable();
  }

  /**
   * Makes a unary call: with a {@link #CALL_TIMEOUT} deadline per attempt, up to {@link
   * #MAX_RETRIES} retries after UNAVAILABLE (if {@code retry} allows, with {@link Backoff}), and
   * one more attempt with a fresh token after UNAUTHENTICATED when the credential is an API key.
   */
  <T> T unary(
      String method,
      Target target,
      Retry retry,
      Function<BoxdApiGrpc.BoxdApiBlockingStub, T> call) {
    boolean renewed = false;
    for (int attempt = 0; ; attempt++) {
      if (Thread.currentThread().isInterrupted()) {
        // gRPC notices an interrupt only while it waits: a call answered at once ignored it
        throw new CancellationException("interrupted before boxd " + method);
      }
      Authorized<BoxdApiGrpc.BoxdApiBlockingStub> a = authorized(BoxdApiGrpc::newBlockingStub);
      try {
        return call.apply(
            a.stub().withDeadlineAfter(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS));
      } catch (StatusRuntimeException e) {
        Status.Code code = e.getStatus().getCode();
        if (code == Status.Code.UNAUTHENTICATED && !renewed && refused(a.token())) {
          renewed = true;
          attempt--;
          continue;
        }
        if (retry == Retry.SAFE && retryable(code) && attempt < MAX_RETRIES) {
          Backoff.sleep(attempt);
          continue;
        }
        throw failure(method, target, e);
      }
    }
  }

  /** Codes that say the call did not reach the service's logic: sending it again is safe. */
  static boolean retryable(Status.Code code) {
    return code == Status.Code.UNAVAILABLE;
  }

  /**
   * The workspace exception for a failed call: NOT_FOUND on a machine or snapshot is {@link
   * WorkspaceUnavailableException} (gone: do not retry), a refused argument or a taken name is
   * {@link IllegalArgumentException}, an interrupted caller gets {@link CancellationException}, and
   * everything else a {@link WorkspaceException} naming the method, code and the service's words.
   */
  static RuntimeException failure(String method, Target target, StatusRuntimeException e) {
    Status status = e.getStatus();
    String words = status.getDescription() == null ? "" : ": " + status.getDescription();
    String what = target.kind() == null ? "" : " (" + target.kind() + " " + target.name() + ")";
    String prefix = "boxd " + method + what + " failed with " + status.getCode() + words;
    return switch (status.getCode()) {
      case NOT_FOUND ->
          target.kind() == null
              ? new WorkspaceException(prefix, e)
              : new WorkspaceUnavailableException(
                  "the boxd " + target.kind() + " " + target.name() + " is gone" + words, e);
      case INVALID_ARGUMENT, ALREADY_EXISTS, OUT_OF_RANGE ->
          new IllegalArgumentException(prefix, e);
      case UNAUTHENTICATED ->
          new WorkspaceException(
              prefix + " (check BOXD_API_KEY or BOXD_TOKEN: a token given as such expires)", e);
      case PERMISSION_DENIED ->
          new WorkspaceException(prefix + " (the credentials' organization may not do this)", e);
      case RESOURCE_EXHAUSTED ->
          new WorkspaceException(prefix + " (a quota of the organization is reached)", e);
      case UNAVAILABLE ->
          new WorkspaceException(prefix + " (after " + MAX_RETRIES + " retries where safe)", e);
      case CANCELLED -> {
        if (Thread.currentThread().isInterrupted()
            || e.getCause() instanceof InterruptedException) {
          Thread.currentThread().interrupt();
          CancellationException c = new CancellationException("interrupted during boxd " + method);
          c.initCause(e);
          yield c;
        }
        yield new WorkspaceException(prefix, e);
      }
      default -> new WorkspaceException(prefix, e);
    };
  }

  @Override
  public synchronized void close() {
    if (channel != null) {
      channel.shutdownNow();
    }
  }
}
