/**
 * Not API: may change in any release. The egress proxy (EgressProxy): the one way out of a sandbox
 * with an allowlist policy. It reads each sandbox's policy through a lookup by source address,
 * resolves names itself (EgressResolver), connects only to public addresses, injects header rules
 * and, for policies that intercept TLS, terminates TLS with the home's CA (ProxyCa).
 *
 * <p><b>What a second backend uses.</b> {@link
 * dev.sandbox4j.runtime.internal.egress.EgressProxy#builder} with a {@link
 * dev.sandbox4j.runtime.internal.egress.EgressProxy.PolicyLookup} (its containers' source addresses
 * to their policies), bound where its containers can reach it and nowhere else; {@link
 * dev.sandbox4j.runtime.internal.egress.EgressProxy#caCertificatePem} to install the CA into a
 * container whose policy intercepts TLS; {@link
 * dev.sandbox4j.runtime.internal.egress.EgressProxy#hostsFile} for the home's extra names. Nothing
 * here knows crun or its networking: the network setup (internal.net) only routes a sandbox's
 * traffic to the proxy and tells it which addresses are sandboxes ({@code Builder.notPublic}). The
 * rest of the package (connections, policy checks, tunnels, TLS interception) is package-private.
 *
 * <p>Non-goals: routing and packet filtering (internal.net does that with nftables), deciding
 * policies (the API's EgressPolicy).
 */
package dev.sandbox4j.runtime.internal.egress;
