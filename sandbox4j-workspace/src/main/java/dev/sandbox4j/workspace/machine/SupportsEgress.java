package dev.sandbox4j.workspace.machine;

import dev.sandbox4j.workspace.WorkspaceRef;

/**
 * A provider that limits where its machines may connect to, with rules it can replace while a
 * machine runs. See {@link dev.sandbox4j.workspace.machine}.
 */
public interface SupportsEgress {

  /**
   * The egress rules of {@code ref}'s machine, header values included: they are the caller's own
   * secrets, kept by the provider outside the machine.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider
   */
  EgressRules egressRules(WorkspaceRef ref);

  /**
   * Replaces the egress rules of {@code ref}'s machine. New connections follow them at once;
   * connections already open are kept. Header values never enter the machine.
   *
   * @throws dev.sandbox4j.workspace.WorkspaceUnavailableException if the machine does not exist
   * @throws IllegalArgumentException if the ref belongs to another provider, or the provider finds
   *     a rule malformed or refuses it (the message names the rule)
   * @throws dev.sandbox4j.workspace.WorkspaceException if the machine cannot take rules (the local
   *     engine: one made before sandboxes had networks)
   */
  void setEgressRules(WorkspaceRef ref, EgressRules rules);
}
