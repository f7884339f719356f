/**
 * The {@code modal} provider: workspaces in Modal sandboxes, over Modal's public gRPC protocol.
 * {@link dev.sandbox4j.modal.ModalSandbox} is the whole API. This client has not been run against
 * the real Modal service; its tests run it against a fake built from Modal's public protocol.
 */
package dev.sandbox4j.modal;
