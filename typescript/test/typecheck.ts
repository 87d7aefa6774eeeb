// Compiled with --noEmit by gitmem's TypeScript test: the memory tool, as
// the package ships it (dist/index.d.ts), is a BetaRunnableTool the real
// SDK's toolRunner accepts, and its middleware is a client Middleware.
import Anthropic, { type Middleware } from '@anthropic-ai/sdk';
import type { BetaRunnableTool } from '@anthropic-ai/sdk/lib/tools/BetaRunnableTool';
import type { BetaMemoryTool20250818Command } from '@anthropic-ai/sdk/resources/beta/messages/messages';
import { gitmemMemoryTool, type MemoryCommand } from '@gitmem-dev/memory-tool';

const memory = gitmemMemoryTool({ url: 'http://127.0.0.1:7077/v1/tool_use', session: 's', extraProps: { cache_control: { type: 'ephemeral' } } });
export const runnable: BetaRunnableTool<MemoryCommand> = memory;
// The commands are the SDK's, both ways.
export const fromSDK = (c: BetaMemoryTool20250818Command): MemoryCommand => c;
export const toSDK = (c: MemoryCommand): BetaMemoryTool20250818Command => c;
export const middleware: Middleware = memory.middleware;
export const runner = new Anthropic({ apiKey: 'k', middleware: [memory.middleware] }).beta.messages.toolRunner({
  model: 'claude-opus-4-6',
  max_tokens: 1024,
  messages: [{ role: 'user', content: 'hi' }],
  tools: [memory],
});
