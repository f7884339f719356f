/**
 * The {@code remote} provider: workspaces on a sandbox4j server, reached over its HTTP API (see
 * {@code docs/server-api.md}) with the JDK's own HTTP client and WebSocket.
 *
 * <p>{@link dev.sandbox4j.remote.RemoteSandbox} is the entry point. Its backends keep the whole
 * workspace contract ({@code dev.sandbox4j.workspace}); the server's errors map to the workspace
 * exceptions: a sandbox the server does not know is {@link
 * dev.sandbox4j.workspace.WorkspaceUnavailableException}, file errors are the matching {@link
 * dev.sandbox4j.workspace.WorkspaceFileException} subclasses, a command's timeout and output limit
 * are {@link dev.sandbox4j.workspace.WorkspaceTimeoutException} and {@link
 * dev.sandbox4j.workspace.WorkspaceOutputLimitException} with the output received until then, and
 * an exec stream that ends without the command's end is a {@link
 * dev.sandbox4j.workspace.WorkspaceException} saying so. The API key is sent only in the {@code
 * Authorization} header.
 */
package dev.sandbox4j.remote;
