package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;
import java.net.URI;
import java.util.Optional;

/**
 * A provider that serves its machines' ports to the caller's host: an HTTP URL per port, guarded by
 * a token where the machine has one, and raw TCP forwards. See {@link
 * dev.sandbox4j.workspace.machine}.
 *
 * <p>A request or connection wakes a suspended, stopped or hibernated machine, like any operation.
 */
public interface SupportsPorts {

  /**
   * The URL that serves port {@code port} of {@code ref}'s machine (HTTP; the provider's own docs
   * say which upgrades pass). Nothing listening on the port is an answer of the URL (such as 502),
   * not an error here.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider, or {@code port} is not
   *     from 1 to 65535
   */
  URI url(WorkspaceRef ref, int port);

  /**
   * The token the machine's port URLs need, if it has one; without it a request gets 401 and
   * reaches nothing in the machine.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  Optional<String> portToken(WorkspaceRef ref);

  /**
   * Forwards a port on 127.0.0.1 of the caller's host to port {@code port} of {@code ref}'s
   * machine, raw TCP, and returns the host port; asking again for the same machine port returns the
   * same host port. There is no token: any local process that can connect reaches the port.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider, or {@code port} is not
   *     from 1 to 65535
   */
  int forwardTcp(WorkspaceRef ref, int port);
}
