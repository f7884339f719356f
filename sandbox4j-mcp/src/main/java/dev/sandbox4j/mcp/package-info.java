/**
 * An MCP server that offers an agent's tools, bound to a workspace, to any MCP client: over stdio
 * ({@link dev.sandbox4j.mcp.McpToolServer#serveStdio}) or streamable HTTP ({@link
 * dev.sandbox4j.mcp.McpToolServer#streamableHttp}, a servlet).
 *
 * <p>The rules a server keeps:
 *
 * <ol>
 *   <li>Over stdio, every call acts in the one workspace the server was given. Over HTTP, every
 *       call of one MCP session acts in the one workspace {@link
 *       dev.sandbox4j.mcp.SessionWorkspaces} opened for that session on its first tool call;
 *       sessions never share one unless the caller hands out the same workspace.
 *   <li>The server never destroys a workspace. Over HTTP, a session's end (the client deletes it,
 *       it is left idle until the transport forgets it, the servlet is destroyed) calls {@link
 *       dev.sandbox4j.mcp.SessionWorkspaces#close} once for the workspace it opened: the caller
 *       decides its fate. Requests naming an ended session are answered 404.
 *   <li>{@code tools/list} shows each tool's name, description and argument schema as the tool
 *       defines them.
 *   <li>A call that fails (invalid arguments, a failed operation, a workspace that is gone or that
 *       could not be opened) is a result marked {@code isError} whose text says why; the server
 *       keeps serving.
 *   <li>Over stdio, stdout carries protocol frames only; anything else goes to stderr.
 *   <li>The HTTP endpoint checks no credentials: authentication belongs in front of it. A session
 *       belongs to the user principal that initialized it; another principal naming it gets 404.
 * </ol>
 */
package dev.sandbox4j.mcp;
