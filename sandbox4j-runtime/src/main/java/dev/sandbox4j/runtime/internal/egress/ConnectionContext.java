package dev.sandbox4j.runtime.internal.egress;

/**
 * What every client connection of one proxy shares: the policy check, the way upstream, the CA for
 * interception, the open sockets, and the timeouts (in milliseconds but for the head's).
 */
record ConnectionContext(
    PolicyCheck policies,
    Upstreams upstreams,
    ProxyCaSource ca,
    OpenSockets sockets,
    int idleTimeout,
    long headTimeoutNanos,
    int tlsSniffMillis) {}
