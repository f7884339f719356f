package dev.sandbox4j.agent;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.datatype.jsr310.JavaTimeModule;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Message histories as JSON, and the operations a run performs on them.
 *
 * <p>The JSON form is stable within a release: an array of messages, each with a {@code kind}
 * ({@code request} or {@code response}), parts with their own {@code kind}, ISO-8601 timestamps,
 * and responses' {@code workspace} as {@code {"provider": ..., "id": ...}}.
 */
public final class Messages {

  private static final TypeReference<List<Message>> LIST = new TypeReference<>() {};

  static final ObjectMapper MAPPER =
      JsonMapper.builder()
          .addModule(new JavaTimeModule())
          .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS)
          .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
          .build();

  private Messages() {}

  /** The history as a JSON array. */
  public static String toJson(List<? extends Message> messages) {
    try {
      return MAPPER.writerFor(LIST).writeValueAsString(messages);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("a message history could not be written as JSON", e);
    }
  }

  /** Writes the history as a JSON array to {@code out} (left open). */
  public static void writeJson(List<? extends Message> messages, OutputStream out) {
    try {
      MAPPER.writerFor(LIST).writeValue(new NonClosing(out), messages);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * A history read from its JSON form.
   *
   * @throws IllegalArgumentException naming what is wrong if the JSON is not a message history
   */
  public static List<Message> fromJson(String json) {
    try {
      return List.copyOf(MAPPER.readValue(json, LIST));
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(
          "not a message history: " + e.getOriginalMessage() + locationOf(e), e);
    }
  }

  /** A history read from its JSON form in {@code in} (left open). */
  public static List<Message> readJson(InputStream in) {
    try {
      return List.copyOf(MAPPER.readValue(new NonClosingInput(in), LIST));
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(
          "not a message history: " + e.getOriginalMessage() + locationOf(e), e);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * The history with every workspace ref removed, for a history that came from an untrusted client:
   * a ref names a machine, and whoever passes a history back would otherwise choose which machine
   * the next run works in.
   */
  public static List<Message> sanitize(List<? extends Message> messages) {
    List<Message> clean = new ArrayList<>(messages.size());
    for (Message message : messages) {
      clean.add(
          message instanceof ResponseMessage response ? response.withWorkspace(null) : message);
    }
    return List.copyOf(clean);
  }

  /** The workspace ref of the latest response that has one. */
  public static Optional<WorkspaceRef> latestWorkspace(List<? extends Message> messages) {
    for (int i = messages.size() - 1; i >= 0; i--) {
      if (messages.get(i) instanceof ResponseMessage response && response.workspace() != null) {
        return Optional.of(response.workspace());
      }
    }
    return Optional.empty();
  }

  private static String locationOf(JsonProcessingException e) {
    return e.getLocation() == null
        ? ""
        : " (line "
            + e.getLocation().getLineNr()
            + ", column "
            + e.getLocation().getColumnNr()
            + ")";
  }

  private static final class NonClosing extends java.io.FilterOutputStream {
    NonClosing(OutputStream out) {
      super(out);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      out.write(b, off, len);
    }

    @Override
    public void close() throws IOException {
      flush();
    }
  }

  private static final class NonClosingInput extends java.io.FilterInputStream {
    NonClosingInput(InputStream in) {
      super(in);
    }

    @Override
    public void close() {}
  }
}
