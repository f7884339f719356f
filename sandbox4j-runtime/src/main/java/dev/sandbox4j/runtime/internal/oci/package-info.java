/**
 * Not API: may change in any release. The OCI runtime driver: crun (or runc, runsc) through its CLI
 * (OciRuntime), the container spec (OciConfig) with the seccomp profile (SeccompProfile), CRIU for
 * checkpoints (Criu, CriuUserns), the fixed builds setup makes from Debian sources (FixedCrun,
 * DebianSource), and gVisor's runsc, which setup takes from Debian's binary package (Gvisor).
 *
 * <p>Non-goals: the life of a sandbox (create, fork, hibernate are the engine's); networking.
 */
package dev.sandbox4j.runtime.internal.oci;
