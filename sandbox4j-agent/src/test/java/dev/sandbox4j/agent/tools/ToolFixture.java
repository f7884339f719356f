package dev.sandbox4j.agent.tools;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.sandbox4j.agent.Capability;
import dev.sandbox4j.agent.Message;
import dev.sandbox4j.agent.ModelRetryException;
import dev.sandbox4j.agent.RunContext;
import dev.sandbox4j.agent.Tool;
import dev.sandbox4j.agent.ToolContext;
import dev.sandbox4j.agent.Usage;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceBackend;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;

/**
 * Calls tools directly, outside an agent, in one workspace: one fake run whose tool calls share
 * background commands, and the output they emit.
 */
final class ToolFixture implements RunContext {

  final Workspace workspace;
  final List<String> emitted = Collections.synchronizedList(new ArrayList<>());

  ToolFixture(WorkspaceBackend backend) {
    this.workspace = Workspace.of(backend);
  }

  /** What the model reads from a call that returned. */
  String call(Capability capability, String toolName, String argumentsJson) throws Exception {
    return tool(capability, toolName).call(context(toolName), argumentsJson);
  }

  /** The error result the model reads from a call that failed (not a retry prompt). */
  String error(Capability capability, String toolName, String argumentsJson) {
    Throwable thrown =
        catchThrowable(() -> tool(capability, toolName).call(context(toolName), argumentsJson));
    assertThat(thrown)
        .as("%s(%s) should fail", toolName, argumentsJson)
        .isNotNull()
        .isNotInstanceOf(ModelRetryException.class);
    return thrown.getMessage();
  }

  static Tool tool(Capability capability, String name) {
    return capability.tools().stream()
        .filter(t -> t.definition().name().equals(name))
        .findFirst()
        .orElseThrow(() -> new AssertionError("no tool " + name));
  }

  private ToolContext context(String toolName) {
    RunContext run = this;
    return new ToolContext() {
      @Override
      public RunContext run() {
        return run;
      }

      @Override
      public String toolCallId() {
        return "call-1";
      }

      @Override
      public String toolName() {
        return toolName;
      }

      @Override
      public void emitOutput(String stream, String text) {
        emitted.add(stream + ":" + text);
      }
    };
  }

  @Override
  public String prompt() {
    return "";
  }

  @Override
  public Workspace workspace() {
    return workspace;
  }

  @Override
  public Optional<WorkspaceRef> workspaceRef() {
    return workspace.ref();
  }

  @Override
  public List<Message> messages() {
    return List.of();
  }

  @Override
  public Usage usage() {
    return Usage.NONE;
  }

  /** JSON string literal. */
  static String json(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    return out.append('"').toString();
  }
}
