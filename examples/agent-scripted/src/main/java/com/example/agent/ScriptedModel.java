package com.example.agent;

import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.Model;
import dev.sandbox4j.agent.ModelRequest;
import dev.sandbox4j.agent.RequestMessage;
import dev.sandbox4j.agent.RequestPart;
import dev.sandbox4j.agent.ResponseMessage;
import dev.sandbox4j.agent.ResponsePart;
import java.util.List;
import java.util.function.Consumer;

/**
 * A model that follows a script instead of calling an AI provider: it answers each prompt of {@link
 * Main} with tool calls, then reports what the last tool returned. Handy in tests, and a picture of
 * what a real model does through the same {@link Model} interface.
 */
final class ScriptedModel implements Model {
  @Override
  public String name() {
    return "scripted";
  }

  @Override
  public ResponseMessage request(ModelRequest request, Consumer<String> textDeltas) {
    RequestMessage latest = (RequestMessage) request.messages().getLast();
    for (RequestPart part : latest.parts()) {
      if (part instanceof RequestPart.UserPrompt prompt && prompt.text().contains("Write")) {
        return ResponseMessage.of(
            List.of(
                call(
                    "1", "write_file", "{\"path\":\"hello.py\",\"content\":\"print('Hello')\\n\"}"),
                call("2", "shell", "{\"command\":\"python3 hello.py\"}")));
      }
      if (part instanceof RequestPart.UserPrompt prompt && prompt.text().contains("French")) {
        return ResponseMessage.of(
            List.of(
                call(
                    "3",
                    "edit_file",
                    "{\"path\":\"hello.py\",\"old_text\":\"Hello\",\"new_text\":\"Bonjour\"}"),
                call("4", "shell", "{\"command\":\"python3 hello.py\"}")));
      }
    }
    // the shell tool's result is "[stdout]" and the output, then any stderr and the exit status
    String output = lastToolResult(request.messages()).replaceFirst("^\\[stdout\\]\n", "");
    return ResponseMessage.text("It printed: " + output.lines().findFirst().orElse(""));
  }

  private static ResponsePart.ToolCall call(String id, String tool, String argumentsJson) {
    return new ResponsePart.ToolCall(id, tool, argumentsJson);
  }

  private static String lastToolResult(List<Message> messages) {
    String last = "";
    for (Message message : messages) {
      if (message instanceof RequestMessage request) {
        for (RequestPart part : request.parts()) {
          if (part instanceof RequestPart.ToolReturn result) {
            last = result.content();
          }
        }
      }
    }
    return last;
  }
}
