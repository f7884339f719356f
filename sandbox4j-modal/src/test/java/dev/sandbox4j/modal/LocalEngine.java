package dev.sandbox4j.modal;

import dev.sandbox4j.workspace.conformance.Prerequisites;
import java.nio.file.Files;
import java.nio.file.Path;

/** The fake Modal runs commands in local sandboxes: root on Linux with crun. */
final class LocalEngine {
  private LocalEngine() {}

  /** Skips without the local engine, except under CI=true, where that fails. */
  static void require() {
    Prerequisites.require(System.getProperty("os.name").equals("Linux"), "Linux");
    Prerequisites.require("root".equals(System.getProperty("user.name")), "root");
    Prerequisites.require(
        Files.isExecutable(Path.of("/usr/local/libexec/sandbox4j/crun"))
            || Files.isExecutable(Path.of("/usr/bin/crun")),
        "crun (sandbox4j setup)");
  }
}
