/**
 * Not API: may change in any release. The port proxy: {@code
 * http://{port}-{id}.localhost:{proxyPort}/} URLs and TCP forwards into a sandbox's network
 * namespace, with per-sandbox tokens; it wakes a suspended sandbox on a request.
 *
 * <p><b>What a second backend uses.</b> It implements {@link
 * dev.sandbox4j.runtime.internal.ports.PortTargets} (find, wake and connect into its sandboxes,
 * stamp them active) and runs a {@link dev.sandbox4j.runtime.internal.ports.PortProxy} on it; its
 * API answers with {@link dev.sandbox4j.runtime.internal.ports.PortUrls} (the proxy's port and the
 * URLs), {@link dev.sandbox4j.runtime.internal.ports.PortTokens} (a sandbox's token, written at
 * create and for each fork) and {@link dev.sandbox4j.runtime.internal.ports.PortForwards#forward}
 * (ask for a TCP forward). Nothing here knows crun: the crun engine's targets are {@code
 * internal.engine.EnginePorts}. The rest of the package (request checks, the HTTP connection, the
 * byte pipes) is package-private.
 *
 * <p>Non-goals: egress (internal.egress); binding a sandbox's ports on the host's interfaces.
 */
package dev.sandbox4j.runtime.internal.ports;
