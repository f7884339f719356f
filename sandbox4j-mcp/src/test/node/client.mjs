// Drives an MCP server with the official TypeScript SDK and prints one JSON object with what the
// server answered. `client.mjs URL` talks streamable HTTP to URL (with `Authorization: Bearer
// $MCP_API_KEY` when that is set) and deletes its session at the end; otherwise the command line
// after this script's name starts the server, spoken to over stdio.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [command, ...args] = process.argv.slice(2);
const http = /^https?:\/\//.test(command);
const key = process.env.MCP_API_KEY;
const transport = http
  ? new StreamableHTTPClientTransport(new URL(command), {
      requestInit: key ? { headers: { Authorization: `Bearer ${key}` } } : {},
    })
  : new StdioClientTransport({ command, args, stderr: "inherit" });
const client = new Client({ name: "sandbox4j-test-client", version: "1.0.0" });
const out = {};
try {
  await client.connect(transport);
} catch (e) {
  // a refused connection is a result too (e.g. a 401 without a key): its HTTP status, if any
  out.connectError = String(e?.message ?? e);
  out.connectStatus = typeof e?.code === "number" ? e.code : null;
  process.stdout.write(JSON.stringify(out) + "\n");
  process.exit(0);
}

out.server = client.getServerVersion();
out.sessionId = transport.sessionId ?? null;
const listed = await client.listTools();
out.tools = listed.tools.map((t) => ({
  name: t.name,
  hasDescription: typeof t.description === "string" && t.description.length > 0,
  schemaType: t.inputSchema.type,
  properties: Object.keys(t.inputSchema.properties ?? {}),
}));
out.write = await client.callTool({
  name: "write_file",
  arguments: { path: "hello.txt", content: "hello from mcp\n" },
});
out.read = await client.callTool({ name: "read_file", arguments: { path: "hello.txt" } });
out.shell = await client.callTool({ name: "shell", arguments: { command: "echo hi" } });
out.missing = await client.callTool({ name: "read_file", arguments: { path: "no-such-file" } });
out.invalid = await client.callTool({ name: "read_file", arguments: {} });
if (http) {
  await transport.terminateSession();
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
