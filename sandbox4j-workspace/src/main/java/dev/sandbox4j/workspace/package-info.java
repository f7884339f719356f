/**
 * The workspace API: one environment an agent's tools act on, behind commands and files.
 *
 * <p>A {@link dev.sandbox4j.workspace.Workspace} wraps a {@link
 * dev.sandbox4j.workspace.WorkspaceBackend}: a tiny required core (its {@link
 * dev.sandbox4j.workspace.WorkspaceRef ref} and working directory) plus optional capabilities
 * ({@link dev.sandbox4j.workspace.SupportsCommands}, {@link
 * dev.sandbox4j.workspace.SupportsFileSystem}, {@link dev.sandbox4j.workspace.SupportsRealpath}). A
 * backend with commands but no file system gets one built from commands. Managing the machines a
 * provider's workspaces live on (list, suspend, stop, hibernate, fork, snapshot) is a set of
 * optional capabilities of the provider, in {@link dev.sandbox4j.workspace.machine}.
 *
 * <h2>The contract every backend keeps</h2>
 *
 * <p>The conformance suite (the {@code sandbox4j-workspace} test-jar) has a test per rule and
 * quotes the rule in its failure messages.
 *
 * <ol>
 *   <li><b>Refs.</b> A {@code WorkspaceRef(provider, id)} names a workspace; it never holds
 *       credentials and round-trips through JSON and a {@code provider:id} string.
 *   <li><b>Lazy creation.</b> Building a backend does no I/O; the first operation creates or
 *       attaches. The ref is known as soon as creation returns; concurrent first use creates
 *       exactly one workspace.
 *   <li><b>Gone is gone.</b> Attaching to a ref whose workspace is gone raises {@link
 *       dev.sandbox4j.workspace.WorkspaceUnavailableException}; it never creates an empty
 *       replacement. Nothing in Sandbox4j destroys a workspace on its own; {@code destroy(ref)} is
 *       explicit and idempotent. A command running when its workspace is destroyed fails with
 *       unavailable.
 *   <li><b>Commands.</b> An argv list or an explicit shell string ({@code /bin/sh -c}). stdin is at
 *       EOF unless given; a stdin source reaches the command as it yields bytes, so a background
 *       command can be written to while it runs. A missing program exits 127, a non-executable one
 *       126. A non-zero exit is a result, not an error. Output is bytes; text views decode invalid
 *       UTF-8 as U+FFFD. Output is never silently truncated.
 *   <li><b>Deadlines.</b> A timeout's clock starts after the workspace is acquired. On timeout or
 *       cancellation every process the command started is killed (also those that called {@code
 *       setsid} or daemonized), the workspace stays up, and a timeout carries the partial
 *       stdout/stderr.
 *   <li><b>Output limit.</b> Combined output over the limit (default 10 MiB) kills the command and
 *       raises {@link dev.sandbox4j.workspace.WorkspaceOutputLimitException}, keeping the first 64
 *       KiB of each stream.
 *   <li><b>Background children.</b> A background child that keeps the output pipe open does not
 *       block the command's return (output still arriving is collected for a grace of 2 s after the
 *       command exits).
 *   <li><b>Files.</b> Paths are POSIX strings inside the workspace, relative ones resolved against
 *       the working directory. Write creates parent directories, replaces the file atomically and
 *       writes through symlinks to their target; reading a FIFO or device fails at once instead of
 *       waiting; listing does not follow symlinks, so loops are harmless; {@code remove} refuses
 *       the working directory and its ancestors; permission checks are those of the workspace user.
 *   <li><b>Typed file errors.</b> Each failure has its own exception, mirroring {@code
 *       java.nio.file}: {@link dev.sandbox4j.workspace.WorkspaceNoSuchFileException} ({@code
 *       NoSuchFileException}), {@link dev.sandbox4j.workspace.WorkspaceIsDirectoryException},
 *       {@link dev.sandbox4j.workspace.WorkspaceNotDirectoryException} ({@code
 *       NotDirectoryException}), {@link
 *       dev.sandbox4j.workspace.WorkspaceFileAlreadyExistsException} ({@code
 *       FileAlreadyExistsException}), {@link
 *       dev.sandbox4j.workspace.WorkspaceAccessDeniedException} ({@code AccessDeniedException}),
 *       {@link dev.sandbox4j.workspace.WorkspaceDirectoryNotEmptyException} ({@code
 *       DirectoryNotEmptyException}); all extend {@link
 *       dev.sandbox4j.workspace.WorkspaceFileException} and are unchecked.
 *   <li><b>Isolation</b> (isolating backends). No path, {@code ..} or symlink ever reaches a host
 *       file outside the workspace, and nothing from the host environment reaches it: commands get
 *       the workspace's own env, the configured env, and the per-command env on top.
 * </ol>
 *
 * <p>Exceptions say what the caller should do next: unavailable means the workspace is gone (don't
 * retry); a timeout carries partial output and the deadline was enforced; read-only means tell the
 * model it may not write.
 *
 * <p>Non-goals: this package isolates nothing by itself. {@link
 * dev.sandbox4j.workspace.host.HostWorkspaceProvider host workspaces} run on the host with the JVM
 * user's rights, and {@link dev.sandbox4j.workspace.Workspace#readOnly()} is a policy, not
 * isolation.
 */
package dev.sandbox4j.workspace;
