/**
 * An MCP server that offers an agent's tools, bound to one workspace, to any MCP client: {@link
 * dev.sandbox4j.mcp.McpToolServer#serveStdio}.
 *
 * <p>The rules a server keeps:
 *
 * <ol>
 *   <li>Every call acts in the one workspace the server was given; the server never creates another
 *       and never destroys it.
 *   <li>{@code tools/list} shows each tool's name, description and argument schema as the tool
 *       defines them.
 *   <li>A call that fails (invalid arguments, a failed operation, a workspace that is gone) is a
 *       result marked {@code isError} whose text says why; the server keeps serving.
 *   <li>Stdout carries protocol frames only; anything else goes to stderr.
 * </ol>
 */
package dev.sandbox4j.mcp;
