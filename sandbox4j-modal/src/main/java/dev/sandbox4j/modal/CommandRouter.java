package dev.sandbox4j.modal;

import dev.sandbox4j.modal.internal.proto.TaskGetCommandRouterAccessRequest;
import dev.sandbox4j.modal.internal.proto.TaskGetCommandRouterAccessResponse;
import dev.sandbox4j.modal.internal.proto.router.TaskCommandRouterGrpc;
import dev.sandbox4j.modal.internal.proto.router.TaskCommandRouterGrpc.TaskCommandRouterBlockingStub;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.MetadataUtils;
import java.net.URI;
import java.time.Duration;
import java.time.Instant;
import java.util.function.Function;

/**
 * The command router of one sandbox's task ({@code modal.task_command_router.TaskCommandRouter}),
 * which runs its commands: reached at the URL {@code TaskGetCommandRouterAccess} gives, with that
 * call's JWT as {@code authorization: Bearer} and no {@code x-modal-*} headers. The URL is {@code
 * https://}; like libmodal, it is reached without TLS when the control plane's host is this
 * machine. On {@code UNAUTHENTICATED} the access is fetched again (unless the JWT still has 30 s to
 * live) and the call made once more. State: {@code jwt} under {@code this}.
 */
final class CommandRouter implements AutoCloseable {
  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
  private static final Duration STILL_VALID = Duration.ofSeconds(30);

  private final ControlPlane control;
  private final String sandboxId;
  private final String taskId;
  private final URI url;
  private final ManagedChannel channel;
  private String jwt;

  private CommandRouter(
      ControlPlane control, String sandboxId, String taskId, URI url, String jwt) {
    this.control = control;
    this.sandboxId = sandboxId;
    this.taskId = taskId;
    this.url = url;
    this.jwt = jwt;
    this.channel = ControlPlane.channel(url, control.config().localServer());
  }

  static CommandRouter open(ControlPlane control, String sandboxId, String taskId) {
    TaskGetCommandRouterAccessResponse access = access(control, sandboxId, taskId);
    URI url = parseUrl(access.getUrl());
    return new CommandRouter(control, sandboxId, taskId, url, access.getJwt());
  }

  String taskId() {
    return taskId;
  }

  private static TaskGetCommandRouterAccessResponse access(
      ControlPlane control, String sandboxId, String taskId) {
    try {
      return control.call(
          s ->
              s.taskGetCommandRouterAccess(
                  TaskGetCommandRouterAccessRequest.newBuilder().setTaskId(taskId).build()));
    } catch (StatusRuntimeException e) {
      if (e.getStatus().getCode() == Status.Code.FAILED_PRECONDITION) {
        throw new dev.sandbox4j.workspace.WorkspaceException(
            "Modal sandbox "
                + sandboxId
                + ": command router access is not available for this sandbox ("
                + e.getStatus().getDescription()
                + ")",
            e);
      }
      throw ModalErrors.translateForSandbox("reaching the command router", sandboxId, e);
    }
  }

  private static URI parseUrl(String text) {
    URI url = URI.create(text);
    if (!"https".equals(url.getScheme()) || url.getHost() == null) {
      throw new dev.sandbox4j.workspace.WorkspaceException(
          "Modal gave an invalid command router URL " + text + " (expected https://host[:port])");
    }
    return url.getPort() > 0 ? url : URI.create("https://" + url.getHost() + ":443");
  }

  /**
   * Makes a call with the JWT; once more with fresh access after {@code UNAUTHENTICATED}. Other
   * failures are the caller's: it knows which ones it may retry.
   */
  <T> T call(Function<TaskCommandRouterBlockingStub, T> rpc) {
    String used = currentJwt();
    try {
      return rpc.apply(stub(used));
    } catch (StatusRuntimeException e) {
      if (e.getStatus().getCode() != Status.Code.UNAUTHENTICATED) {
        throw e;
      }
      return rpc.apply(stub(refresh(used)));
    }
  }

  /**
   * For a streaming call, whose {@code UNAUTHENTICATED} arrives while it is read rather than from
   * {@link #call}: fetches the access again, unless the JWT still has 30 s to live.
   */
  void renew() {
    refresh(currentJwt());
  }

  private synchronized String currentJwt() {
    return jwt;
  }

  private synchronized String refresh(String rejected) {
    if (!jwt.equals(rejected)) {
      return jwt; // another call refreshed it already
    }
    Instant expiry = AuthTokens.expiry(jwt).orElse(Instant.MIN);
    if (expiry.isAfter(Instant.now().plus(STILL_VALID))) {
      return jwt;
    }
    TaskGetCommandRouterAccessResponse access = access(control, sandboxId, taskId);
    if (!parseUrl(access.getUrl()).equals(url)) {
      throw new dev.sandbox4j.workspace.WorkspaceException(
          "Modal sandbox " + sandboxId + ": the command router moved; reattach to the sandbox");
    }
    jwt = access.getJwt();
    return jwt;
  }

  private TaskCommandRouterBlockingStub stub(String token) {
    Metadata headers = new Metadata();
    headers.put(AUTHORIZATION, "Bearer " + token);
    return TaskCommandRouterGrpc.newBlockingStub(channel)
        .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers));
  }

  /** Whether no new call can be made: the channel is shut down. */
  boolean isShutdown() {
    return channel.isShutdown();
  }

  /** Refuses new calls; those in flight go on until the server ends them. */
  void shutdown() {
    channel.shutdown();
  }

  @Override
  public void close() {
    channel.shutdownNow();
  }
}
