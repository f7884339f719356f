/**
 * Managing the machines a provider's workspaces live on: optional capabilities of a {@link
 * dev.sandbox4j.workspace.WorkspaceProvider}, as {@link dev.sandbox4j.workspace.SupportsCommands}
 * and {@link dev.sandbox4j.workspace.SupportsFileSystem} are capabilities of a backend, with one
 * set of values every provider reports in.
 *
 * <p>A provider implements the capabilities it can honour and no other; callers check with {@code
 * instanceof}:
 *
 * {@snippet :
 * if (provider instanceof SupportsFork forks) {
 *   ForkResult copy = forks.fork(ref);
 * }
 * }
 *
 * <p>The capabilities: {@link dev.sandbox4j.workspace.machine.SupportsListing} (list, info), {@link
 * dev.sandbox4j.workspace.machine.SupportsSuspend} (freeze, keeping memory), {@link
 * dev.sandbox4j.workspace.machine.SupportsStop} (end the processes, keeping the files), {@link
 * dev.sandbox4j.workspace.machine.SupportsHibernate} (save the processes to disk), {@link
 * dev.sandbox4j.workspace.machine.SupportsFork}, {@link
 * dev.sandbox4j.workspace.machine.SupportsSnapshots}, {@link
 * dev.sandbox4j.workspace.machine.SupportsTimers} (read the timers a machine was created with),
 * {@link dev.sandbox4j.workspace.machine.SupportsEgress} (read and replace where a machine may
 * connect to) and {@link dev.sandbox4j.workspace.machine.SupportsPorts} (URLs and TCP forwards to a
 * machine's ports).
 *
 * <h2>The contract every provider keeps for the capabilities it declares</h2>
 *
 * <p>The conformance suite (the {@code sandbox4j-workspace} test-jar) has a section per capability
 * that runs where the provider declares it, and quotes these rules in its failure messages.
 *
 * <ol>
 *   <li><b>Refs.</b> Every operation takes a ref of this provider; another provider's ref is an
 *       {@link java.lang.IllegalArgumentException}. A ref whose workspace is gone raises {@link
 *       dev.sandbox4j.workspace.WorkspaceUnavailableException}, except where a method says it
 *       answers instead ({@code info} is empty).
 *   <li><b>States.</b> A machine is {@code running}, {@code suspended} (every process frozen,
 *       memory kept), {@code stopped} (processes ended, files kept) or {@code hibernated}
 *       (processes saved to disk and ended, files kept), or in a transient state the provider
 *       names. {@link dev.sandbox4j.workspace.machine.SandboxInfo#state()} says which.
 *   <li><b>Any use wakes.</b> Every workspace operation (a command, a file) on a suspended, stopped
 *       or hibernated machine wakes it first; its files are always kept. Suspend, resume, stop,
 *       start and hibernate are idempotent; a stopped machine stays stopped when suspended or
 *       hibernated.
 *   <li><b>Forks.</b> A fork is a new machine with a copy of the files, independent afterwards. It
 *       may copy the running processes too: the result says whether, and why not, never silently.
 *       {@code forkFiles} never copies processes.
 *   <li><b>Snapshots.</b> A snapshot saves a machine's files under a name new machines can start
 *       from; saving under a name in use replaces that snapshot, and machines made from it keep
 *       theirs.
 *   <li><b>Timers.</b> A machine's timers are those it was created with; reading them changes
 *       nothing, and a machine's timers agree with what {@code info} says of it.
 *   <li><b>Egress.</b> Rules read back as they were set (rules normalized by the provider aside); a
 *       rule the provider refuses is an {@link java.lang.IllegalArgumentException} that leaves the
 *       rules as they were.
 *   <li><b>Ports.</b> A port is from 1 to 65535, anything else an {@link
 *       java.lang.IllegalArgumentException}; a port's URL and forward are stable for a machine.
 *   <li><b>Values.</b> The records are values, the same for every provider; a fact a provider does
 *       not know is null, empty or 0, as each component says.
 * </ol>
 *
 * <p>Non-goals: creating a machine is not a capability (a provider's {@code newBackend()} does it,
 * shaped by the provider's own builder), nor is changing timers after creation; and features only
 * one engine has (the local engine's named networks, images and interactive shell) stay methods of
 * that provider until a second one can honour them.
 */
package dev.sandbox4j.workspace.machine;
