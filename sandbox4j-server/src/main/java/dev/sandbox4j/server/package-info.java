/**
 * The sandbox4j server: the local engine as a multi-tenant HTTP service (docs/server-api.md; the
 * same contract as OpenAPI at {@code /v1/openapi.json}).
 *
 * <p>{@link dev.sandbox4j.server.SandboxServer} serves; {@link dev.sandbox4j.server.ServerKeys}
 * creates, lists and revokes API keys; {@link dev.sandbox4j.server.Tenant} is what a servlet
 * mounted beside the API (the MCP endpoint) sees of its caller. The rules the server keeps:
 *
 * <ol>
 *   <li>Every {@code /v1} request is authenticated by an API key and scoped to the key's
 *       organization; another organization's sandbox, snapshot or command is {@code 404}, exactly
 *       like one that never existed. Keys are stored only as SHA-256 hashes and never logged; a
 *       revoked key is refused on the next request.
 *   <li>Clients are hostile: bodies are size-limited, strictly parsed (unknown fields are errors),
 *       and every error names the offending field; sandbox paths are resolved by the engine inside
 *       the sandbox, never on the host.
 *   <li>Ownership lives in SQLite ({@code <dataDir>/server.db}, migrated on open); sandboxes live
 *       in the engine's home. A restart loses neither; an exec stream cut by a stop ends without a
 *       last event.
 *   <li>Output is streamed as it comes, file contents in both directions without buffering whole
 *       files, and a client that goes away (or cancels) gets its command's tree killed.
 * </ol>
 */
package dev.sandbox4j.server;
