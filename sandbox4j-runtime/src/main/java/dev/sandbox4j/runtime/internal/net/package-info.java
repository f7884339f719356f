/**
 * Not API: may change in any release. Sandbox networking on the host: a veth pair and subnet per
 * sandbox, named networks, nftables rules for each policy (Networks, Nftables) over rtnetlink
 * (Rtnetlink). A policy with domain rules sends the sandbox's traffic to the egress proxy.
 *
 * <p>Non-goals: the proxy itself (internal.egress), running commands in a sandbox.
 */
package dev.sandbox4j.runtime.internal.net;
