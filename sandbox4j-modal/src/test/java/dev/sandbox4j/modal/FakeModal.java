package dev.sandbox4j.modal;

import com.google.protobuf.ByteString;
import com.google.protobuf.Empty;
import dev.sandbox4j.modal.internal.proto.AppGetOrCreateRequest;
import dev.sandbox4j.modal.internal.proto.AppGetOrCreateResponse;
import dev.sandbox4j.modal.internal.proto.AuthTokenGetRequest;
import dev.sandbox4j.modal.internal.proto.AuthTokenGetResponse;
import dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecGetOutputRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecRequest;
import dev.sandbox4j.modal.internal.proto.ContainerFilesystemExecResponse;
import dev.sandbox4j.modal.internal.proto.FilesystemRuntimeOutputBatch;
import dev.sandbox4j.modal.internal.proto.GenericResult;
import dev.sandbox4j.modal.internal.proto.GenericResult.GenericStatus;
import dev.sandbox4j.modal.internal.proto.ImageGetOrCreateRequest;
import dev.sandbox4j.modal.internal.proto.ImageGetOrCreateResponse;
import dev.sandbox4j.modal.internal.proto.ImageJoinStreamingRequest;
import dev.sandbox4j.modal.internal.proto.ImageJoinStreamingResponse;
import dev.sandbox4j.modal.internal.proto.ModalClientGrpc;
import dev.sandbox4j.modal.internal.proto.ObjectCreationType;
import dev.sandbox4j.modal.internal.proto.SandboxCreateRequest;
import dev.sandbox4j.modal.internal.proto.SandboxCreateResponse;
import dev.sandbox4j.modal.internal.proto.SandboxGetTaskIdRequest;
import dev.sandbox4j.modal.internal.proto.SandboxGetTaskIdResponse;
import dev.sandbox4j.modal.internal.proto.SandboxGetTunnelsRequest;
import dev.sandbox4j.modal.internal.proto.SandboxGetTunnelsResponse;
import dev.sandbox4j.modal.internal.proto.SandboxInfo;
import dev.sandbox4j.modal.internal.proto.SandboxListRequest;
import dev.sandbox4j.modal.internal.proto.SandboxListResponse;
import dev.sandbox4j.modal.internal.proto.SandboxSnapshotFsRequest;
import dev.sandbox4j.modal.internal.proto.SandboxSnapshotFsResponse;
import dev.sandbox4j.modal.internal.proto.SandboxTag;
import dev.sandbox4j.modal.internal.proto.SandboxTagsSetRequest;
import dev.sandbox4j.modal.internal.proto.SandboxTerminateRequest;
import dev.sandbox4j.modal.internal.proto.SandboxTerminateResponse;
import dev.sandbox4j.modal.internal.proto.SandboxWaitRequest;
import dev.sandbox4j.modal.internal.proto.SandboxWaitResponse;
import dev.sandbox4j.modal.internal.proto.SecretGetOrCreateRequest;
import dev.sandbox4j.modal.internal.proto.SecretGetOrCreateResponse;
import dev.sandbox4j.modal.internal.proto.TaskGetCommandRouterAccessRequest;
import dev.sandbox4j.modal.internal.proto.TaskGetCommandRouterAccessResponse;
import dev.sandbox4j.modal.internal.proto.TaskLogs;
import dev.sandbox4j.modal.internal.proto.TunnelData;
import dev.sandbox4j.modal.internal.proto.router.TaskCommandRouterGrpc;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStartRequest;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStartResponse;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStdinWriteRequest;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStdinWriteResponse;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStdioFileDescriptor;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStdioReadRequest;
import dev.sandbox4j.modal.internal.proto.router.TaskExecStdioReadResponse;
import dev.sandbox4j.modal.internal.proto.router.TaskExecWaitRequest;
import dev.sandbox4j.modal.internal.proto.router.TaskExecWaitResponse;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * A fake Modal on 127.0.0.1: one real gRPC server (netty) serving our own {@code .proto} subset of
 * {@code modal.client.ModalClient} and {@code modal.task_command_router.TaskCommandRouter}, built
 * from the behaviour the research notes document, not from what the client does:
 *
 * <ul>
 *   <li>auth: every call must carry {@code x-modal-token-id}/{@code -secret} of the one known
 *       token; {@code AuthTokenGet} mints a JWT whose {@code exp} is {@link #tokenLifetime} away;
 *       unary calls other than AuthTokenGet need an unexpired {@code x-modal-auth-token}, streaming
 *       calls do not (libmodal-go sends it on unary calls only); a router call needs {@code
 *       authorization: Bearer} with an unexpired router JWT;
 *   <li>unary calls with an {@code x-idempotency-key} already answered get the same answer again
 *       (so a retried {@code SandboxCreate} creates one sandbox); faults can be injected before or
 *       after a call is handled ({@link #failNext}, {@link #loseNextResponse});
 *   <li>creation is asynchronous: {@code SandboxCreate} answers at once, the task id appears once
 *       the backing sandbox runs; images build asynchronously ({@code ImageGetOrCreate} without a
 *       result; the first {@code ImageJoinStreaming} ends without one, the next has it: FAILURE for
 *       a registry image {@code missing/...}, else SUCCESS);
 *   <li>ended sandboxes answer {@code SandboxWait} and {@code SandboxGetTaskId} with their result
 *       (TERMINATED), commands running in a terminated sandbox exit by signal 9; unknown ids are
 *       {@code NOT_FOUND};
 *   <li>filesystem calls ({@link FakeFilesystem}): {@code ContainerFilesystemExec} runs the
 *       operation and answers with an exec id (and a descriptor for an open); {@code
 *       ContainerFilesystemExecGetOutput} streams its outcome, from the first batch on every
 *       stream: the bytes in numbered batches, or a {@code SystemErrorMessage} with the errno, then
 *       eof; faults can cut such a stream ({@link #cutFilesystemOutputAfterBatches}).
 * </ul>
 *
 * <p>Each sandbox is a real Sandbox4j local sandbox ({@link LocalSandbox}, default home) where
 * commands run. Where it differs from Modal: every image is the local engine's default image (the
 * Dockerfile commands are recorded, not built) and its user is the local engine's {@code sandbox}
 * user, not root; a filesystem snapshot is a local snapshot; tunnels are made-up host names, no
 * traffic flows; timeouts and idle timeouts of sandboxes are recorded but not enforced; the command
 * router is the same server (its URL is {@code https://127.0.0.1:PORT}, served in plaintext, which
 * libmodal allows for a local control plane). Its filesystem calls act through the local sandbox's
 * own file API: an operation runs before {@code ContainerFilesystemExec} answers, not
 * asynchronously; open supports the modes {@code r}, {@code w}, {@code a}, {@code x} (with or
 * without {@code b}) but not {@code +}; a file open for writing gets its content at flush and close
 * (written by replacing the file, so a hard link to it is not updated), and a file open for reading
 * reads from a stream opened at open; opening a FIFO or device for reading is refused (the real
 * service's behaviour is not documented); rm refuses the local sandbox's working directory and its
 * ancestors; {@code file_ls_request} and the other operations this client does not send are not
 * implemented; the outputs of filesystem execs are kept until the fake closes.
 */
final class FakeModal implements AutoCloseable {
  static final String TOKEN_ID = "ak-fake";
  static final String TOKEN_SECRET = "as-fake";

  static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
  private static final Context.Key<Metadata> HEADERS = Context.key("headers");

  /** One call as the server saw it. */
  record Call(String method, Map<String, String> headers) {
    String header(Metadata.Key<String> key) {
      return headers.get(key.name());
    }
  }

  final List<Call> calls = new CopyOnWriteArrayList<>();
  final Map<String, FakeSandbox> sandboxes = new ConcurrentHashMap<>();
  final Map<String, String> namedSecrets = new ConcurrentHashMap<>(); // name -> id
  final Map<String, Map<String, String>> secrets = new ConcurrentHashMap<>(); // id -> env
  final Map<String, List<String>> images = new ConcurrentHashMap<>(); // id -> commands
  final Map<String, String> snapshotOfImage = new ConcurrentHashMap<>(); // image id -> snapshot
  private final Map<String, String> apps = new ConcurrentHashMap<>(); // name -> id
  private final Map<String, Object> answered = new ConcurrentHashMap<>(); // idempotency key
  private final Map<String, AtomicInteger> joins = new ConcurrentHashMap<>();
  private final Map<String, ArrayDeque<Status>> faults = new ConcurrentHashMap<>();
  private final Map<String, AtomicInteger> lost = new ConcurrentHashMap<>();
  private final AtomicInteger ids = new AtomicInteger();
  private LocalSandbox engine; // made on first use: tests of the control plane alone need none
  private final Server server;
  volatile Duration tokenLifetime = Duration.ofHours(1);
  volatile Duration routerTokenLifetime = Duration.ofHours(1);

  /** How many stdout chunks a stdio stream sends before the fake cuts it (UNAVAILABLE); 0 never. */
  volatile int cutStdioAfterChunks;

  /** The most bytes one batch of a filesystem exec's output holds. */
  static final int FILESYSTEM_BATCH_BYTES = 64 * 1024;

  /** The output batches of each filesystem exec, by exec id. */
  private final Map<String, List<FilesystemRuntimeOutputBatch>> filesystemOutputs =
      new ConcurrentHashMap<>();

  private final Map<ContainerFilesystemExecRequest.FileExecRequestOneofCase, AtomicInteger>
      filesystemOps = new ConcurrentHashMap<>();

  /**
   * How many batches a filesystem output stream sends before the fake cuts it (UNAVAILABLE), once;
   * 0 never.
   */
  volatile int cutFilesystemOutputAfterBatches;

  FakeModal() {
    ServerInterceptor capture =
        new ServerInterceptor() {
          @Override
          public <Q, R> ServerCall.Listener<Q> interceptCall(
              ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
            return Contexts.interceptCall(
                Context.current().withValue(HEADERS, headers), call, headers, next);
          }
        };
    try {
      server =
          NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
              .executor(Executors.newVirtualThreadPerTaskExecutor())
              .addService(ServerInterceptors.intercept(new ControlPlaneService(), capture))
              .addService(ServerInterceptors.intercept(new RouterService(), capture))
              .build()
              .start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private synchronized LocalSandbox engine() {
    if (engine == null) {
      engine = LocalSandbox.builder().build();
    }
    return engine;
  }

  int port() {
    return server.getPort();
  }

  String url() {
    return "http://127.0.0.1:" + port();
  }

  /** A client of this fake with the right credentials, resolved from an empty environment. */
  ModalSandbox.Builder client(java.nio.file.Path home) {
    return ModalSandbox.builder()
        .configSource(
            Map.of(
                "MODAL_SERVER_URL", url(),
                "MODAL_TOKEN_ID", TOKEN_ID,
                "MODAL_TOKEN_SECRET", TOKEN_SECRET),
            home);
  }

  /** The next {@code times} calls of {@code method} fail with {@code status}, unhandled. */
  void failNext(String method, Status status, int times) {
    ArrayDeque<Status> queue = faults.computeIfAbsent(method, k -> new ArrayDeque<>());
    synchronized (queue) {
      for (int i = 0; i < times; i++) {
        queue.add(status);
      }
    }
  }

  /** The next call of {@code method} is handled, but its answer is lost (UNAVAILABLE). */
  void loseNextResponse(String method) {
    lost.computeIfAbsent(method, k -> new AtomicInteger()).incrementAndGet();
  }

  List<Call> calls(String method) {
    return calls.stream().filter(c -> c.method().equals(method)).toList();
  }

  /** Ends a sandbox as Modal would when its timeout runs out (TIMEOUT). */
  void expire(String id) {
    sandboxes.get(id).end(GenericStatus.GENERIC_STATUS_TIMEOUT);
  }

  @Override
  public void close() {
    server.shutdownNow();
    for (FakeSandbox sandbox : sandboxes.values()) {
      sandbox.end(GenericStatus.GENERIC_STATUS_TERMINATED);
    }
  }

  // ---- auth and bookkeeping --------------------------------------------------------------------

  static String jwt(Instant expiry) {
    Base64.Encoder b64 = Base64.getUrlEncoder().withoutPadding();
    return b64.encodeToString("{\"alg\":\"none\"}".getBytes(StandardCharsets.UTF_8))
        + "."
        + b64.encodeToString(
            ("{\"exp\":" + expiry.getEpochSecond() + "}").getBytes(StandardCharsets.UTF_8))
        + ".sig";
  }

  private static boolean unexpired(String jwt) {
    return jwt != null
        && AuthTokens.expiry(jwt).map(e -> e.isAfter(Instant.now())).orElse(false)
        && jwt.endsWith(".sig");
  }

  private Call record(String method) {
    Metadata headers = HEADERS.get();
    Map<String, String> copy = new LinkedHashMap<>();
    for (String key : headers.keys()) {
      if (!key.endsWith("-bin")) {
        copy.put(key, headers.get(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER)));
      }
    }
    Call call = new Call(method, copy);
    calls.add(call);
    return call;
  }

  /** Checks the credentials of a control-plane call; null if they pass, else the failure. */
  private Status checkAuth(Call call, boolean needsAuthToken) {
    if (!TOKEN_ID.equals(call.header(ControlPlane.TOKEN_ID))
        || !TOKEN_SECRET.equals(call.header(ControlPlane.TOKEN_SECRET))) {
      return Status.UNAUTHENTICATED.withDescription("invalid token id or secret");
    }
    if (needsAuthToken && !unexpired(call.header(ControlPlane.AUTH_TOKEN))) {
      return Status.UNAUTHENTICATED.withDescription("auth token missing or expired");
    }
    return null;
  }

  private Status injectedFault(String method) {
    ArrayDeque<Status> queue = faults.get(method);
    if (queue == null) {
      return null;
    }
    synchronized (queue) {
      return queue.poll();
    }
  }

  /** Handles a unary control-plane call: auth, faults, idempotency, then {@code handler}. */
  @SuppressWarnings("unchecked")
  private <T> void unary(
      String method, boolean needsAuthToken, StreamObserver<T> out, Supplier<T> handler) {
    Call call = record(method);
    Status denied = checkAuth(call, needsAuthToken);
    if (denied == null) {
      denied = injectedFault(method);
    }
    if (denied != null) {
      out.onError(denied.asRuntimeException());
      return;
    }
    String key = call.header(ControlPlane.IDEMPOTENCY_KEY);
    T answer;
    try {
      answer =
          key == null
              ? handler.get()
              : (T) answered.computeIfAbsent(method + "/" + key, k -> handler.get());
    } catch (io.grpc.StatusRuntimeException e) {
      out.onError(e);
      return;
    } catch (RuntimeException e) {
      out.onError(Status.INTERNAL.withDescription(e.toString()).asRuntimeException());
      return;
    }
    AtomicInteger losses = lost.get(method);
    if (losses != null && losses.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
      out.onError(Status.UNAVAILABLE.withDescription("connection reset").asRuntimeException());
      return;
    }
    out.onNext(answer);
    out.onCompleted();
  }

  private FakeSandbox sandbox(String id) {
    FakeSandbox sandbox = sandboxes.get(id);
    if (sandbox == null) {
      throw Status.NOT_FOUND.withDescription("Sandbox " + id + " not found").asRuntimeException();
    }
    return sandbox;
  }

  private FakeSandbox sandboxOfTask(String taskId) {
    return sandboxes.values().stream()
        .filter(s -> taskId.equals(s.taskId))
        .findFirst()
        .orElseThrow(
            () ->
                Status.NOT_FOUND
                    .withDescription("task " + taskId + " not found")
                    .asRuntimeException());
  }

  // ---- the control plane ---------------------------------------------------------------------

  private final class ControlPlaneService extends ModalClientGrpc.ModalClientImplBase {

    @Override
    public void authTokenGet(AuthTokenGetRequest r, StreamObserver<AuthTokenGetResponse> out) {
      unary(
          "AuthTokenGet",
          false,
          out,
          () ->
              AuthTokenGetResponse.newBuilder()
                  .setToken(jwt(Instant.now().plus(tokenLifetime)))
                  .build());
    }

    @Override
    public void appGetOrCreate(
        AppGetOrCreateRequest r, StreamObserver<AppGetOrCreateResponse> out) {
      unary(
          "AppGetOrCreate",
          true,
          out,
          () -> {
            String id = apps.get(r.getAppName());
            if (id == null) {
              if (r.getObjectCreationType()
                  != ObjectCreationType.OBJECT_CREATION_TYPE_CREATE_IF_MISSING) {
                throw Status.NOT_FOUND
                    .withDescription("App '" + r.getAppName() + "' not found")
                    .asRuntimeException();
              }
              id = apps.computeIfAbsent(r.getAppName(), k -> "ap-" + ids.incrementAndGet());
            }
            return AppGetOrCreateResponse.newBuilder().setAppId(id).build();
          });
    }

    @Override
    public void secretGetOrCreate(
        SecretGetOrCreateRequest r, StreamObserver<SecretGetOrCreateResponse> out) {
      unary(
          "SecretGetOrCreate",
          true,
          out,
          () -> {
            String id;
            if (r.getObjectCreationType() == ObjectCreationType.OBJECT_CREATION_TYPE_EPHEMERAL) {
              id = "st-" + ids.incrementAndGet();
              secrets.put(id, Map.copyOf(r.getEnvDictMap()));
            } else {
              id = namedSecrets.get(r.getDeploymentName());
              if (id == null) {
                throw Status.NOT_FOUND
                    .withDescription("Secret '" + r.getDeploymentName() + "' not found")
                    .asRuntimeException();
              }
            }
            return SecretGetOrCreateResponse.newBuilder().setSecretId(id).build();
          });
    }

    @Override
    public void imageGetOrCreate(
        ImageGetOrCreateRequest r, StreamObserver<ImageGetOrCreateResponse> out) {
      unary(
          "ImageGetOrCreate",
          true,
          out,
          () -> {
            List<String> commands = new ArrayList<>(r.getImage().getDockerfileCommandsList());
            r.getImage().getBaseImagesList().forEach(b -> commands.add("# base " + b.getImageId()));
            String id = "im-" + ids.incrementAndGet();
            images.put(id, commands);
            // no result: the client follows the build with ImageJoinStreaming
            return ImageGetOrCreateResponse.newBuilder().setImageId(id).build();
          });
    }

    @Override
    public void imageJoinStreaming(
        ImageJoinStreamingRequest r, StreamObserver<ImageJoinStreamingResponse> out) {
      Call call = record("ImageJoinStreaming");
      Status denied = checkAuth(call, false);
      if (denied != null) {
        out.onError(denied.asRuntimeException());
        return;
      }
      if (!images.containsKey(r.getImageId())) {
        out.onError(Status.NOT_FOUND.asRuntimeException());
        return;
      }
      int join = joins.computeIfAbsent(r.getImageId(), k -> new AtomicInteger()).getAndIncrement();
      if (join == 0) {
        // a log line, then the stream ends without a result, as at the server's join timeout
        out.onNext(
            ImageJoinStreamingResponse.newBuilder()
                .setEntryId("1-0")
                .addTaskLogs(TaskLogs.newBuilder().setData("building\n"))
                .build());
        out.onCompleted();
        return;
      }
      boolean missing =
          images.get(r.getImageId()).stream().anyMatch(c -> c.startsWith("FROM missing/"));
      GenericResult result =
          missing
              ? GenericResult.newBuilder()
                  .setStatus(GenericStatus.GENERIC_STATUS_FAILURE)
                  .setException("pull access denied for missing/image")
                  .build()
              : GenericResult.newBuilder().setStatus(GenericStatus.GENERIC_STATUS_SUCCESS).build();
      out.onNext(
          ImageJoinStreamingResponse.newBuilder().setEntryId("2-0").setResult(result).build());
      out.onCompleted();
    }

    @Override
    public void sandboxCreate(SandboxCreateRequest r, StreamObserver<SandboxCreateResponse> out) {
      unary(
          "SandboxCreate",
          true,
          out,
          () -> {
            if (!apps.containsValue(r.getAppId())) {
              throw Status.NOT_FOUND.withDescription("app not found").asRuntimeException();
            }
            if (!images.containsKey(r.getDefinition().getImageId())) {
              throw Status.NOT_FOUND.withDescription("image not found").asRuntimeException();
            }
            String id = "sb-" + ids.incrementAndGet();
            FakeSandbox sandbox = new FakeSandbox(id, r.getAppId(), r.getDefinition());
            sandboxes.put(id, sandbox);
            sandbox.startAsync();
            return SandboxCreateResponse.newBuilder().setSandboxId(id).build();
          });
    }

    @Override
    public void sandboxTagsSet(SandboxTagsSetRequest r, StreamObserver<Empty> out) {
      unary(
          "SandboxTagsSet",
          true,
          out,
          () -> {
            sandbox(r.getSandboxId()).tags = List.copyOf(r.getTagsList());
            return Empty.getDefaultInstance();
          });
    }

    @Override
    public void sandboxWait(SandboxWaitRequest r, StreamObserver<SandboxWaitResponse> out) {
      unary(
          "SandboxWait",
          true,
          out,
          () -> {
            FakeSandbox sandbox = sandbox(r.getSandboxId());
            GenericResult result =
                sandbox.awaitEnd(Duration.ofMillis((long) (r.getTimeout() * 1000)));
            SandboxWaitResponse.Builder response = SandboxWaitResponse.newBuilder();
            if (result != null) {
              response.setResult(result);
            }
            return response.build();
          });
    }

    @Override
    public void sandboxGetTaskId(
        SandboxGetTaskIdRequest r, StreamObserver<SandboxGetTaskIdResponse> out) {
      unary(
          "SandboxGetTaskId",
          true,
          out,
          () -> {
            FakeSandbox sandbox = sandbox(r.getSandboxId());
            SandboxGetTaskIdResponse.Builder response = SandboxGetTaskIdResponse.newBuilder();
            synchronized (sandbox) {
              if (r.getWaitUntilReady()) {
                // modal-protocol.md 2.3: with wait_until_ready the server holds the call until the
                // task runs (or the sandbox ended), at most `timeout` seconds
                sandbox.awaitTask(Duration.ofMillis((long) (r.getTimeout() * 1000)));
              }
              if (sandbox.result != null) {
                response.setTaskResult(sandbox.result);
              } else if (sandbox.taskId != null) {
                response.setTaskId(sandbox.taskId);
              }
            }
            return response.build();
          });
    }

    @Override
    public void sandboxTerminate(
        SandboxTerminateRequest r, StreamObserver<SandboxTerminateResponse> out) {
      unary(
          "SandboxTerminate",
          true,
          out,
          () -> {
            FakeSandbox sandbox = sandbox(r.getSandboxId());
            GenericResult existing = sandbox.end(GenericStatus.GENERIC_STATUS_TERMINATED);
            SandboxTerminateResponse.Builder response = SandboxTerminateResponse.newBuilder();
            if (existing != null) {
              response.setExistingResult(existing);
            }
            return response.build();
          });
    }

    @Override
    public void sandboxList(SandboxListRequest r, StreamObserver<SandboxListResponse> out) {
      unary(
          "SandboxList",
          true,
          out,
          () -> {
            // pages of two, newest first, before before_timestamp (0: from the newest)
            List<SandboxInfo> page =
                sandboxes.values().stream()
                    .filter(s -> s.appId.equals(r.getAppId()))
                    .filter(s -> r.getIncludeFinished() || s.result == null)
                    .filter(s -> s.tags.containsAll(r.getTagsList()))
                    .filter(
                        s -> r.getBeforeTimestamp() == 0 || s.createdAt < r.getBeforeTimestamp())
                    .sorted(Comparator.comparingDouble((FakeSandbox s) -> s.createdAt).reversed())
                    .limit(2)
                    .map(
                        s -> {
                          // what SandboxInfo carries of the definition (modal-fields.txt)
                          SandboxInfo.Builder info =
                              SandboxInfo.newBuilder()
                                  .setId(s.id)
                                  .setAppId(s.appId)
                                  .setCreatedAt(s.createdAt)
                                  .addAllTags(s.tags)
                                  .setImageId(s.definition.getImageId())
                                  .setTimeoutSecs(s.definition.getTimeoutSecs());
                          if (s.definition.hasIdleTimeoutSecs()) {
                            info.setIdleTimeoutSecs(s.definition.getIdleTimeoutSecs());
                          }
                          return info.build();
                        })
                    .toList();
            return SandboxListResponse.newBuilder().addAllSandboxes(page).build();
          });
    }

    @Override
    public void sandboxSnapshotFs(
        SandboxSnapshotFsRequest r, StreamObserver<SandboxSnapshotFsResponse> out) {
      unary(
          "SandboxSnapshotFs",
          true,
          out,
          () -> {
            FakeSandbox sandbox = sandbox(r.getSandboxId());
            if (sandbox.result != null || sandbox.workspace == null) {
              return SandboxSnapshotFsResponse.newBuilder()
                  .setResult(
                      GenericResult.newBuilder()
                          .setStatus(GenericStatus.GENERIC_STATUS_FAILURE)
                          .setException("sandbox is not running"))
                  .build();
            }
            String name = "modal-fake-" + ids.incrementAndGet();
            engine().snapshot(sandbox.workspace.ref().orElseThrow(), name);
            String image = "im-" + ids.incrementAndGet();
            images.put(image, List.of("# snapshot of " + sandbox.id));
            snapshotOfImage.put(image, name);
            return SandboxSnapshotFsResponse.newBuilder()
                .setImageId(image)
                .setResult(
                    GenericResult.newBuilder().setStatus(GenericStatus.GENERIC_STATUS_SUCCESS))
                .build();
          });
    }

    @Override
    public void sandboxGetTunnels(
        SandboxGetTunnelsRequest r, StreamObserver<SandboxGetTunnelsResponse> out) {
      unary(
          "SandboxGetTunnels",
          true,
          out,
          () -> {
            FakeSandbox sandbox = sandbox(r.getSandboxId());
            SandboxGetTunnelsResponse.Builder response = SandboxGetTunnelsResponse.newBuilder();
            for (var port : sandbox.definition.getOpenPorts().getPortsList()) {
              response.addTunnels(
                  TunnelData.newBuilder()
                      .setHost(sandbox.id + "-" + port.getPort() + ".fake-modal.test")
                      .setPort(port.getPort() == 8443 ? 8443 : 443)
                      .setContainerPort(port.getPort()));
            }
            return response.build();
          });
    }

    @Override
    public void containerFilesystemExec(
        ContainerFilesystemExecRequest r, StreamObserver<ContainerFilesystemExecResponse> out) {
      unary("ContainerFilesystemExec", true, out, () -> filesystemExec(r));
    }

    @Override
    public void containerFilesystemExecGetOutput(
        ContainerFilesystemExecGetOutputRequest r,
        StreamObserver<FilesystemRuntimeOutputBatch> out) {
      Call call = record("ContainerFilesystemExecGetOutput");
      Status denied = checkAuth(call, false);
      if (denied == null) {
        denied = injectedFault("ContainerFilesystemExecGetOutput");
      }
      if (denied != null) {
        out.onError(denied.asRuntimeException());
        return;
      }
      List<FilesystemRuntimeOutputBatch> batches = filesystemOutputs.get(r.getExecId());
      if (batches == null) {
        out.onError(Status.NOT_FOUND.withDescription("exec " + r.getExecId()).asRuntimeException());
        return;
      }
      // every stream of an exec starts from its first batch
      int sent = 0;
      for (FilesystemRuntimeOutputBatch batch : batches) {
        if (cutFilesystemOutputAfterBatches > 0 && sent >= cutFilesystemOutputAfterBatches) {
          cutFilesystemOutputAfterBatches = 0;
          out.onError(Status.UNAVAILABLE.withDescription("stream cut").asRuntimeException());
          return;
        }
        out.onNext(batch);
        sent++;
      }
      out.onCompleted();
    }

    @Override
    public void taskGetCommandRouterAccess(
        TaskGetCommandRouterAccessRequest r,
        StreamObserver<TaskGetCommandRouterAccessResponse> out) {
      unary(
          "TaskGetCommandRouterAccess",
          true,
          out,
          () -> {
            sandboxOfTask(r.getTaskId());
            return TaskGetCommandRouterAccessResponse.newBuilder()
                .setJwt(jwt(Instant.now().plus(routerTokenLifetime)))
                .setUrl("https://127.0.0.1:" + port())
                .build();
          });
    }
  }

  // ---- the command router --------------------------------------------------------------------

  private final class RouterService extends TaskCommandRouterGrpc.TaskCommandRouterImplBase {

    /** Checks the router JWT and faults; the exec, or null after answering with an error. */
    private Status check(String method) {
      Call call = record(method);
      String authorization = call.header(AUTHORIZATION);
      if (authorization == null
          || !authorization.startsWith("Bearer ")
          || !unexpired(authorization.substring(7))) {
        return Status.UNAUTHENTICATED.withDescription("router token missing or expired");
      }
      return injectedFault(method);
    }

    @Override
    public void taskExecStart(TaskExecStartRequest r, StreamObserver<TaskExecStartResponse> out) {
      Status denied = check("TaskExecStart");
      if (denied != null) {
        out.onError(denied.asRuntimeException());
        return;
      }
      try {
        FakeSandbox sandbox = sandboxOfTask(r.getTaskId());
        sandbox.execs.computeIfAbsent(r.getExecId(), k -> sandbox.start(r)); // exec_id: idempotent
      } catch (io.grpc.StatusRuntimeException e) {
        out.onError(e);
        return;
      }
      out.onNext(TaskExecStartResponse.getDefaultInstance());
      out.onCompleted();
    }

    @Override
    public void taskExecStdinWrite(
        TaskExecStdinWriteRequest r, StreamObserver<TaskExecStdinWriteResponse> out) {
      Status denied = check("TaskExecStdinWrite");
      if (denied != null) {
        out.onError(denied.asRuntimeException());
        return;
      }
      try {
        exec(r.getTaskId(), r.getExecId()).stdin.write(r.getOffset(), r.getData(), r.getEof());
      } catch (io.grpc.StatusRuntimeException e) {
        out.onError(e);
        return;
      }
      out.onNext(TaskExecStdinWriteResponse.getDefaultInstance());
      out.onCompleted();
    }

    @Override
    public void taskExecStdioRead(
        TaskExecStdioReadRequest r, StreamObserver<TaskExecStdioReadResponse> out) {
      Status denied = check("TaskExecStdioRead");
      if (denied != null) {
        out.onError(denied.asRuntimeException());
        return;
      }
      FakeExec exec;
      try {
        exec = exec(r.getTaskId(), r.getExecId());
      } catch (io.grpc.StatusRuntimeException e) {
        out.onError(e);
        return;
      }
      boolean stdout =
          r.getFileDescriptor()
              == TaskExecStdioFileDescriptor.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT;
      OutputLog log = stdout ? exec.stdout : exec.stderr;
      ServerCallStreamObserver<TaskExecStdioReadResponse> server =
          (ServerCallStreamObserver<TaskExecStdioReadResponse>) out;
      long offset = r.getOffset();
      int sent = 0;
      try {
        while (!server.isCancelled()) {
          byte[] chunk = log.read(offset, Duration.ofMillis(200));
          if (chunk == null) {
            out.onCompleted(); // the end of this fd
            return;
          }
          if (chunk.length == 0) {
            continue;
          }
          if (stdout && cutStdioAfterChunks > 0 && sent >= cutStdioAfterChunks) {
            cutStdioAfterChunks = 0;
            out.onError(Status.UNAVAILABLE.withDescription("stream cut").asRuntimeException());
            return;
          }
          out.onNext(
              TaskExecStdioReadResponse.newBuilder().setData(ByteString.copyFrom(chunk)).build());
          offset += chunk.length;
          sent++;
        }
      } catch (InterruptedException e) {
        out.onError(Status.CANCELLED.asRuntimeException());
      }
    }

    @Override
    public void taskExecWait(TaskExecWaitRequest r, StreamObserver<TaskExecWaitResponse> out) {
      Status denied = check("TaskExecWait");
      if (denied != null) {
        out.onError(denied.asRuntimeException());
        return;
      }
      try {
        FakeExec exec = exec(r.getTaskId(), r.getExecId());
        ServerCallStreamObserver<TaskExecWaitResponse> server =
            (ServerCallStreamObserver<TaskExecWaitResponse>) out;
        while (!exec.done.await(Duration.ofMillis(200))) {
          if (server.isCancelled()) {
            return;
          }
        }
        out.onNext(exec.exit);
        out.onCompleted();
      } catch (io.grpc.StatusRuntimeException e) {
        out.onError(e);
      } catch (InterruptedException e) {
        out.onError(Status.CANCELLED.asRuntimeException());
      }
    }

    private FakeExec exec(String taskId, String execId) {
      FakeExec exec = sandboxOfTask(taskId).execs.get(execId);
      if (exec == null) {
        throw Status.NOT_FOUND
            .withDescription("exec " + execId + " not found")
            .asRuntimeException();
      }
      return exec;
    }
  }

  // ---- the filesystem calls -----------------------------------------------------------------

  /**
   * Runs one filesystem operation at once and keeps its output for {@code
   * ContainerFilesystemExecGetOutput}: the bytes in batches of at most {@link
   * #FILESYSTEM_BATCH_BYTES}, numbered from 1, then an eof batch; or a batch with the error, then
   * eof (Python's client checks eof before error, so the two never share a batch).
   */
  private ContainerFilesystemExecResponse filesystemExec(ContainerFilesystemExecRequest r) {
    FakeSandbox sandbox = sandboxOfTask(r.getTaskId());
    FakeFilesystem files = sandbox.runningFiles();
    filesystemOps
        .computeIfAbsent(r.getFileExecRequestOneofCase(), k -> new AtomicInteger())
        .incrementAndGet();
    String execId = "fe-" + ids.incrementAndGet();
    ContainerFilesystemExecResponse.Builder response =
        ContainerFilesystemExecResponse.newBuilder().setExecId(execId);
    List<FilesystemRuntimeOutputBatch> batches = new ArrayList<>();
    try {
      FakeFilesystem.Outcome outcome = files.run(r);
      if (outcome.fileDescriptor() != null) {
        response.setFileDescriptor(outcome.fileDescriptor());
      }
      byte[] output = outcome.output();
      for (int start = 0; start < output.length; start += FILESYSTEM_BATCH_BYTES) {
        int end = Math.min(output.length, start + FILESYSTEM_BATCH_BYTES);
        batches.add(
            FilesystemRuntimeOutputBatch.newBuilder()
                .setBatchIndex(batches.size() + 1)
                .addOutput(ByteString.copyFrom(output, start, end - start))
                .build());
      }
    } catch (FakeFilesystem.Failure e) {
      batches.add(
          FilesystemRuntimeOutputBatch.newBuilder()
              .setBatchIndex(batches.size() + 1)
              .setError(e.error)
              .build());
    }
    batches.add(
        FilesystemRuntimeOutputBatch.newBuilder()
            .setBatchIndex(batches.size() + 1)
            .setEof(true)
            .build());
    filesystemOutputs.put(execId, List.copyOf(batches));
    return response.build();
  }

  /** How many filesystem operations of one kind the fake ran. */
  int filesystemOps(ContainerFilesystemExecRequest.FileExecRequestOneofCase kind) {
    AtomicInteger n = filesystemOps.get(kind);
    return n == null ? 0 : n.get();
  }

  // ---- sandboxes and execs -------------------------------------------------------------------

  /** One sandbox: CREATING (no task) → RUNNING (task id) → ended (result). Guarded by this. */
  final class FakeSandbox {
    final String id;
    final String appId;
    final dev.sandbox4j.modal.internal.proto.Sandbox definition;
    final double createdAt = Instant.now().toEpochMilli() / 1e3 + ids.incrementAndGet() * 1e-6;
    final Map<String, FakeExec> execs = new ConcurrentHashMap<>();
    volatile List<SandboxTag> tags = List.of();
    String taskId;
    GenericResult result;
    Workspace workspace;
    FakeFilesystem files;

    FakeSandbox(String id, String appId, dev.sandbox4j.modal.internal.proto.Sandbox definition) {
      this.id = id;
      this.appId = appId;
      this.definition = definition;
    }

    void startAsync() {
      Thread.ofVirtual()
          .start(
              () -> {
                LocalSandbox.Builder builder = LocalSandbox.builder();
                String snapshot = snapshotOfImage.get(definition.getImageId());
                if (snapshot != null) {
                  builder.snapshot(snapshot);
                }
                Workspace ws = Workspace.of(builder.build().newBackend());
                try {
                  if (images.getOrDefault(definition.getImageId(), List.of()).stream()
                      .anyMatch(c -> c.startsWith("FROM broken/"))) {
                    throw new IllegalStateException("the image's entrypoint failed");
                  }
                  ws.open();
                } catch (RuntimeException e) {
                  synchronized (this) {
                    result =
                        GenericResult.newBuilder()
                            .setStatus(GenericStatus.GENERIC_STATUS_INIT_FAILURE)
                            .setException(e.toString())
                            .build();
                    notifyAll();
                  }
                  return;
                }
                synchronized (this) {
                  workspace = ws;
                  files = new FakeFilesystem(ws);
                  if (result != null) {
                    engine().destroy(ws.ref().orElseThrow());
                    return;
                  }
                  taskId = "ta-" + ids.incrementAndGet();
                  notifyAll();
                }
              });
    }

    /** Ends the sandbox; returns the result it already had, if it had ended before. */
    GenericResult end(GenericStatus status) {
      Workspace ws;
      synchronized (this) {
        if (result != null) {
          return result;
        }
        result =
            GenericResult.newBuilder()
                .setStatus(status)
                .setExitcode(status == GenericStatus.GENERIC_STATUS_TERMINATED ? 137 : 124)
                .build();
        ws = workspace;
        notifyAll();
      }
      if (ws != null) {
        engine().destroy(ws.ref().orElseThrow());
      }
      return null;
    }

    /** Waits until the task runs or the sandbox ended, at most {@code max}. */
    synchronized void awaitTask(Duration max) {
      long end = System.nanoTime() + max.toNanos();
      try {
        while (taskId == null && result == null && System.nanoTime() < end) {
          wait(Math.max(1, (end - System.nanoTime()) / 1_000_000));
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    synchronized GenericResult awaitEnd(Duration max) {
      long end = System.nanoTime() + max.toNanos();
      try {
        while (result == null && System.nanoTime() < end) {
          wait(Math.max(1, (end - System.nanoTime()) / 1_000_000));
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return result;
    }

    /** The filesystem of a running sandbox; FAILED_PRECONDITION once it has ended. */
    synchronized FakeFilesystem runningFiles() {
      if (result != null || files == null) {
        throw Status.FAILED_PRECONDITION
            .withDescription("sandbox " + id + " is not running")
            .asRuntimeException();
      }
      return files;
    }

    FakeExec start(TaskExecStartRequest r) {
      Workspace ws;
      synchronized (this) {
        if (result != null) {
          throw Status.FAILED_PRECONDITION
              .withDescription("sandbox " + id + " has finished")
              .asRuntimeException();
        }
        ws = workspace;
      }
      Map<String, String> env = new LinkedHashMap<>();
      for (String secret : definition.getSecretIdsList()) {
        env.putAll(secrets.getOrDefault(secret, Map.of()));
      }
      for (String secret : r.getSecretIdsList()) {
        Map<String, String> vars = secrets.get(secret);
        if (vars == null) {
          throw Status.NOT_FOUND.withDescription("secret " + secret).asRuntimeException();
        }
        env.putAll(vars);
      }
      List<String> argv = new ArrayList<>();
      if (r.hasWorkdir()) {
        argv.addAll(List.of("/bin/sh", "-c", "cd -- \"$0\" && exec \"$@\"", r.getWorkdir()));
      }
      argv.addAll(r.getCommandArgsList());
      FakeExec exec = new FakeExec();
      Thread.ofVirtual()
          .start(
              () -> {
                TaskExecWaitResponse exit;
                try {
                  CommandResult result =
                      ws.run(
                          Command.argv(argv),
                          RunOptions.builder()
                              .env(env)
                              .noTimeout()
                              .stdin(exec.stdin)
                              .outputLimit(Long.MAX_VALUE)
                              .retainOutput(false)
                              .onStdout(exec.stdout::append)
                              .onStderr(exec.stderr::append)
                              .build());
                  exit = TaskExecWaitResponse.newBuilder().setCode(result.exitCode()).build();
                } catch (WorkspaceUnavailableException e) {
                  exit = TaskExecWaitResponse.newBuilder().setSignal(9).build(); // killed with it
                } catch (RuntimeException e) {
                  exit = TaskExecWaitResponse.newBuilder().setCode(255).build();
                }
                exec.stdin.commandEnded();
                exec.stdout.close();
                exec.stderr.close();
                exec.exit = exit;
                exec.done.countDown();
              });
      return exec;
    }
  }

  /** One command: its output logs, stdin, exit. */
  static final class FakeExec {
    final OutputLog stdout = new OutputLog();
    final OutputLog stderr = new OutputLog();
    final StdinLog stdin = new StdinLog();
    final Latch done = new Latch();
    volatile TaskExecWaitResponse exit;
  }

  static final class Latch {
    private final java.util.concurrent.CountDownLatch latch =
        new java.util.concurrent.CountDownLatch(1);

    void countDown() {
      latch.countDown();
    }

    boolean await(Duration max) throws InterruptedException {
      return latch.await(max.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
    }
  }

  /** Everything an exec wrote to one fd, readable from any offset. Guarded by this. */
  static final class OutputLog {
    private byte[] bytes = new byte[64 * 1024];
    private int size;
    private boolean closed;

    synchronized void append(byte[] chunk) {
      if (size + chunk.length > bytes.length) {
        bytes = java.util.Arrays.copyOf(bytes, Math.max(bytes.length * 2, size + chunk.length));
      }
      System.arraycopy(chunk, 0, bytes, size, chunk.length);
      size += chunk.length;
      notifyAll();
    }

    synchronized void close() {
      closed = true;
      notifyAll();
    }

    /** Bytes from {@code offset}: empty if none came within {@code max}, null at the end. */
    synchronized byte[] read(long offset, Duration max) throws InterruptedException {
      if (size <= offset && !closed) {
        wait(max.toMillis());
      }
      if (size > offset) {
        int end = (int) Math.min(size, offset + 64 * 1024);
        return java.util.Arrays.copyOfRange(bytes, (int) offset, end);
      }
      return closed ? null : new byte[0];
    }
  }

  /**
   * stdin as the command reads it: bytes written at their offset (a retried write of bytes already
   * there is skipped), then EOF. Guarded by this.
   */
  static final class StdinLog extends InputStream {
    private final ByteArrayOutputStream pending = new ByteArrayOutputStream();
    private byte[] buffer = new byte[0];
    private int position;
    private long written;
    private boolean eof;

    /** How much written stdin the command may leave unread before a write waits for it. */
    static final int MAX_UNREAD = 1 << 20;

    private boolean commandEnded;

    /**
     * Takes bytes at their offset; waits while the command has {@link #MAX_UNREAD} bytes unread,
     * and fails once it has ended (FAILED_PRECONDITION), as a pipe whose reader is gone.
     */
    synchronized void write(long offset, ByteString data, boolean end) {
      try {
        while (pending.size() + (buffer.length - position) >= MAX_UNREAD && !commandEnded) {
          wait();
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw Status.CANCELLED.asRuntimeException();
      }
      if (commandEnded && data.size() > 0) {
        throw Status.FAILED_PRECONDITION
            .withDescription("the command has ended and no longer reads its stdin")
            .asRuntimeException();
      }
      if (offset > written) {
        throw Status.OUT_OF_RANGE
            .withDescription("stdin offset " + offset + " past " + written)
            .asRuntimeException();
      }
      int skip = (int) (written - offset);
      if (skip < data.size()) {
        pending.writeBytes(data.substring(skip).toByteArray());
        written += data.size() - skip;
      }
      if (end) {
        eof = true;
      }
      notifyAll();
    }

    @Override
    public int read() throws IOException {
      byte[] one = new byte[1];
      return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
    }

    synchronized void commandEnded() {
      commandEnded = true;
      notifyAll();
    }

    @Override
    public synchronized int read(byte[] b, int off, int len) throws IOException {
      notifyAll(); // room for a waiting write
      while (position == buffer.length) {
        if (pending.size() > 0) {
          buffer = pending.toByteArray();
          pending.reset();
          position = 0;
        } else if (eof) {
          return -1;
        } else {
          try {
            wait();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException();
          }
        }
      }
      int n = Math.min(len, buffer.length - position);
      System.arraycopy(buffer, position, b, off, n);
      position += n;
      return n;
    }
  }

  /** The local workspace of a sandbox, for tests that look behind the client. */
  Workspace workspace(String id) {
    return sandboxes.get(id).workspace;
  }

  WorkspaceRef localRef(String id) {
    return workspace(id).ref().orElseThrow();
  }
}
