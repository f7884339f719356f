/**
 * Not API: may change in any release. Small tools every other package uses: files created private
 * (PrivateFiles, SecretFiles), replaced atomically (AtomicFiles), locked across processes
 * (FileLock); host commands run and streamed (HostCommand); the facts of a state directory's layout
 * (SandboxHome); the no-output watchdog of a command; a watch on the jars a process runs from
 * (CodeWatch).
 *
 * <p>Non-goals: knowing about sandboxes, containers or the kernel beyond plain files and processes.
 */
package dev.sandbox4j.runtime.internal.util;
