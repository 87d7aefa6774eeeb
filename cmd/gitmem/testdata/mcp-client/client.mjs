// Drives gitmem's MCP server with the official TypeScript MCP SDK client.
//
//   node client.mjs stdio COMMAND [ARG...]     spawns the server (gitmem serve --mcp)
//   node client.mjs http URL [HEADER=VALUE...]  connects to gitmem serve --mcp-http
//
// Reads a JSON array of calls, [{"arguments": {...}, "meta": {...}}], from
// stdin, makes them one after another (with MCP_PIPELINE=1: all at once,
// each sent without waiting for the answers before it), and prints one
// JSON object: the server's instructions, its tools, and each call's
// result as the SDK returns it.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [mode, target, ...rest] = process.argv.slice(2);
let transport;
if (mode === 'stdio') {
  transport = new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: 'inherit' });
} else if (mode === 'http') {
  const headers = Object.fromEntries(rest.map((kv) => kv.split(/=(.*)/s).slice(0, 2)));
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  throw new Error(`unknown mode ${mode}`);
}

let input = '';
for await (const chunk of process.stdin) input += chunk;
const calls = JSON.parse(input);

const client = new Client({ name: 'gitmem-test-client', version: '1.0.0' });
await client.connect(transport);
const { tools } = await client.listTools();
const params = (call) => ({ name: 'memory', arguments: call.arguments, ...(call.meta ? { _meta: call.meta } : {}) });
let results = [];
if (process.env.MCP_PIPELINE === '1') {
  results = await Promise.all(calls.map((call) => client.callTool(params(call))));
} else {
  for (const call of calls) results.push(await client.callTool(params(call)));
}
process.stdout.write(JSON.stringify({ instructions: client.getInstructions(), tools, results }) + '\n');
await client.close();
