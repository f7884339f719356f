package dev.sandbox4j.boxd;

import com.google.protobuf.ByteString;
import com.sun.net.httpserver.HttpServer;
import dev.sandbox4j.boxd.internal.proto.BoxdApiGrpc;
import dev.sandbox4j.boxd.internal.proto.CreateSnapshotRequest;
import dev.sandbox4j.boxd.internal.proto.CreateSnapshotResponse;
import dev.sandbox4j.boxd.internal.proto.CreateVmFromSnapshotRequest;
import dev.sandbox4j.boxd.internal.proto.CreateVmRequest;
import dev.sandbox4j.boxd.internal.proto.CreateVmResponse;
import dev.sandbox4j.boxd.internal.proto.DeleteSnapshotRequest;
import dev.sandbox4j.boxd.internal.proto.DeleteSnapshotResponse;
import dev.sandbox4j.boxd.internal.proto.DestroyVmRequest;
import dev.sandbox4j.boxd.internal.proto.DestroyVmResponse;
import dev.sandbox4j.boxd.internal.proto.ExecChunk;
import dev.sandbox4j.boxd.internal.proto.GetSnapshotRequest;
import dev.sandbox4j.boxd.internal.proto.GetSnapshotResponse;
import dev.sandbox4j.boxd.internal.proto.GetVmRequest;
import dev.sandbox4j.boxd.internal.proto.GetVmResponse;
import dev.sandbox4j.boxd.internal.proto.ListVmsRequest;
import dev.sandbox4j.boxd.internal.proto.ListVmsResponse;
import dev.sandbox4j.boxd.internal.proto.ResumeVmRequest;
import dev.sandbox4j.boxd.internal.proto.ResumeVmResponse;
import dev.sandbox4j.boxd.internal.proto.SnapshotInfo;
import dev.sandbox4j.boxd.internal.proto.StartVmRequest;
import dev.sandbox4j.boxd.internal.proto.StartVmResponse;
import dev.sandbox4j.boxd.internal.proto.StopVmRequest;
import dev.sandbox4j.boxd.internal.proto.StopVmResponse;
import dev.sandbox4j.boxd.internal.proto.SuspendVmRequest;
import dev.sandbox4j.boxd.internal.proto.SuspendVmResponse;
import dev.sandbox4j.boxd.internal.proto.UploadFileChunk;
import dev.sandbox4j.boxd.internal.proto.UploadFileResponse;
import dev.sandbox4j.boxd.internal.proto.WakeVmRequest;
import dev.sandbox4j.boxd.internal.proto.WakeVmResponse;
import dev.sandbox4j.runtime.LocalSandbox;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A fake boxd on 127.0.0.1: the {@code boxd.api.v1.BoxdApi} service over our .proto, plaintext
 * (h2c, as boxd's docs describe port 9443), and the JSON token endpoint. It follows boxd's
 * documented behaviour (research notes, Part 1), not this client's code:
 *
 * <ul>
 *   <li>Auth: {@code POST /api/v1/auth/token {"api_key"}} answers {@code {token, expires_at,
 *       user_id}} for the one key it knows, 401 otherwise; every gRPC call needs {@code
 *       authorization: Bearer JWT} with an unexpired, unrevoked JWT, else UNAUTHENTICATED.
 *   <li>Creation is asynchronous: CreateVm returns status {@code pending}; the machine goes {@code
 *       starting}, then {@code running} once its local sandbox is up. Names are unique
 *       (ALREADY_EXISTS), must start with a lowercase letter (INVALID_ARGUMENT).
 *   <li>Nothing wakes a parked machine but ResumeVm (suspended), WakeVm (hibernated) and StartVm
 *       (stopped); Exec on a machine that is not running is FAILED_PRECONDITION, as in boxd's own
 *       public fake.
 *   <li>A destroyed machine keeps a record with status {@code destroyed} for {@link
 *       #DESTROYED_RECORD}, then is NOT_FOUND; Exec on it is NOT_FOUND "VM is destroyed", also for
 *       commands running when it is destroyed.
 *   <li>Exec: the first frame's command runs through {@code sh -c} in the working directory {@code
 *       /home/boxd}; stdin frames feed it, half-close is EOF; output frames carry {@code
 *       is_stderr}; the last frame has empty data and the exit code. Cancelling the call kills
 *       everything the command started. A command silent for the no-output limit is dropped: the
 *       stream ends without an exit frame.
 *   <li>Snapshots: only of a running machine (FAILED_PRECONDITION otherwise); {@code pending} for
 *       {@link #snapshotDelay}, then {@code ready}; a machine from a pending snapshot is refused
 *       with FAILED_PRECONDITION, from an unknown one with NOT_FOUND.
 *   <li>Faults on demand: {@link #failNext} makes the next calls of a method fail with a status;
 *       {@link #cutExecs} ends exec streams after their first output with UNAVAILABLE.
 * </ul>
 *
 * <p>Differences from boxd: machines are Sandbox4j local sandboxes (Debian, user {@code sandbox}
 * uid 1000 with sudo, not Ubuntu's {@code boxd}), so commands run as {@code sandbox} in {@code
 * /home/boxd}; suspend freezes processes as boxd does but snapshots keep files only, not memory;
 * hibernate is a stop.
 */
final class FakeBoxd implements AutoCloseable {

  static final String API_KEY = "bxd_fakekeyfakekeyfakekeyfakekeyfakekey0";
  static final Duration DESTROYED_RECORD = Duration.ofSeconds(1);

  /** The machines' state; the local engine holds their files and processes. */
  static final class Machine {
    final String id;
    final String name;
    final boolean isolated;
    final List<String> networks;
    final int vcpu;
    final LocalSandbox engine;
    volatile WorkspaceRef local;
    volatile String status = "pending";
    volatile Instant destroyedAt;
    volatile int autoSuspendSecs = 30;
    volatile int autoDestroySecs;
    final Set<Thread> execs = ConcurrentHashMap.newKeySet();
    final Set<Thread> cancelled = ConcurrentHashMap.newKeySet();

    Machine(
        String id,
        String name,
        boolean isolated,
        List<String> networks,
        int vcpu,
        LocalSandbox engine) {
      this.id = id;
      this.name = name;
      this.isolated = isolated;
      this.networks = networks;
      this.vcpu = vcpu;
      this.engine = engine;
    }
  }

  record Snapshot(String name, String localName, Instant readyAt, int vcpu) {}

  final Map<String, Machine> machines = new ConcurrentHashMap<>();
  final Map<String, Snapshot> snapshots = new ConcurrentHashMap<>();
  final Map<String, AtomicInteger> calls = new ConcurrentHashMap<>();
  final List<String> authorizations = new CopyOnWriteArrayList<>();
  final AtomicInteger tokenExchanges = new AtomicInteger();
  final List<CreateVmRequest> creates = new CopyOnWriteArrayList<>();
  private final Map<String, Queue<Status>> faults = new ConcurrentHashMap<>();
  private final Map<String, Instant> tokens = new ConcurrentHashMap<>();
  private final AtomicInteger ids = new AtomicInteger();
  private final String tag = Long.toString(System.nanoTime() % 1_000_000, 36);

  volatile Duration tokenLifetime = Duration.ofHours(1);
  volatile Duration snapshotDelay = Duration.ofMillis(500);
  volatile Duration bootDelay = Duration.ofMillis(200);
  volatile Duration noOutputLimit = Duration.ofMinutes(30);
  volatile boolean cutExecs;
  volatile boolean endExecsWithoutExit;

  private final Server server;
  private final HttpServer tokenServer;

  FakeBoxd() throws IOException {
    BoxdSandboxConformanceTest.requireLocalEngine();
    server =
        NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
            .addService(ServerInterceptors.intercept(new Api(), new Gate()))
            .maxInboundMessageSize(BoxdCalls.MAX_MESSAGE)
            .build()
            .start();
    tokenServer = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    tokenServer.createContext("/api/v1/auth/token", this::exchange);
    tokenServer.start();
  }

  String baseUrl() {
    return "http://127.0.0.1:" + server.getPort();
  }

  String tokenUrl() {
    return "http://127.0.0.1:" + tokenServer.getAddress().getPort() + "/api/v1/auth/token";
  }

  /** A client of this fake with its API key. */
  BoxdSandbox.Builder client() {
    return BoxdSandbox.builder(Map.of()).baseUrl(baseUrl()).tokenUrl(tokenUrl()).apiKey(API_KEY);
  }

  /** Makes the next {@code times} calls of {@code method} fail with {@code status}. */
  void failNext(String method, Status status, int times) {
    Queue<Status> q = faults.computeIfAbsent(method, m -> new ArrayDeque<>());
    synchronized (q) {
      for (int i = 0; i < times; i++) {
        q.add(status);
      }
    }
  }

  int calls(String method) {
    AtomicInteger n = calls.get(method);
    return n == null ? 0 : n.get();
  }

  /** Revokes every JWT handed out so far: the next call with one is UNAUTHENTICATED. */
  void revokeTokens() {
    tokens.clear();
  }

  /** A JWT this fake accepts, as if a user had put one in BOXD_TOKEN. */
  String issueToken() {
    String jwt = "jwt." + tag + "." + ids.incrementAndGet();
    tokens.put(jwt, Instant.now().plus(tokenLifetime));
    return jwt;
  }

  // ---- the token endpoint -------------------------------------------------------------------

  private void exchange(com.sun.net.httpserver.HttpExchange http) throws IOException {
    try (http) {
      String body = new String(http.getRequestBody().readAllBytes(), StandardCharsets.UTF_8);
      tokenExchanges.incrementAndGet();
      boolean ok =
          http.getRequestMethod().equals("POST")
              && body.replace(" ", "").contains("\"api_key\":\"" + API_KEY + "\"");
      if (!ok) {
        byte[] no = "{\"error\":\"invalid api key\"}".getBytes(StandardCharsets.UTF_8);
        http.sendResponseHeaders(401, no.length);
        http.getResponseBody().write(no);
        return;
      }
      String jwt = issueToken();
      byte[] answer =
          ("{\"token\":\""
                  + jwt
                  + "\",\"expires_at\":"
                  + tokens.get(jwt).getEpochSecond()
                  + ",\"user_id\":\"u-fake\"}")
              .getBytes(StandardCharsets.UTF_8);
      http.getResponseHeaders().add("content-type", "application/json");
      http.sendResponseHeaders(200, answer.length);
      http.getResponseBody().write(answer);
    }
  }

  // ---- auth, call counts and injected faults -----------------------------------------------

  private final class Gate implements ServerInterceptor {
    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(
        ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
      String method = call.getMethodDescriptor().getBareMethodName();
      calls.computeIfAbsent(method, m -> new AtomicInteger()).incrementAndGet();
      String auth = headers.get(BoxdCalls.AUTHORIZATION);
      authorizations.add(method + " " + auth);
      Instant expiry =
          auth == null || !auth.startsWith("Bearer ") ? null : tokens.get(auth.substring(7));
      if (expiry == null || !Instant.now().isBefore(expiry)) {
        call.close(
            Status.UNAUTHENTICATED.withDescription("invalid or expired token"), new Metadata());
        return new ServerCall.Listener<>() {};
      }
      Queue<Status> q = faults.get(method);
      if (q != null) {
        Status fault;
        synchronized (q) {
          fault = q.poll();
        }
        if (fault != null) {
          call.close(fault, new Metadata());
          return new ServerCall.Listener<>() {};
        }
      }
      return next.startCall(call, headers);
    }
  }

  // ---- the service -------------------------------------------------------------------------

  private Machine machine(String idOrName) {
    Machine m = machines.get(idOrName);
    if (m == null) {
      m = machines.values().stream().filter(x -> x.name.equals(idOrName)).findFirst().orElse(null);
    }
    if (m == null
        || (m.destroyedAt != null && Instant.now().isAfter(m.destroyedAt.plus(DESTROYED_RECORD)))) {
      throw Status.NOT_FOUND.withDescription("VM not found: " + idOrName).asRuntimeException();
    }
    return m;
  }

  private Machine live(String idOrName) {
    Machine m = machine(idOrName);
    if (m.destroyedAt != null) {
      throw Status.NOT_FOUND.withDescription("VM is destroyed").asRuntimeException();
    }
    return m;
  }

  private static GetVmResponse describe(Machine m) {
    return GetVmResponse.newBuilder()
        .setVmId(m.id)
        .setName(m.name)
        .setStatus(m.status)
        .setImageRef("ubuntu:24.04")
        .setVcpu(m.vcpu)
        .setMemoryBytes(m.vcpu * 4L * 1024 * 1024 * 1024)
        .setDiskBytes(100L * 1024 * 1024 * 1024)
        .setAccessDomain(m.name + ".boxd.sh")
        .setIsolated(m.isolated)
        .setAutoSuspendTimeoutSecs(m.autoSuspendSecs)
        .setAutoDestroyTimeoutSecs(m.autoDestroySecs)
        .addAllNetworks(m.networks)
        .build();
  }

  /** Makes a machine directly, e.g. one that is not isolated, as another client would. */
  Machine seed(String name, boolean isolated, List<String> networks) {
    String id = "vm-" + tag + "-" + ids.incrementAndGet();
    Machine m = new Machine(id, name, isolated, networks, 2, engine(Map.of(), null));
    machines.put(id, m);
    boot(m);
    return m;
  }

  private static LocalSandbox engine(Map<String, String> env, String snapshot) {
    LocalSandbox.Builder b = LocalSandbox.builder().workingDirectory("/home/boxd").env(env);
    if (snapshot != null) {
      b.snapshot(snapshot);
    }
    return b.build();
  }

  /** Boots asynchronously, as boxd does: pending → starting → running. */
  private void boot(Machine m) {
    Thread.ofVirtual()
        .start(
            () -> {
              try {
                Thread.sleep(bootDelay.toMillis() / 2);
                m.status = "starting";
                var backend = m.engine.newBackend();
                backend.workingDirectory(); // creates the local sandbox
                m.local = backend.ref().orElseThrow();
                Thread.sleep(bootDelay.toMillis() / 2);
                if (m.destroyedAt == null) {
                  m.status = "running";
                } else {
                  m.engine.destroy(m.local);
                }
              } catch (Exception e) {
                m.status = "failed";
              }
            });
  }

  private final class Api extends BoxdApiGrpc.BoxdApiImplBase {

    private <T> void answer(StreamObserver<T> out, java.util.function.Supplier<T> body) {
      try {
        T value = body.get();
        out.onNext(value);
        out.onCompleted();
      } catch (StatusRuntimeException e) {
        out.onError(e);
      } catch (RuntimeException e) {
        out.onError(Status.INTERNAL.withDescription(e.toString()).asRuntimeException());
      }
    }

    private Machine create(String name, boolean isolated, int vcpu, LocalSandbox engine) {
      if (name.isEmpty()) {
        name = "m-" + tag + "-" + ids.incrementAndGet();
      } else if (!name.matches("[a-z][a-z0-9-]*")) {
        throw Status.INVALID_ARGUMENT.withDescription("bad name " + name).asRuntimeException();
      }
      String n = name;
      synchronized (machines) {
        if (machines.values().stream().anyMatch(x -> x.name.equals(n) && x.destroyedAt == null)) {
          throw Status.ALREADY_EXISTS.withDescription("name taken: " + n).asRuntimeException();
        }
        String id = "vm-" + tag + "-" + ids.incrementAndGet();
        Machine m = new Machine(id, name, isolated, List.of(), vcpu, engine);
        machines.put(id, m);
        boot(m);
        return m;
      }
    }

    private static CreateVmResponse created(Machine m) {
      return CreateVmResponse.newBuilder()
          .setVmId(m.id)
          .setName(m.name)
          .setStatus(m.status)
          .setUrl("https://" + m.name + ".boxd.sh")
          .build();
    }

    @Override
    public void createVm(CreateVmRequest r, StreamObserver<CreateVmResponse> out) {
      creates.add(r);
      answer(
          out,
          () -> {
            int vcpu = r.getConfig().getVcpu();
            if (vcpu != 0 && !List.of(1, 2, 4, 8).contains(vcpu)) {
              throw Status.INVALID_ARGUMENT
                  .withDescription("not a size class")
                  .asRuntimeException();
            }
            Map<String, String> env = new java.util.LinkedHashMap<>();
            r.getEnvList().forEach(e -> env.put(e.getKey(), e.getValue()));
            Machine m =
                create(r.getName(), r.getIsolated(), vcpu == 0 ? 2 : vcpu, engine(env, null));
            // the timers are recorded, not enforced: no test waits for them
            if (r.getConfig().getSrf().hasAutoSuspendTimeoutSecs()) {
              m.autoSuspendSecs = r.getConfig().getSrf().getAutoSuspendTimeoutSecs();
            }
            m.autoDestroySecs = r.getConfig().getSrf().getAutoDestroyTimeoutSecs();
            return created(m);
          });
    }

    @Override
    public void createVmFromSnapshot(
        CreateVmFromSnapshotRequest r, StreamObserver<CreateVmResponse> out) {
      answer(
          out,
          () -> {
            Snapshot s = snapshots.get(r.getSnapshot());
            if (s == null) {
              throw Status.NOT_FOUND.withDescription("snapshot not found").asRuntimeException();
            }
            if (Instant.now().isBefore(s.readyAt())) {
              throw Status.FAILED_PRECONDITION
                  .withDescription("snapshot is pending")
                  .asRuntimeException();
            }
            if (r.getConfig().getVcpu() != 0 || r.getConfig().getMemoryBytes() != 0) {
              throw Status.INVALID_ARGUMENT
                  .withDescription("a restore keeps the snapshot's size")
                  .asRuntimeException();
            }
            return created(
                create(r.getName(), r.getIsolated(), s.vcpu(), engine(Map.of(), s.localName())));
          });
    }

    @Override
    public void destroyVm(DestroyVmRequest r, StreamObserver<DestroyVmResponse> out) {
      answer(
          out,
          () -> {
            Machine m = live(r.getVmId());
            m.destroyedAt = Instant.now();
            m.status = "destroyed";
            if (m.local != null) {
              m.engine.destroy(m.local);
            }
            return DestroyVmResponse.getDefaultInstance();
          });
    }

    @Override
    public void getVm(GetVmRequest r, StreamObserver<GetVmResponse> out) {
      answer(out, () -> describe(machine(r.getVmId())));
    }

    @Override
    public void listVms(ListVmsRequest r, StreamObserver<ListVmsResponse> out) {
      answer(
          out,
          () -> {
            ListVmsResponse.Builder b = ListVmsResponse.newBuilder();
            machines.values().stream()
                .filter(m -> m.destroyedAt == null)
                .forEach(m -> b.addVms(describe(m)));
            return b.build();
          });
    }

    private Machine inState(String id, String method, Set<String> from) {
      Machine m = live(id);
      if (!from.contains(m.status)) {
        throw Status.FAILED_PRECONDITION
            .withDescription(method + " needs " + from + ", the VM is " + m.status)
            .asRuntimeException();
      }
      return m;
    }

    @Override
    public void suspendVm(SuspendVmRequest r, StreamObserver<SuspendVmResponse> out) {
      answer(
          out,
          () -> {
            Machine m = inState(r.getVmId(), "SuspendVm", Set.of("running"));
            m.engine.suspend(m.local);
            m.status = "suspended";
            return SuspendVmResponse.newBuilder().setSuspendUs(1000).build();
          });
    }

    @Override
    public void resumeVm(ResumeVmRequest r, StreamObserver<ResumeVmResponse> out) {
      answer(
          out,
          () -> {
            Machine m = inState(r.getVmId(), "ResumeVm", Set.of("suspended"));
            m.engine.resume(m.local);
            m.status = "running";
            return ResumeVmResponse.newBuilder().setResumeUs(1000).build();
          });
    }

    @Override
    public void wakeVm(WakeVmRequest r, StreamObserver<WakeVmResponse> out) {
      answer(
          out,
          () -> {
            Machine m = inState(r.getVmId(), "WakeVm", Set.of("hibernated", "suspended"));
            m.engine.resume(m.local);
            m.status = "running";
            return WakeVmResponse.getDefaultInstance();
          });
    }

    @Override
    public void stopVm(StopVmRequest r, StreamObserver<StopVmResponse> out) {
      answer(
          out,
          () -> {
            Machine m = inState(r.getVmId(), "StopVm", Set.of("running", "suspended"));
            m.engine.stop(m.local);
            m.status = "stopped";
            return StopVmResponse.getDefaultInstance();
          });
    }

    @Override
    public void startVm(StartVmRequest r, StreamObserver<StartVmResponse> out) {
      answer(
          out,
          () -> {
            Machine m = inState(r.getVmId(), "StartVm", Set.of("stopped", "failed"));
            m.status = "starting";
            Thread.ofVirtual()
                .start(
                    () -> {
                      m.engine.start(m.local);
                      m.status = "running";
                    });
            return StartVmResponse.getDefaultInstance();
          });
    }

    @Override
    public void createSnapshot(
        CreateSnapshotRequest r, StreamObserver<CreateSnapshotResponse> out) {
      answer(
          out,
          () -> {
            Machine m = inState(r.getVm(), "CreateSnapshot", Set.of("running"));
            String localName = "boxd-" + tag + "-" + r.getName();
            m.engine.snapshot(m.local, localName);
            Snapshot s =
                new Snapshot(r.getName(), localName, Instant.now().plus(snapshotDelay), m.vcpu);
            snapshots.put(r.getName(), s);
            return CreateSnapshotResponse.newBuilder()
                .setSnapshotId("snap-" + r.getName())
                .setName(r.getName())
                .setVersion(1)
                .setStatus("pending")
                .build();
          });
    }

    @Override
    public void getSnapshot(GetSnapshotRequest r, StreamObserver<GetSnapshotResponse> out) {
      answer(
          out,
          () -> {
            Snapshot s = snapshots.get(r.getName());
            if (s == null) {
              throw Status.NOT_FOUND.withDescription("snapshot not found").asRuntimeException();
            }
            return GetSnapshotResponse.newBuilder()
                .setSnapshot(
                    SnapshotInfo.newBuilder()
                        .setName(s.name())
                        .setSnapshotId("snap-" + s.name())
                        .setVersion(1)
                        .setStatus(Instant.now().isBefore(s.readyAt()) ? "pending" : "ready")
                        .setVcpu(s.vcpu())
                        .setMemoryBytes(s.vcpu() * 4L * 1024 * 1024 * 1024))
                .build();
          });
    }

    @Override
    public void deleteSnapshot(
        DeleteSnapshotRequest r, StreamObserver<DeleteSnapshotResponse> out) {
      answer(
          out,
          () -> {
            Snapshot s = snapshots.remove(r.getName());
            if (s == null) {
              throw Status.NOT_FOUND.withDescription("snapshot not found").asRuntimeException();
            }
            return DeleteSnapshotResponse.getDefaultInstance();
          });
    }

    @Override
    public StreamObserver<UploadFileChunk> uploadFileStream(
        StreamObserver<UploadFileResponse> out) {
      ByteArrayOutputStream data = new ByteArrayOutputStream();
      String[] target = new String[2];
      return new StreamObserver<>() {
        @Override
        public void onNext(UploadFileChunk chunk) {
          if (target[0] == null) {
            target[0] = chunk.getVmId();
            target[1] = chunk.getPath();
          }
          data.writeBytes(chunk.getData().toByteArray());
        }

        @Override
        public void onError(Throwable t) {}

        @Override
        public void onCompleted() {
          answer(
              out,
              () -> {
                Machine m = inState(target[0], "UploadFileStream", Set.of("running"));
                // as the machine's user, creating missing parents (as boxd's upload does)
                CommandResult r =
                    Workspace.of(m.engine.backend(m.local).orElseThrow())
                        .run(
                            Command.argv(
                                "sh",
                                "-c",
                                "mkdir -p -- \"$(dirname -- \"$1\")\" && cat > \"$1\"",
                                "sh",
                                target[1]),
                            RunOptions.builder().stdin(data.toByteArray()).build());
                if (r.exitCode() != 0) {
                  throw Status.PERMISSION_DENIED
                      .withDescription(r.stderrText())
                      .asRuntimeException();
                }
                return UploadFileResponse.newBuilder().setBytesWritten(data.size()).build();
              });
        }
      };
    }

    @Override
    public StreamObserver<ExecChunk> exec(StreamObserver<ExecChunk> responses) {
      ServerCallStreamObserver<ExecChunk> out = (ServerCallStreamObserver<ExecChunk>) responses;
      return new ExecSession(out);
    }
  }

  /** One Exec call: the command runs on its own thread, fed by the stdin frames. */
  private final class ExecSession implements StreamObserver<ExecChunk> {
    private final ServerCallStreamObserver<ExecChunk> out;
    private final LinkedBlockingQueue<byte[]> stdin = new LinkedBlockingQueue<>();
    private static final byte[] EOF = new byte[0];
    private volatile Thread runner;
    private volatile boolean finished;
    private volatile long lastOutput = System.nanoTime();

    ExecSession(ServerCallStreamObserver<ExecChunk> out) {
      this.out = out;
      // flow control as a real server writing to a pipe has: the next stdin frame is asked for
      // only once the command took the previous one
      out.disableAutoRequest();
      out.request(1);
      out.setOnCancelHandler(
          () -> {
            Thread t = runner;
            if (t != null && t != Thread.currentThread()) {
              cancelledOn(t);
              t.interrupt();
            }
          });
    }

    @Override
    public void onNext(ExecChunk chunk) {
      if (runner == null) {
        start(chunk);
        out.request(1);
      } else if (chunk.getStdin()) {
        stdin.add(chunk.getData().toByteArray());
      } else {
        out.request(1);
      }
    }

    @Override
    public void onError(Throwable t) {
      stdin.add(EOF);
    }

    @Override
    public void onCompleted() {
      stdin.add(EOF);
    }

    private volatile Machine machine;

    private void cancelledOn(Thread t) {
      Machine m = machine;
      if (m != null && t.isAlive()) {
        m.cancelled.add(t);
      }
    }

    private synchronized void send(ExecChunk chunk) {
      if (!finished) {
        try {
          out.onNext(chunk);
        } catch (RuntimeException cancelled) {
          // the client went away
        }
      }
    }

    private synchronized void end(Throwable error) {
      if (finished) {
        return;
      }
      finished = true;
      try {
        if (error == null) {
          out.onCompleted();
        } else {
          out.onError(error);
        }
      } catch (RuntimeException cancelled) {
        // the client went away
      }
    }

    private void start(ExecChunk first) {
      Machine m;
      try {
        m = live(first.getVmId());
        if (!m.status.equals("running")) {
          throw Status.FAILED_PRECONDITION
              .withDescription("VM is " + m.status)
              .asRuntimeException();
        }
      } catch (StatusRuntimeException e) {
        runner = Thread.currentThread(); // nothing runs: later frames are dropped
        end(e);
        return;
      }
      Machine machine = m;
      this.machine = m;
      awaitEndOfCancelled(machine);
      runner =
          Thread.ofVirtual()
              .unstarted(
                  () -> {
                    machine.execs.add(Thread.currentThread());
                    try {
                      run(machine, first.getCommand());
                    } finally {
                      machine.execs.remove(Thread.currentThread());
                      machine.cancelled.remove(Thread.currentThread());
                    }
                  });
      runner.start();
      Thread.ofVirtual().start(this::watchSilence);
    }

    /**
     * boxd kills a cancelled exec's whole process namespace at once; the local engine kills a tree
     * one process at a time. A new exec waits for those still dying, so that it sees what a command
     * on boxd would: none of them.
     */
    private void awaitEndOfCancelled(Machine machine) {
      long end = System.nanoTime() + Duration.ofSeconds(10).toNanos();
      for (Thread t : machine.cancelled) {
        try {
          t.join(Duration.ofNanos(Math.max(1, end - System.nanoTime())));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }

    /** boxd drops a non-PTY exec that printed nothing for its limit, without an exit frame. */
    private void watchSilence() {
      while (!finished) {
        if (System.nanoTime() - lastOutput > noOutputLimit.toNanos()) {
          runner.interrupt();
          end(null);
          return;
        }
        try {
          Thread.sleep(20);
        } catch (InterruptedException e) {
          return;
        }
      }
    }

    private void output(byte[] data, boolean isStderr) {
      lastOutput = System.nanoTime();
      send(ExecChunk.newBuilder().setData(ByteString.copyFrom(data)).setIsStderr(isStderr).build());
      if (cutExecs || endExecsWithoutExit) {
        end(
            cutExecs
                ? Status.UNAVAILABLE.withDescription("connection reset").asRuntimeException()
                : null);
        runner.interrupt();
      }
    }

    private void run(Machine m, String command) {
      try {
        CommandResult r =
            Workspace.of(m.engine.backend(m.local).orElseThrow())
                .run(
                    Command.shell(command),
                    RunOptions.builder()
                        .stdin(new QueueInput())
                        .retainOutput(false)
                        .outputLimit(Long.MAX_VALUE)
                        .onStdout(d -> output(d, false))
                        .onStderr(d -> output(d, true))
                        .build());
        send(ExecChunk.newBuilder().setExitCode(r.exitCode()).build());
        end(null);
      } catch (WorkspaceUnavailableException e) {
        end(Status.NOT_FOUND.withDescription("VM is destroyed").asRuntimeException());
      } catch (java.util.concurrent.CancellationException e) {
        end(
            m.destroyedAt != null
                ? Status.NOT_FOUND.withDescription("VM is destroyed").asRuntimeException()
                : Status.CANCELLED.asRuntimeException());
      } catch (RuntimeException e) {
        end(
            m.destroyedAt != null
                ? Status.NOT_FOUND.withDescription("VM is destroyed").asRuntimeException()
                : Status.INTERNAL.withDescription(e.toString()).asRuntimeException());
      }
    }

    /** The stdin frames as a stream, ending at half-close. */
    private final class QueueInput extends InputStream {
      private byte[] current = new byte[0];
      private int pos;
      private boolean eof;

      @Override
      public int read() throws IOException {
        byte[] one = new byte[1];
        return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
      }

      @Override
      public int read(byte[] b, int off, int len) throws IOException {
        while (!eof && pos == current.length) {
          try {
            byte[] next = stdin.take();
            if (next == EOF) {
              eof = true;
            } else {
              current = next;
              pos = 0;
              out.request(1);
            }
          } catch (InterruptedException e) {
            throw new InterruptedIOException();
          }
        }
        if (pos == current.length) {
          return -1;
        }
        int n = Math.min(len, current.length - pos);
        System.arraycopy(current, pos, b, off, n);
        pos += n;
        return n;
      }
    }
  }

  /** Destroys what is left in the local engine. */
  @Override
  public void close() {
    server.shutdownNow();
    tokenServer.stop(0);
    for (Machine m : machines.values()) {
      if (m.local != null && m.destroyedAt == null) {
        try {
          m.engine.destroy(m.local);
        } catch (RuntimeException e) {
          // best effort
        }
      }
    }
    for (Snapshot s : snapshots.values()) {
      try {
        LocalSandbox.builder().build().removeSnapshot(s.localName());
      } catch (RuntimeException e) {
        // best effort
      }
    }
    try {
      server.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
