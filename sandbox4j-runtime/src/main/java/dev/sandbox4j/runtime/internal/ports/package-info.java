/**
 * Not API: may change in any release. The port proxy (PortProxy):
 * http://{port}-{id}.localhost:{proxyPort}/ URLs and TCP forwards into a sandbox's network
 * namespace, with per-sandbox tokens; it wakes a suspended sandbox on a request.
 *
 * <p>Non-goals: egress (internal.egress); binding a sandbox's ports on the host's interfaces.
 */
package dev.sandbox4j.runtime.internal.ports;
