/**
 * Not API: may change in any release. The egress proxy (EgressProxy): the one way out of a sandbox
 * with an allowlist policy. It reads each sandbox's policy through a lookup by source address,
 * resolves names itself (EgressResolver), connects only to public addresses, injects header rules
 * and, for policies that intercept TLS, terminates TLS with the home's CA (ProxyCa). Nothing in it
 * knows crun: a second backend (Docker) can run it for its containers.
 *
 * <p>Non-goals: routing and packet filtering (internal.net does that with nftables), deciding
 * policies (the API's EgressPolicy).
 */
package dev.sandbox4j.runtime.internal.egress;
