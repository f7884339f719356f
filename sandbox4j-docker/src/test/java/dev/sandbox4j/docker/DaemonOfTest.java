package dev.sandbox4j.docker;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/**
 * {@code Builder.daemonOf}: providers made per request shape (a server's) share one connection to
 * the daemon, so none is left open per provider (a server on docker kept one per create and fork).
 */
class DaemonOfTest {

  @Test
  void providersBuiltWithDaemonOfUseThatProvidersConnection() {
    DockerPrerequisites.requireDaemon();
    DockerSandbox base = new DockerSandbox();
    DockerSandbox shaped = DockerSandbox.builder().daemonOf(base).cpus(2).label("k", "v").build();
    DockerSandbox again = DockerSandbox.builder().daemonOf(shaped).build();
    assertThat(shaped.daemon()).isSameAs(base.daemon());
    assertThat(again.daemon()).isSameAs(base.daemon());
    assertThat(new DockerSandbox().daemon()).isNotSameAs(base.daemon());
  }

  @Test
  void daemonOfAndHostAreRefusedTogether() {
    assertThatThrownBy(
            () ->
                DockerSandbox.builder()
                    .host("unix:///var/run/docker.sock")
                    .daemonOf(new DockerSandbox())
                    .build())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("daemonOf and host");
  }
}
