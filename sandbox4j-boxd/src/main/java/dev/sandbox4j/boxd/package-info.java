/**
 * The {@code boxd} provider: workspaces in boxd cloud machines over boxd's public gRPC API. See
 * {@link dev.sandbox4j.boxd.BoxdSandbox}. This client has not been run against the real boxd
 * service.
 */
package dev.sandbox4j.boxd;
