package dev.sandbox4j.cli;

import dev.sandbox4j.workspace.WorkspaceException;
import dev.sandbox4j.workspace.WorkspaceOutputLimitException;
import dev.sandbox4j.workspace.WorkspaceTimeoutException;
import dev.sandbox4j.workspace.WorkspaceUnavailableException;
import java.io.PrintStream;
import java.util.concurrent.CancellationException;
import java.util.function.BooleanSupplier;
import picocli.CommandLine;
import picocli.CommandLine.IExecutionExceptionHandler;
import picocli.CommandLine.IParameterExceptionHandler;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.UnmatchedArgumentException;

/**
 * Turns every failure into one line on stderr, {@code sandbox4j: ...}, and its exit code from
 * {@link ExitCodes}; a stack trace only with {@code --debug}.
 */
final class FailureHandler implements IParameterExceptionHandler, IExecutionExceptionHandler {

  private final PrintStream err;
  private final BooleanSupplier debug;

  FailureHandler(PrintStream err, BooleanSupplier debug) {
    this.err = err;
    this.debug = debug;
  }

  @Override
  public int handleParseException(ParameterException e, String[] args) {
    CommandLine command = e.getCommandLine();
    // picocli says "option option '--env'" in one of its messages
    String message = lowerFirst(oneLine(e.getMessage())).replace("option option", "option");
    if (e instanceof UnmatchedArgumentException unmatched
        && command.getCommand() instanceof ExecCommand
        && unmatched.getUnmatched().stream().anyMatch(a -> a.startsWith("-"))) {
      message += "; put the command after '--'";
    }
    report(
        message + " (see '" + command.getCommandSpec().qualifiedName() + " --help')",
        e.getCause() == null ? e : e.getCause());
    return ExitCodes.USAGE;
  }

  @Override
  public int handleExecutionException(Exception e, CommandLine command, ParseResult parseResult) {
    return switch (e) {
      case WorkspaceTimeoutException t -> {
        report(
            t.getClass() == WorkspaceTimeoutException.class
                ? "command timed out after " + DurationConverter.describe(t.timeout())
                : oneLine(t.getMessage()), // the no-output limit says so
            e);
        yield ExitCodes.TIMEOUT;
      }
      case WorkspaceOutputLimitException o -> {
        report(
            oneLine(o.getMessage()) + " (raise it with --output-limit, or redirect to a file)", e);
        yield ExitCodes.OUTPUT_LIMIT;
      }
      case WorkspaceUnavailableException u -> {
        report(oneLine(u.getMessage()), e);
        yield ExitCodes.UNAVAILABLE;
      }
      case CancellationException c -> {
        report("interrupted; the command was killed", e);
        yield ExitCodes.INTERRUPTED;
      }
      case WorkspaceException w -> {
        report(oneLine(w.getMessage()), e);
        yield ExitCodes.FAILURE;
      }
      case dev.sandbox4j.agent.AgentException a -> {
        // the model provider failed, a limit was reached, or the agent cannot get a workspace
        report("the agent run failed: " + oneLine(a.getMessage()), e);
        yield ExitCodes.FAILURE;
      }
      // bad input found past parsing: a history file, or a value only a server can judge
      case IllegalArgumentException bad -> {
        report(oneLine(bad.getMessage()), e);
        yield ExitCodes.USAGE;
      }
      // a provider without the capability (hibernate of a docker sandbox): the request, not a bug
      case UnsupportedOperationException unsupported -> {
        report(oneLine(unsupported.getMessage()), e);
        yield ExitCodes.USAGE;
      }
      default -> {
        report(
            "internal error: "
                + oneLine(e.toString())
                + (debug.getAsBoolean() ? "" : " (rerun with --debug for the stack trace)"),
            e);
        yield ExitCodes.FAILURE;
      }
    };
  }

  private void report(String message, Throwable cause) {
    err.println("sandbox4j: " + message);
    if (debug.getAsBoolean()) {
      cause.printStackTrace(err);
    }
    err.flush();
  }

  private static String oneLine(String message) {
    return message == null ? "" : message.strip().replaceAll("\\s*\\R\\s*", "; ");
  }

  /** "Missing required parameter" → "missing required parameter"; "URL ..." stays. */
  private static String lowerFirst(String message) {
    if (message.length() > 1
        && Character.isUpperCase(message.charAt(0))
        && Character.isLowerCase(message.charAt(1))) {
      return Character.toLowerCase(message.charAt(0)) + message.substring(1);
    }
    return message;
  }
}
