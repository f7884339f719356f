/**
 * The {@code docker} provider: {@link dev.sandbox4j.docker.DockerSandbox}, sandboxes in containers
 * of a Docker daemon (or Podman's Docker-compatible one), behind the same workspace contract as the
 * local engine.
 *
 * <p>Its job: find the daemon as the docker CLI does, create and attach to containers, run commands
 * as execs (stdin streamed and ended, output limited, every process of a command killed on timeout
 * or cancellation), and suspend/stop them. Files go through commands. Not its job: isolating more
 * than the daemon does (that is the daemon's runtime and its seccomp profile), or building images
 * other than importing the engine's default image.
 */
package dev.sandbox4j.docker;
