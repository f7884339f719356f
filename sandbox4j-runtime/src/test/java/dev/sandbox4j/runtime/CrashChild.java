package dev.sandbox4j.runtime;

import dev.sandbox4j.runtime.internal.engine.Checkpoints;
import dev.sandbox4j.runtime.internal.engine.SandboxRecord;
import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.CommandResult;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import dev.sandbox4j.workspace.WorkspaceRef;
import dev.sandbox4j.workspace.machine.ForkResult;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The JVM that {@link CrashSafetyTest} kills: it drives one phase of a sandbox's life and reports
 * on stdout, a line at a time and flushed at once, so the parent knows what it was doing when it
 * died.
 *
 * <p>Arguments: {@code HOME TAG MODE [ARGS...]}. Every sandbox it creates carries the label {@value
 * #LABEL}{@code =TAG}, so the test can tell its sandboxes from anyone else's. Modes:
 *
 * <ul>
 *   <li>{@code create [PATH TEXT]}: creates a sandbox, prints {@code REF local:<id>}; with PATH and
 *       TEXT also writes that file into it and prints {@code WROTE}; then exits normally.
 *   <li>{@code exec REF}: attaches and runs a long command (a file rewritten in a loop); prints
 *       {@code STARTED} when the command has begun.
 *   <li>{@code destroy REF...}: destroys each sandbox, printing {@code DESTROYED REF} after each.
 *   <li>{@code loop}: create, exec, write a file, destroy, over and over; prints each ref before it
 *       uses it.
 *   <li>{@code lifecycle REF NAME}: suspend, exec, stop, start, fork (live where checkpoint/restore
 *       works; then destroys the fork), snapshot as NAME, hibernate (where checkpoint/restore
 *       works), over and over; prints {@code FORK REF} for each fork it made.
 * </ul>
 *
 * <p>{@code READY} is printed right before the phase starts (after the JVM has started and warmed
 * up), and {@code DONE} when a phase is over ({@code DONE n} after a loop's n-th iteration), so the
 * parent can measure a phase and time its kill within it. Before READY it prints {@code WARM} and
 * waits for a line on stdin: the parent starts many children at once (a JVM's start is most of a
 * child's time) and lets each go when it times that one's kill.
 */
public final class CrashChild {
  /** The label key marking sandboxes made by the crash test. */
  static final String LABEL = "sandbox4j.test";

  private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

  private CrashChild() {}

  public static void main(String[] args) {
    Path home = Path.of(args[0]);
    String tag = args[1];
    String mode = args[2];
    LocalSandbox provider = provider(home, tag);
    warmUp(provider);
    switch (mode) {
      case "create" ->
          create(provider, args.length > 4 ? args[3] : null, args.length > 4 ? args[4] : null);
      case "exec" -> exec(provider, WorkspaceRef.parse(args[3]));
      case "destroy" -> {
        ready();
        for (int i = 3; i < args.length; i++) {
          provider.destroy(WorkspaceRef.parse(args[i]));
          say("DESTROYED " + args[i]);
        }
        say("DONE");
      }
      case "loop" -> loop(provider);
      case "lifecycle" -> lifecycle(provider, WorkspaceRef.parse(args[3]), args[4]);
      default -> throw new IllegalArgumentException("unknown mode " + mode);
    }
  }

  /** The provider of the test's sandboxes: the given home, every sandbox labelled with the tag. */
  static LocalSandbox provider(Path home, String tag) {
    return LocalSandbox.builder().home(home).label(LABEL, tag).progress(line -> {}).build();
  }

  /**
   * Loads and runs once what the phase will use (the engine, JSON, process spawning), so that the
   * phase after READY takes as long as in a JVM that has been running for a while, and a kill delay
   * measured from READY lands inside the phase.
   */
  private static void warmUp(LocalSandbox provider) {
    provider.list();
    try {
      Path temp = Files.createTempFile("crash-child", ".json");
      try {
        SandboxRecord record =
            new SandboxRecord(
                SandboxRecord.FORMAT_VERSION,
                "warmup",
                SandboxRecord.Status.CREATING,
                "default",
                Instant.now().toString(),
                Map.of(),
                1,
                1L << 30,
                16,
                List.of());
        record.write(temp);
        SandboxRecord.read(temp);
      } finally {
        Files.deleteIfExists(temp);
      }
      new ProcessBuilder("true").start().waitFor();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Says WARM, waits for the parent's go (a line on stdin, or its end), then says READY. */
  private static void ready() {
    say("WARM");
    try {
      System.in.read();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    say("READY");
  }

  private static void say(String line) {
    OUT.println(line);
    OUT.flush();
  }

  private static void create(LocalSandbox provider, String path, String text) {
    ready();
    Workspace ws = Workspace.of(provider.newBackend());
    WorkspaceRef ref = ws.open();
    say("REF " + ref);
    if (path != null) {
      ws.writeText(path, text);
      say("WROTE");
    }
    say("DONE");
  }

  private static void exec(LocalSandbox provider, WorkspaceRef ref) {
    Workspace ws = Workspace.of(provider.backend(ref).orElseThrow());
    ready();
    AtomicBoolean started = new AtomicBoolean();
    CommandResult r =
        ws.run(
            Command.shell(
                "echo started; i=0; while [ $i -lt 2000000 ]; do echo $i > crash-exec.txt;"
                    + " i=$((i+1)); done"),
            RunOptions.builder()
                .timeout(Duration.ofMinutes(5))
                .onStdout(
                    bytes -> {
                      if (!started.getAndSet(true)) {
                        say("STARTED");
                      }
                    })
                .build());
    say("EXITED " + r.exitCode());
  }

  private static void loop(LocalSandbox provider) {
    ready();
    for (int i = 0; i < 1000; i++) {
      Workspace ws = Workspace.of(provider.newBackend());
      WorkspaceRef ref = ws.open();
      say("REF " + ref);
      ws.run(Command.shell("for i in 1 2 3 4 5 6 7 8 9 10; do echo $i >> loop.txt; done"));
      ws.writeText("loop-" + i + ".txt", "iteration " + i);
      if (!ws.readText("loop-" + i + ".txt").equals("iteration " + i)) {
        throw new AssertionError("read back something else in " + ref);
      }
      provider.destroy(ref);
      say("DESTROYED " + ref);
      say("DONE " + (i + 1));
    }
  }

  private static void lifecycle(LocalSandbox provider, WorkspaceRef ref, String snapshot) {
    Workspace ws = Workspace.of(provider.backend(ref).orElseThrow());
    boolean hibernate = Checkpoints.unavailable(provider.engine().runtime()).isEmpty();
    ready();
    for (int i = 0; i < 1000; i++) {
      provider.suspend(ref);
      ws.run(Command.shell("echo " + i + " >> lifecycle.txt"));
      provider.stop(ref);
      provider.start(ref);
      ForkResult fork = provider.fork(ref);
      say("FORK " + fork.ref());
      provider.destroy(fork.ref());
      provider.snapshot(ref, snapshot);
      if (hibernate) {
        provider.hibernate(ref); // the next exec restores it
      }
      say("DONE " + (i + 1));
    }
  }
}
