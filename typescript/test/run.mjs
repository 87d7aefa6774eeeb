// Runs one conversation through the real @anthropic-ai/sdk toolRunner with
// the memory tool of @gitmem-dev/memory-tool (installed from .. as a user
// would), its middleware on the client, against the Messages API at
// FAKE_API_URL and the gitmem server at GITMEM_URL (token GITMEM_TOKEN).
// Prints the final message as JSON, or {"error": {name, message, status}}
// when the run throws.
import Anthropic from '@anthropic-ai/sdk';
import { gitmemMemoryTool } from '@gitmem-dev/memory-tool';

const memory = gitmemMemoryTool({
  url: process.env.GITMEM_URL,
  token: process.env.GITMEM_TOKEN,
  session: 'ts-session',
  agent: 'ts-agent',
});
const client = new Anthropic({
  apiKey: 'test-key',
  baseURL: process.env.FAKE_API_URL,
  maxRetries: 0,
  middleware: memory.middleware ? [memory.middleware] : [],
});
try {
  const final = await client.beta.messages.toolRunner({
    model: 'claude-opus-4-6',
    max_tokens: 1024,
    betas: ['context-management-2025-06-27'],
    messages: [{ role: 'user', content: 'I like green tea. Remember it.' }],
    tools: [memory],
  });
  process.stdout.write(JSON.stringify(final) + '\n');
} catch (e) {
  process.stdout.write(JSON.stringify({ error: { name: e.name, message: e.message, status: e.status } }) + '\n');
}
