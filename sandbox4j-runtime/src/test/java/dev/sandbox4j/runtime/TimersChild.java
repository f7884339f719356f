package dev.sandbox4j.runtime;

import dev.sandbox4j.workspace.Workspace;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;

/**
 * The managing JVM that {@link TimersTest} kills: creates one sandbox per timer in home {@code
 * args[0]}, prints {@code REF <timer> local:<id>} for each and {@code DONE}, then waits to be
 * killed.
 */
public final class TimersChild {
  private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

  private TimersChild() {}

  public static void main(String[] args) throws InterruptedException {
    Path home = Path.of(args[0]);
    create(home, "lifetime", b -> b.sandboxTimeout(Duration.ofSeconds(40)));
    create(home, "idle", b -> b.idleTimeout(Duration.ofSeconds(8)));
    create(home, "suspend", b -> b.autoSuspendTimeout(Duration.ofSeconds(8)));
    create(home, "delete", b -> b.deleteAfter(Instant.now().plusSeconds(30)));
    OUT.println("DONE");
    Thread.sleep(Long.MAX_VALUE);
  }

  private static void create(
      Path home, String timer, java.util.function.UnaryOperator<LocalSandbox.Builder> timers) {
    LocalSandbox provider =
        timers.apply(LocalSandbox.builder().home(home).progress(line -> {})).build();
    OUT.println("REF " + timer + " " + Workspace.of(provider.newBackend()).open());
  }
}
