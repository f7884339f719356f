package dev.sandbox4j.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sandbox4j.agent.AgentEvent;
import java.io.PrintStream;
import java.util.HashSet;
import java.util.Set;
import java.util.function.Consumer;

/**
 * Shows an agent run as it happens: the model's text on stdout; each tool call, a command's live
 * output, and edits as diffs on stderr — so that stdout holds the answer alone.
 */
final class EventPrinter implements Consumer<AgentEvent> {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int PREVIEW_LINES = 12;

  private final PrintStream out;
  private final PrintStream err;
  private final Set<String> streamed = new HashSet<>();
  private boolean textOpen;
  private boolean liveAtLineStart = true;

  EventPrinter(PrintStream out, PrintStream err) {
    this.out = out;
    this.err = err;
  }

  @Override
  public void accept(AgentEvent event) {
    switch (event) {
      case AgentEvent.TextDelta delta -> {
        out.print(delta.text());
        out.flush();
        textOpen = !delta.text().endsWith("\n");
      }
      case AgentEvent.ModelResponded responded -> endText();
      case AgentEvent.ToolCallStarted started -> {
        endText();
        describeCall(started.toolName(), started.arguments());
      }
      case AgentEvent.ToolOutput output -> {
        streamed.add(output.toolCallId());
        printLive(output.text());
      }
      case AgentEvent.ToolCallFinished finished -> describeResult(finished);
      case AgentEvent.WorkspaceCreated created ->
          err.println("Created " + created.ref().provider() + " sandbox " + created.ref());
    }
  }

  /** Ends the model's text with a newline, if it has not. */
  void endText() {
    if (textOpen) {
      out.println();
      out.flush();
      textOpen = false;
    }
  }

  private void describeCall(String tool, String arguments) {
    JsonNode args;
    try {
      args = JSON.readTree(arguments);
    } catch (Exception e) {
      args = JSON.createObjectNode();
    }
    switch (tool) {
      case "shell", "run_command", "start_command" ->
          err.println("→ " + tool + ": $ " + args.path("command").asText());
      case "edit_file" -> {
        err.println("→ edit_file " + args.path("path").asText());
        for (String line : args.path("old_text").asText().split("\n", -1)) {
          err.println("  - " + line);
        }
        for (String line : args.path("new_text").asText().split("\n", -1)) {
          err.println("  + " + line);
        }
      }
      case "write_file" -> {
        String content = args.path("content").asText();
        err.println(
            "→ write_file "
                + args.path("path").asText()
                + " ("
                + content.lines().count()
                + " lines)");
        err.print(indent(preview(content)));
      }
      case "read_file", "list_directory", "create_directory", "file_info" ->
          err.println("→ " + tool + " " + args.path("path").asText("."));
      default -> {
        String text = args.isObject() && args.size() > 0 ? " " + args : "";
        err.println("→ " + tool + (text.length() > 200 ? text.substring(0, 200) + "…" : text));
      }
    }
    err.flush();
  }

  /** A command's output as it arrives: chunks need not end at line ends. */
  private void printLive(String text) {
    StringBuilder shown = new StringBuilder();
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (liveAtLineStart) {
        shown.append("  │ ");
        liveAtLineStart = false;
      }
      shown.append(c);
      if (c == '\n') {
        liveAtLineStart = true;
      }
    }
    err.print(shown);
    err.flush();
  }

  private void describeResult(AgentEvent.ToolCallFinished finished) {
    if (!liveAtLineStart) {
      err.println();
      liveAtLineStart = true;
    }
    switch (finished.outcome()) {
      case FAILED -> err.println("  ✗ " + firstLine(finished.result()));
      case RETRY -> err.println("  ↻ the model is asked to retry: " + firstLine(finished.result()));
      case RETURNED -> {
        if (streamed.remove(finished.toolCallId())) {
          String last = lastLine(finished.result());
          if (last.startsWith("[")) {
            err.println("  " + last);
          }
        } else if (!finished.toolName().equals("write_file")
            && !finished.toolName().equals("edit_file")) {
          err.print(indent(preview(finished.result())));
        } else {
          err.println("  " + firstLine(finished.result()));
        }
      }
    }
    err.flush();
  }

  private static String preview(String text) {
    String[] lines = text.split("\n");
    if (lines.length <= PREVIEW_LINES) {
      return text.endsWith("\n") || text.isEmpty() ? text : text + "\n";
    }
    StringBuilder shown = new StringBuilder();
    for (int i = 0; i < PREVIEW_LINES; i++) {
      shown.append(lines[i]).append('\n');
    }
    return shown
        .append("… (")
        .append(lines.length - PREVIEW_LINES)
        .append(" more lines)\n")
        .toString();
  }

  private static String indent(String text) {
    if (text.isEmpty()) {
      return text;
    }
    StringBuilder indented = new StringBuilder();
    for (String line : text.split("\n", -1)) {
      indented.append("  │ ").append(line).append('\n');
    }
    // split leaves an empty last element after a final newline: drop its line
    if (text.endsWith("\n")) {
      indented.setLength(indented.length() - "  │ \n".length());
    }
    return indented.toString();
  }

  private static String firstLine(String text) {
    int newline = text.indexOf('\n');
    return newline < 0 ? text : text.substring(0, newline) + " …";
  }

  private static String lastLine(String text) {
    String trimmed = text.stripTrailing();
    int newline = trimmed.lastIndexOf('\n');
    return newline < 0 ? trimmed : trimmed.substring(newline + 1);
  }
}
