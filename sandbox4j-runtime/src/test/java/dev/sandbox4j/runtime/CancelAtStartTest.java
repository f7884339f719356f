package dev.sandbox4j.runtime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sandbox4j.workspace.Command;
import dev.sandbox4j.workspace.RunOptions;
import dev.sandbox4j.workspace.Workspace;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A command cancelled while it is still starting (crun exec not yet done) is killed too: it must
 * not start afterwards and run on. A server cancels that early when a client's stdin source fails
 * at once.
 */
class CancelAtStartTest {

  @BeforeAll
  static void requireEngine() {
    Prerequisites.requireLocalEngine();
  }

  @Test
  void aCommandInterruptedWhileStartingNeverRuns() throws Exception {
    LocalSandbox sandboxes = new LocalSandbox();
    Workspace ws = Workspace.of(sandboxes.newBackend());
    ws.open();
    try {
      List<Throwable> outcomes = new ArrayList<>();
      // interrupts spread over the first milliseconds of the run, when crun exec is starting
      for (int i = 0; i < 12; i++) {
        String marker = "ran-" + i;
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        Thread caller =
            Thread.ofPlatform()
                .start(
                    () -> {
                      try {
                        ws.run(
                            Command.shell("sleep 1; touch " + marker),
                            RunOptions.withTimeout(Duration.ofSeconds(30)));
                      } catch (Throwable t) {
                        thrown.set(t);
                      }
                    });
        Thread.sleep(i * 2L);
        caller.interrupt();
        caller.join(Duration.ofSeconds(30));
        assertThat(caller.isAlive()).as("the interrupted run returns").isFalse();
        outcomes.add(thrown.get());
      }
      assertThat(outcomes).allSatisfy(t -> assertThat(t).isInstanceOf(CancellationException.class));
      Thread.sleep(2000); // longer than the commands' sleep: one that survived has run by now
      assertThat(ws.run(Command.shell("ls ran-* 2>/dev/null; true")).stdoutText())
          .as("no cancelled command ran on")
          .isEmpty();
    } finally {
      ws.ref().ifPresent(sandboxes::destroy);
    }
  }
}
