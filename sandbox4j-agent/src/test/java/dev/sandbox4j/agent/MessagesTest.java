package dev.sandbox4j.agent;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;

class MessagesTest {

  private static final Instant T = Instant.parse("2026-11-29T12:00:00.123456Z");
  private static final WorkspaceRef REF = new WorkspaceRef("local", "sb-1");

  static List<Message> history() {
    return List.of(
        new RequestMessage(List.of(new RequestPart.UserPrompt("fix the test")), T),
        new ResponseMessage(
            List.of(
                new ResponsePart.Text("Looking. “Quotes”, ünïcode, \u0000 and \n newlines."),
                new ResponsePart.ToolCall("t1", "read_file", "{\"path\":\"a.py\"}")),
            new Usage(1, 120, 30, 0),
            "claude-sonnet-4-5",
            REF,
            T),
        new RequestMessage(
            List.of(
                new RequestPart.ToolReturn("t1", "read_file", "     1\tprint(1)", false),
                new RequestPart.RetryPrompt("t2", "edit_file", "`old_text`: required, missing")),
            T),
        new ResponseMessage(
            List.of(new ResponsePart.Text("done")), Usage.ofTokens(200, 5), "m", null, T));
  }

  @Test
  void historyRoundTripsThroughJson() {
    String json = Messages.toJson(history());
    assertThat(Messages.fromJson(json)).isEqualTo(history());
    assertThat(json)
        .contains("\"kind\":\"request\"")
        .contains("\"kind\":\"tool-call\"")
        .contains("\"workspace\":{\"provider\":\"local\",\"id\":\"sb-1\"}")
        .contains("\"timestamp\":\"2026-11-29T12:00:00.123456Z\"");

    ByteArrayOutputStream out = new ByteArrayOutputStream();
    Messages.writeJson(history(), out);
    assertThat(Messages.readJson(new ByteArrayInputStream(out.toByteArray()))).isEqualTo(history());
  }

  @Test
  void aResponseWithoutWorkspaceLeavesTheFieldOut() {
    String json = Messages.toJson(List.of(history().getLast()));
    assertThat(json).doesNotContain("workspace");
  }

  @Test
  void brokenJsonIsAClearError() {
    assertThatThrownBy(() -> Messages.fromJson("[{\"kind\":\"teleport\"}]"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("not a message history: ")
        .hasMessageContaining("teleport");
    assertThatThrownBy(() -> Messages.fromJson("{"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("line 1");
  }

  @Test
  void sanitizeRemovesEveryWorkspaceRef() {
    assertThat(Messages.latestWorkspace(history())).contains(REF);
    List<Message> clean = Messages.sanitize(history());
    assertThat(Messages.latestWorkspace(clean)).isEmpty();
    assertThat(clean).hasSize(history().size());
    assertThat(Messages.toJson(clean)).doesNotContain("sb-1");
  }

  @Test
  void theLatestRefWins() {
    ResponseMessage later =
        ResponseMessage.text("x").withWorkspace(new WorkspaceRef("local", "sb-2"));
    List<Message> messages = new java.util.ArrayList<>(history());
    messages.add(later);
    assertThat(Messages.latestWorkspace(messages)).contains(new WorkspaceRef("local", "sb-2"));
  }
}
