package dev.sandbox4j.boxd;

import com.google.protobuf.ByteString;
import dev.sandbox4j.boxd.BoxdCalls.Target;
import dev.sandbox4j.boxd.internal.proto.BoxdApiGrpc;
import dev.sandbox4j.boxd.internal.proto.UploadFileChunk;
import dev.sandbox4j.boxd.internal.proto.UploadFileResponse;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * One file sent with boxd's client-streaming {@code UploadFileStream}: the first frame names the
 * machine, the path and the total size, every frame carries up to {@link #CHUNK} bytes (well under
 * gRPC's 4 MiB message cap), and the answer says how many bytes were written.
 */
final class BoxdUpload {

  static final int CHUNK = 256 * 1024;

  /** A file's upload may take longer than a unary call: ten of their deadlines. */
  private static final long DEADLINE_MILLIS = BoxdCalls.CALL_TIMEOUT.toMillis() * 10;

  private BoxdUpload() {}

  static long send(BoxdCalls calls, String vmId, String path, byte[] content) {
    CompletableFuture<UploadFileResponse> answer = new CompletableFuture<>();
    StreamObserver<UploadFileChunk> out =
        calls
            .authorized(BoxdApiGrpc::newStub)
            .stub()
            .withDeadlineAfter(DEADLINE_MILLIS, TimeUnit.MILLISECONDS)
            .uploadFileStream(
                new StreamObserver<>() {
                  @Override
                  public void onNext(UploadFileResponse value) {
                    answer.complete(value);
                  }

                  @Override
                  public void onError(Throwable t) {
                    answer.completeExceptionally(t);
                  }

                  @Override
                  public void onCompleted() {
                    answer.complete(UploadFileResponse.getDefaultInstance());
                  }
                });
    int offset = 0;
    do {
      int n = Math.min(CHUNK, content.length - offset);
      UploadFileChunk.Builder chunk =
          UploadFileChunk.newBuilder().setData(ByteString.copyFrom(content, offset, n));
      if (offset == 0) {
        chunk.setVmId(vmId).setPath(path).setTotalSize(content.length);
      }
      out.onNext(chunk.build());
      offset += n;
    } while (offset < content.length);
    out.onCompleted();
    try {
      return answer.get().getBytesWritten();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CancellationException("interrupted uploading to boxd machine " + vmId);
    } catch (ExecutionException e) {
      StatusRuntimeException failure =
          e.getCause() instanceof StatusRuntimeException s
              ? s
              : Status.fromThrowable(e.getCause()).asRuntimeException();
      throw BoxdCalls.failure("UploadFileStream", Target.machine(vmId), failure);
    }
  }
}
