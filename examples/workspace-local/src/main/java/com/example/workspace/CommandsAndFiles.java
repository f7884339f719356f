package com.example.workspace;

import dev.sandbox4j.workspace.BackgroundCommand;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceProvider;
import dev.sandbox4j.workspace.WorkspaceRef;
import java.time.Duration;

/**
 * The user guide's tour of one workspace (refs, commands, background commands, files), run against
 * any provider: a ref, commands with and without a shell, a server in the background, files.
 */
final class CommandsAndFiles {
  private CommandsAndFiles() {}

  /** What the tour saw, one line per section, for {@code MainTest} to check. */
  static String run(WorkspaceProvider provider) throws InterruptedException {
    // [refs]
    Workspace ws = Workspace.of(provider.newBackend()); // lazy: nothing created yet
    WorkspaceRef ref = ws.open(); // created now; or on the first operation
    Workspace again = Workspace.of(provider.backend(ref).orElseThrow());
    // [/refs]
    try {
      return commands(ws) + "\n" + background(ws) + "\n" + interactive(ws) + "\n" + files(again);
    } finally {
      provider.destroy(ref);
    }
  }

  private static String commands(Workspace ws) {
    // [commands]
    ws.run(Command.argv("ls", "-la", "*.txt")); // no shell: '*.txt' is literal
    ws.run(Command.shell("ls -la *.txt | wc -l")); // /bin/sh -c: POSIX sh (dash), not bash
    ws.run(Command.bash("set -o pipefail; make | tee log")); // bash -c: scripts for bash
    CommandResult answer =
        ws.run(
            Command.argv("python3", "-"),
            RunOptions.builder()
                .stdin("print(6 * 7)\n".getBytes()) // stdin is at EOF unless given
                .env("PYTHONUNBUFFERED", "1") // over the workspace's env
                .timeout(Duration.ofSeconds(30)) // none by default
                .onStdout(chunk -> System.out.write(chunk, 0, chunk.length))
                .build());
    // [/commands]
    return "python3 - printed " + answer.stdoutText().strip();
  }

  private static String background(Workspace ws) throws InterruptedException {
    // [background-commands]
    BackgroundCommand server =
        ws.start(Command.shell("python3 -m http.server 8000"), RunOptions.defaults());
    BackgroundCommand.Output out = server.takeOutput(); // what arrived since the last take
    server.isRunning(); // exitCode() once it ended (137: killed)
    server.stop(Duration.ofSeconds(5)); // SIGTERM to its group, then kill all
    // [/background-commands]
    return "server stopped: " + !server.isRunning() + " " + (out.droppedBytes() == 0);
  }

  private static String interactive(Workspace ws) throws InterruptedException {
    // [interactive]
    BackgroundCommand repl =
        ws.start(
            Command.shell("while read l; do echo \"got $l\"; done; echo eof"),
            RunOptions.builder().keepStdinOpen(true).build());
    repl.writeStdin("one\n"); // reaches the command at once; its answer comes as output
    String answer = repl.takeOutput().stdoutText(); // "got one\n" once it has answered
    repl.writeStdin("two\n");
    repl.closeStdin(); // EOF after everything written: it prints eof and exits 0
    // [/interactive]
    repl.await(Duration.ofSeconds(60));
    String rest = repl.takeOutput().stdoutText();
    return "repl said: " + (answer + rest).replace('\n', ' ').strip() + " " + repl.exitCode();
  }

  private static String files(Workspace ws) {
    byte[] bytes = {0, 1, 2, (byte) 0xff};
    // [files]
    ws.writeText("src/app.py", "print('hi')\n"); // creates src/, replaces the file atomically
    String text = ws.readText("src/app.py");
    ws.writeBytes("data.bin", bytes); // binary-safe; streams: write(path, in), openRead
    ws.list("src"); // sorted; symlinks listed, not followed
    ws.stat("src/app.py"); // type, size, permissions, modified
    ws.createDirectories("a/b/c");
    ws.rename("a", "b");
    ws.remove("b", true); // recursive on request, never through symlinks
    // [/files]
    return text.strip()
        + " "
        + ws.readBytes("data.bin").length
        + " "
        + ws.list("src").size()
        + " "
        + ws.exists("b");
  }
}
