package dev.sandbox4j.server;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/** The execs running now, so that stopping the server ends them (and their trees) first. */
final class ActiveExecs {

  private final Set<ExecRun> runs = ConcurrentHashMap.newKeySet();

  void add(ExecRun run) {
    runs.add(run);
  }

  void remove(ExecRun run) {
    runs.remove(run);
  }

  void cancelAll() {
    runs.forEach(ExecRun::cancel);
  }
}
