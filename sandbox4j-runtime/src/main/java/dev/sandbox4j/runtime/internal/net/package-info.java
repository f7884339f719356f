/**
 * Not API: may change in any release. Sandbox networking on the host, which the engine drives
 * through Networks: the host-global names (HostNames), each home's subnet and addresses
 * (HomeSubnet), a sandbox's settings files (NetworkFiles), its namespace and veth pair (VethLinks,
 * over Rtnetlink), the nftables rules for each policy (NftablesRules, run by Nftables), named
 * networks and their hosts files (NamedNetworks), the host's nameservers (Nameservers) and the
 * tools the host needs (NetworkTools). A policy with domain rules sends the sandbox's traffic to
 * the egress proxy.
 *
 * <p>Non-goals: the proxy itself (internal.egress), running commands in a sandbox.
 */
package dev.sandbox4j.runtime.internal.net;
