package dev.sandbox4j.modal;

import dev.sandbox4j.modal.internal.proto.BaseImage;
import dev.sandbox4j.modal.internal.proto.GenericResult;
import dev.sandbox4j.modal.internal.proto.GenericResult.GenericStatus;
import dev.sandbox4j.modal.internal.proto.Image;
import dev.sandbox4j.modal.internal.proto.ImageGetOrCreateRequest;
import dev.sandbox4j.modal.internal.proto.ImageGetOrCreateResponse;
import dev.sandbox4j.modal.internal.proto.ImageJoinStreamingRequest;
import dev.sandbox4j.modal.internal.proto.ImageJoinStreamingResponse;
import dev.sandbox4j.workspace.WorkspaceException;
import io.grpc.StatusRuntimeException;
import java.util.Iterator;
import java.util.List;

/**
 * Builds an image as Modal's clients do: one {@code ImageGetOrCreate} per layer, each layer after
 * the first starting {@code FROM base} with the previous layer as its base image, then {@code
 * ImageJoinStreaming} (resumed from the last entry id) until the build has a result. Modal caches
 * layers by their content, so asking again for a built image returns at once.
 */
final class Images {
  /**
   * The seed's default image, "Debian slim with Python 3.12, git and ripgrep", whose commands start
   * in {@code /root}. Modal's Python SDK builds {@code Image.debian_slim()} from Modal's own base
   * layers, which are not public protocol: this recipe starts from the official {@code
   * python:3.12-slim-bookworm} (Debian slim with Python 3.12) instead.
   */
  static final List<List<String>> DEFAULT_RECIPE =
      List.of(
          List.of("FROM python:3.12-slim-bookworm"),
          List.of(
              "FROM base",
              "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y"
                  + " --no-install-recommends git ripgrep && rm -rf /var/lib/apt/lists/*",
              "WORKDIR /root"));

  static final String DEFAULT_WORKING_DIRECTORY = "/root";

  /** How long the server may hold one join call open, in seconds, as Modal's clients ask. */
  private static final float JOIN_TIMEOUT_SECONDS = 55;

  private Images() {}

  /** The recipe of a registry image: its tag alone. */
  static List<List<String>> fromRegistry(String tag) {
    return List.of(List.of("FROM " + tag));
  }

  /** Builds {@code layers} in app {@code appId}; returns the last layer's image id. */
  static String build(ControlPlane control, String appId, List<List<String>> layers) {
    String previous = null;
    for (List<String> commands : layers) {
      Image.Builder image = Image.newBuilder().addAllDockerfileCommands(commands);
      if (previous != null) {
        image.addBaseImages(BaseImage.newBuilder().setDockerTag("base").setImageId(previous));
      }
      ImageGetOrCreateRequest request =
          ImageGetOrCreateRequest.newBuilder()
              .setAppId(appId)
              .setImage(image)
              .setBuilderVersion(control.config().imageBuilderVersion())
              .build();
      ImageGetOrCreateResponse response;
      try {
        response = control.call(s -> s.imageGetOrCreate(request));
      } catch (StatusRuntimeException e) {
        throw ModalErrors.translate("building the image " + commands, e);
      }
      GenericResult result =
          response.hasResult() ? response.getResult() : GenericResult.getDefaultInstance();
      if (result.getStatus() == GenericStatus.GENERIC_STATUS_UNSPECIFIED) {
        result = join(control, response.getImageId());
      }
      if (result.getStatus() != GenericStatus.GENERIC_STATUS_SUCCESS) {
        throw new WorkspaceException(
            "Modal could not build the image "
                + commands
                + ": "
                + result.getStatus()
                + (result.getException().isEmpty() ? "" : ": " + result.getException()));
      }
      previous = response.getImageId();
    }
    return previous;
  }

  /** Follows the build of {@code imageId} until it has a result. */
  private static GenericResult join(ControlPlane control, String imageId) {
    String lastEntry = "";
    int failures = 0;
    while (true) {
      try {
        Iterator<ImageJoinStreamingResponse> responses =
            control
                .streaming()
                .imageJoinStreaming(
                    ImageJoinStreamingRequest.newBuilder()
                        .setImageId(imageId)
                        .setTimeout(JOIN_TIMEOUT_SECONDS)
                        .setLastEntryId(lastEntry)
                        .build());
        while (responses.hasNext()) {
          ImageJoinStreamingResponse response = responses.next();
          if (!response.getEntryId().isEmpty()) {
            lastEntry = response.getEntryId();
          }
          if (response.hasResult()
              && response.getResult().getStatus() != GenericStatus.GENERIC_STATUS_UNSPECIFIED) {
            return response.getResult();
          }
        }
        // the stream ended without a result (the server's timeout): ask again
      } catch (StatusRuntimeException e) {
        if (!Retries.retryable(e.getStatus().getCode()) || failures >= Retries.MAX_RETRIES) {
          throw ModalErrors.translate("waiting for the image " + imageId + " to build", e);
        }
        Retries.sleep(Retries.delay(failures++));
      }
    }
  }
}
