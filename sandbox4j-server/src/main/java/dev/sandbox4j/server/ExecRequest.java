package dev.sandbox4j.server;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import java.util.Base64;
import java.util.List;
import java.util.Map;

/** The body of an exec: exactly one of argv and shell, plus options (see docs/server-api.md). */
record ExecRequest(
    List<String> argv,
    String shell,
    Map<String, String> env,
    Long timeoutMs,
    Long outputLimitBytes,
    JsonNode stdin,
    Boolean keepStdinOpen,
    Map<String, String> trace) {

  /** The W3C trace-context header names are short, and a tracestate at most 512 characters. */
  private static final int MAX_TRACE_FIELDS = 8;

  private static final int MAX_TRACE_VALUE = 512;

  /**
   * The trace context this request carries, for a propagator to read; empty if none. Bounded: a
   * client's map is never copied into a span as it is, only read by the propagator.
   */
  Map<String, String> traceContext() {
    if (trace == null) {
      return Map.of();
    }
    if (trace.size() > MAX_TRACE_FIELDS) {
      throw ApiException.invalid(
          "trace", "trace holds at most " + MAX_TRACE_FIELDS + " fields, had " + trace.size());
    }
    for (Map.Entry<String, String> e : trace.entrySet()) {
      if (e.getValue() == null || e.getValue().length() > MAX_TRACE_VALUE) {
        throw ApiException.invalid(
            "trace." + Sandboxes.printable(e.getKey()),
            "trace values are strings of at most " + MAX_TRACE_VALUE + " characters");
      }
    }
    return trace;
  }

  Command command() {
    if ((argv == null) == (shell == null)) {
      throw ApiException.invalid(
          argv == null ? "argv" : "shell", "give exactly one of argv and shell");
    }
    if (argv != null) {
      if (argv.isEmpty()) {
        throw ApiException.invalid("argv", "argv must name a program");
      }
      for (int i = 0; i < argv.size(); i++) {
        String a = argv.get(i);
        if (a == null || a.indexOf('\0') >= 0) {
          throw ApiException.invalid("argv[" + i + "]", "argv entries must be strings without NUL");
        }
      }
      return Command.argv(argv);
    }
    if (shell.indexOf('\0') >= 0) {
      throw ApiException.invalid("shell", "shell must not contain NUL");
    }
    return Command.shell(shell);
  }

  /** The options, without stdin and output listeners. */
  RunOptions.Builder options() {
    RunOptions.Builder b = RunOptions.builder().retainOutput(false);
    if (timeoutMs == null) {
      b.noTimeout();
    } else if (timeoutMs <= 0) {
      throw ApiException.invalid("timeoutMs", "timeoutMs must be positive, was " + timeoutMs);
    } else {
      b.timeout(java.time.Duration.ofMillis(timeoutMs));
    }
    if (outputLimitBytes != null) {
      if (outputLimitBytes <= 0) {
        throw ApiException.invalid(
            "outputLimitBytes", "outputLimitBytes must be positive, was " + outputLimitBytes);
      }
      b.outputLimit(outputLimitBytes);
    }
    if (env != null) {
      env.forEach(
          (k, v) -> {
            try {
              b.env(k, v);
            } catch (IllegalArgumentException | NullPointerException e) {
              throw ApiException.invalid("env", "env: " + e.getMessage());
            }
          });
    }
    return b;
  }

  /**
   * Whether a background command's stdin stays open for its stdin route; an error on the exec
   * routes, which stream stdin themselves (WebSocket) or end it with the body (POST).
   */
  boolean keepsStdinOpen(boolean background) {
    if (keepStdinOpen == null || !keepStdinOpen) {
      return false;
    }
    if (!background) {
      throw ApiException.invalid(
          "keepStdinOpen",
          "keepStdinOpen is for background commands (POST /v1/sandboxes/{id}/commands), written"
              + " to through their stdin route; an exec takes stdin in its body (POST) or in stdin"
              + " frames (WebSocket)");
    }
    return true;
  }

  /** The POST form's stdin: base64 bytes, or null for stdin at EOF. */
  byte[] stdinBytes() {
    if (stdin == null || stdin.isNull() || (stdin.isBoolean() && !stdin.booleanValue())) {
      return null;
    }
    if (!stdin.isTextual()) {
      throw ApiException.invalid("stdin", "stdin must be a base64 string");
    }
    try {
      return Base64.getDecoder().decode(stdin.textValue());
    } catch (IllegalArgumentException e) {
      throw ApiException.invalid("stdin", "stdin is not valid base64: " + e.getMessage());
    }
  }

  /**
   * The WebSocket form: whether stdin comes in frames ({@code "stdin": false} says it does not).
   */
  boolean streamsStdin() {
    if (stdin == null || stdin.isNull()) {
      return true;
    }
    if (!stdin.isBoolean()) {
      throw ApiException.invalid(
          "stdin",
          "over a WebSocket, stdin is sent in stdin frames; the request may only say false");
    }
    return stdin.booleanValue();
  }
}
