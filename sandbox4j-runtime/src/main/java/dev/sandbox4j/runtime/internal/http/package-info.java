/**
 * Not API: may change in any release. HTTP/1.1 on the wire, as the egress proxy and the port proxy
 * read it from untrusted peers: a bounded request or response head, chunked and sized bodies
 * (HttpWire).
 *
 * <p>Non-goals: a client or server API; TLS (the proxies do that).
 */
package dev.sandbox4j.runtime.internal.http;
