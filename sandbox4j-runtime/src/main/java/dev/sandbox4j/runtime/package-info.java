/**
 * The embedded engine: isolated Linux sandboxes on this machine, provider {@code local}.
 *
 * <p>{@link dev.sandbox4j.runtime.LocalSandbox} is the entry point: {@code new LocalSandbox()} is a
 * {@link dev.sandbox4j.workspace.WorkspaceProvider} whose workspaces are sandboxes. Each sandbox is
 * an OCI container run by {@code crun}: its own root filesystem (the read-only image plus a private
 * overlayfs upper layer), its own PID, mount, network (one way out, filtered on the host by its
 * {@link dev.sandbox4j.runtime.EgressPolicy}), UTS and IPC namespaces, a user namespace (its ids a
 * block of 65536 host ids of its own, root inside no host user's), cgroup limits on memory, CPU and
 * processes, Docker's default capability set, a seccomp filter, and {@code catatonit} as PID 1.
 * Commands run as the user {@code sandbox} (uid 1000, passwordless sudo that is root only inside)
 * in Sandbox4j's own images, as the image config's {@code User} in an imported or pulled one (see
 * {@link dev.sandbox4j.runtime.LocalSandbox.Builder#image}), each in its own cgroup so that a
 * timeout kills every process it started.
 *
 * <p>State lives on disk under {@code $SANDBOX4J_HOME} (default {@code /var/lib/sandbox4j}), so
 * sandboxes outlive the JVM that made them and any JVM on the machine can attach by ref. The engine
 * needs root and a prepared host: {@code sandbox4j doctor} says what is missing, {@code sandbox4j
 * setup} fixes it.
 */
package dev.sandbox4j.runtime;
