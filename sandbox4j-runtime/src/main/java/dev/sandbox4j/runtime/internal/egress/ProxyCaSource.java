package dev.sandbox4j.runtime.internal.egress;

import java.io.IOException;
import java.nio.file.Path;

/** Lazily loads the CA: a proxy whose sandboxes never opt in never creates one. */
final class ProxyCaSource {
  private final Path dir;
  private ProxyCa ca;

  ProxyCaSource(Path dir) {
    this.dir = dir;
  }

  synchronized ProxyCa get() throws IOException {
    if (dir == null) {
      throw new IOException("this egress proxy has no CA directory");
    }
    if (ca == null) {
      ca = ProxyCa.loadOrCreate(dir);
    }
    return ca;
  }
}
