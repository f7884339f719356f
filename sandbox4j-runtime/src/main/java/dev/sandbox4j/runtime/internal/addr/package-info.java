/**
 * Not API: may change in any release. Network addresses as egress rules name them: CIDRs (Cidr),
 * host names (HostNames), and the ranges no egress policy opens (PublicAddresses: loopback,
 * private, link-local, the engine's own range, every IPv6 form that carries one). The API's
 * EgressPolicy validates its rules with them, and the egress proxy checks each connection with
 * them.
 *
 * <p>Non-goals: name resolution, sockets, or policy decisions (EgressPolicy and the egress proxy
 * make those).
 */
package dev.sandbox4j.runtime.internal.addr;
