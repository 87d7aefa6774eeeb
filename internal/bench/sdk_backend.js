// The Anthropic TypeScript SDK's file backend (BetaLocalFilesystemMemoryTool
// of @anthropic-ai/sdk, found through NODE_PATH) behind the same wire formats
// as gitmem serve, for gitmem bench:
//
//   node sdk_backend.js stdio BASE   one tool_use block per line on stdin,
//                                    one tool_result per line on stdout
//   node sdk_backend.js http BASE    POST /v1/tool_use on 127.0.0.1, a free
//                                    port; prints "listening ADDR" when ready
//
// The memory folder is BASE/memories. Calls run as the SDK runs them: the
// HTTP server answers concurrent requests concurrently. Like gitmem, it
// says how long it took over each call in a Server-Timing header.
const http = require('http');
const readline = require('readline');
const { BetaLocalFilesystemMemoryTool } = require('@anthropic-ai/sdk/tools/memory/node');

async function answer(tool, body) {
  const block = JSON.parse(body);
  const res = { type: 'tool_result', tool_use_id: block.id };
  try {
    res.content = await tool[block.input.command](block.input);
  } catch (e) {
    res.content = 'Error: ' + e.message;
    res.is_error = true;
  }
  return JSON.stringify(res);
}

(async () => {
  const [mode, base] = process.argv.slice(2);
  const tool = await BetaLocalFilesystemMemoryTool.init(base);
  if (mode === 'stdio') {
    const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
    for await (const line of rl) {
      if (line.trim()) process.stdout.write((await answer(tool, line)) + '\n');
    }
    return;
  }
  const server = http.createServer((req, res) => {
    const t0 = process.hrtime.bigint();
    const timing = () => ({ 'Server-Timing': `call;dur=${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(3)}` });
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      let out;
      try {
        out = await answer(tool, Buffer.concat(chunks).toString('utf-8'));
      } catch (e) {
        res.writeHead(400, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ error: String(e) }));
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json', ...timing() });
      res.end(out);
    });
  });
  server.keepAliveTimeout = 120000;
  server.listen(0, '127.0.0.1', () => {
    const a = server.address();
    process.stdout.write(`listening ${a.address}:${a.port}\n`);
  });
  process.on('SIGINT', () => server.close(() => process.exit(0)));
})();
