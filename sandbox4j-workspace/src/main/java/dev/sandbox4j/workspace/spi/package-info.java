/**
 * Building blocks for backend authors: not needed to use a workspace.
 *
 * <p>{@link dev.sandbox4j.workspace.spi.ProcessCommands} drives a local {@link Process} (a host
 * command, {@code crun exec}, {@code docker exec}, ...) to completion under the contract's rules —
 * deadline, cancellation, output limit, 2 s drain grace, stdin — and leaves to the backend only how
 * to kill every process the command started.
 */
package dev.sandbox4j.workspace.spi;
