package dev.sandbox4j.cli;

import dev.sandbox4j.server.SandboxServer;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;

/** {@code sandbox4j serve}: the local engine as a multi-tenant HTTP service. */
@Command(
    name = "serve",
    mixinStandardHelpOptions = true,
    description = {
      "Serves this machine's sandboxes over HTTP (the API of docs/server-api.md, also at"
          + " /v1/openapi.json) until interrupted. Every /v1 request needs an API key: create one"
          + " with 'sandbox4j keys create --org NAME'.",
      "One JSON line per request goes to stderr; Prometheus metrics are at /metrics. Sandboxes"
          + " keep running when the server stops; a new server on the same --data sees them.",
      "MCP clients reach the Coder tools at /mcp (streamable HTTP, same keys): each session in"
          + " /mcp?sandbox=ID, or in a sandbox created on its first tool call."
    })
final class ServeCommand implements Callable<Integer> {

  @ParentCommand SandboxCommand root;

  @Option(
      names = "--bind",
      paramLabel = "ADDRESS",
      description = "The address to listen on. Default: ${DEFAULT-VALUE} (this machine only).",
      defaultValue = "127.0.0.1")
  String bind;

  @Option(
      names = "--port",
      paramLabel = "PORT",
      description = "The port; 0 picks a free one. Default: ${DEFAULT-VALUE}.",
      defaultValue = "7070")
  int port;

  @Option(
      names = "--data",
      paramLabel = "DIR",
      description = "The server's database directory. Default: $SANDBOX4J_HOME/server.")
  Path data;

  @Override
  public Integer call() {
    CountDownLatch stopped = new CountDownLatch(1);
    SandboxServer server =
        SandboxServer.builder()
            .engine(root.providers().local())
            .dataDirectory(data != null ? data : KeysCommand.dataDirectory(root))
            .bind(bind, port)
            .requestLog(
                line -> {
                  root.context().err().println(line);
                  root.context().err().flush();
                })
            .build();
    Thread hook =
        new Thread(
            () -> {
              server.close();
              stopped.countDown();
            },
            "sandbox4j-serve-stop");
    Runtime.getRuntime().addShutdownHook(hook);
    try {
      server.start();
      root.context().err().println("sandbox4j: serving on " + server.uri());
      root.context().err().flush();
      stopped.await();
    } catch (InterruptedException e) {
      // Ctrl-C or SIGTERM: the CLI interrupts its main thread, and stopping is how serve ends.
      // The flag stays clear: closing must still kill the commands the server started.
    } finally {
      server.close();
      try {
        Runtime.getRuntime().removeShutdownHook(hook);
      } catch (IllegalStateException e) {
        // the JVM is shutting down: the hook is running or ran
      }
    }
    return ExitCodes.OK;
  }
}
