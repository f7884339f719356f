// Drives an MCP server over stdio with the official TypeScript SDK: the command line after this
// script's name starts the server. Prints one JSON object with what the server answered.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
const client = new Client({ name: "sandbox4j-test-client", version: "1.0.0" });
await client.connect(transport);

const out = {};
out.server = client.getServerVersion();
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
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
