package dev.sandbox4j.server;

import java.util.HashSet;
import java.util.Set;

/**
 * The execs running now, so that stopping the server ends them (and their trees) first. Once {@link
 * #cancelAll} ran, an exec added later is cancelled at once: a request that slipped in while the
 * server stops must not leave a command running behind it.
 */
final class ActiveExecs {

  private final Set<ExecRun> runs = new HashSet<>(); // guarded by this
  private boolean closed; // guarded by this

  synchronized void add(ExecRun run) {
    if (closed) {
      run.cancel();
    } else {
      runs.add(run);
    }
  }

  synchronized void remove(ExecRun run) {
    runs.remove(run);
  }

  synchronized void cancelAll() {
    closed = true;
    runs.forEach(ExecRun::cancel);
    runs.clear();
  }
}
