package dev.sandbox4j.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.DynamicMessage;
import dev.sandbox4j.server.internal.e2b.EnvdFilesystem;
import dev.sandbox4j.server.internal.e2b.EnvdProcess;
import org.junit.jupiter.api.Test;

/**
 * The binary codec's translation: messages built with the generated classes (so from the .proto's
 * field numbers, not from this translator) read as ProtoJSON, and back to the same bytes.
 */
class E2bProtoJsonTest {

  @Test
  void processEventsAndConfigsRoundTrip() throws Exception {
    EnvdProcess.StartResponse end =
        EnvdProcess.StartResponse.newBuilder()
            .setEvent(
                EnvdProcess.ProcessEvent.newBuilder()
                    .setEnd(
                        EnvdProcess.ProcessEvent.EndEvent.newBuilder()
                            .setExitCode(-1)
                            .setStatus("signal: killed")))
            .build();
    JsonNode json = roundTrip(end, EnvdProcess.StartResponse.getDescriptor());
    assertThat(json.toString())
        .isEqualTo("{\"event\":{\"end\":{\"exitCode\":-1,\"status\":\"signal: killed\"}}}");

    EnvdProcess.StartRequest start =
        EnvdProcess.StartRequest.newBuilder()
            .setProcess(
                EnvdProcess.ProcessConfig.newBuilder()
                    .setCmd("/bin/bash")
                    .addArgs("-c")
                    .addArgs("echo hi")
                    .putEnvs("A", "1")
                    .setCwd("/tmp"))
            .setStdin(true)
            .build();
    assertThat(roundTrip(start, EnvdProcess.StartRequest.getDescriptor()).toString())
        .isEqualTo(
            "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-c\",\"echo hi\"],"
                + "\"envs\":{\"A\":\"1\"},\"cwd\":\"/tmp\"},\"stdin\":true}");

    EnvdProcess.ProcessEvent data =
        EnvdProcess.ProcessEvent.newBuilder()
            .setData(
                EnvdProcess.ProcessEvent.DataEvent.newBuilder()
                    .setStdout(ByteString.copyFromUtf8("hi\n")))
            .build();
    assertThat(roundTrip(data, EnvdProcess.ProcessEvent.getDescriptor()).toString())
        .isEqualTo("{\"data\":{\"stdout\":\"aGkK\"}}");
  }

  @Test
  void entriesWithInt64EnumAndTimestampRoundTrip() throws Exception {
    EnvdFilesystem.StatResponse stat =
        EnvdFilesystem.StatResponse.newBuilder()
            .setEntry(
                EnvdFilesystem.EntryInfo.newBuilder()
                    .setName("a.txt")
                    .setType(EnvdFilesystem.FileType.FILE_TYPE_FILE)
                    .setSize(5_000_000_000L)
                    .setMode(0644)
                    .setModifiedTime(
                        com.google.protobuf.Timestamp.newBuilder()
                            .setSeconds(1_700_000_000L)
                            .setNanos(5)))
            .build();
    assertThat(roundTrip(stat, EnvdFilesystem.StatResponse.getDescriptor()).toString())
        .isEqualTo(
            "{\"entry\":{\"name\":\"a.txt\",\"type\":\"FILE_TYPE_FILE\",\"size\":\"5000000000\","
                + "\"mode\":420,\"modifiedTime\":\"2023-11-14T22:13:20.000000005Z\"}}");
  }

  @Test
  void aValueOfTheWrongShapeNamesItsField() {
    Descriptor d = EnvdFilesystem.ListDirRequest.getDescriptor();
    assertThatThrownBy(() -> E2bProtoJson.fromJson(Json.MAPPER.readTree("{\"depth\":\"deep\"}"), d))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("filesystem.ListDirRequest.depth");
  }

  /** The message as JSON, checked to encode back to the generated message's exact bytes. */
  private static JsonNode roundTrip(com.google.protobuf.Message m, Descriptor d) throws Exception {
    JsonNode json = E2bProtoJson.toJson(DynamicMessage.parseFrom(d, m.toByteArray()));
    DynamicMessage back = E2bProtoJson.fromJson(json, d);
    assertThat(back.toByteArray()).isEqualTo(m.toByteArray());
    return json;
  }
}
