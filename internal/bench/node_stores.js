// The peer of gitmem bench --stores (internal/bench/manystores.go): a
// node server over a folder of folders, one per store, each the
// Anthropic TypeScript SDK's file backend (BetaLocalFilesystemMemoryTool of @anthropic-ai/sdk, found through
// NODE_PATH) on DIR/NAME, behind the route gitmem serve --stores answers:
//
//   node node_stores.js DIR SHA256   POST /v1/stores/NAME/tool_use on
//                                    127.0.0.1, a free port, with a bearer
//                                    token whose SHA-256 is SHA256; prints
//                                    "listening ADDR" when ready
//
// As gitmem does, a store is opened on its first call (init, which makes
// its memories folder) and kept open; a name with no folder is a 404.
const http = require('http');
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { BetaLocalFilesystemMemoryTool } = require('@anthropic-ai/sdk/tools/memory/node');

const [dir, tokenHash] = process.argv.slice(2);
const open = new Map(); // name -> Promise<tool>
const route = /^\/v1\/stores\/([A-Za-z0-9][A-Za-z0-9._-]{0,127})\/tool_use$/;

function reply(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function tool(name) {
  let t = open.get(name);
  if (!t) {
    t = (async () => {
      const base = path.join(dir, name);
      await fs.promises.stat(base); // no folder: no store
      return BetaLocalFilesystemMemoryTool.init(base);
    })();
    open.set(name, t);
    t.catch(() => open.delete(name));
  }
  return t;
}

const server = http.createServer((req, res) => {
  const m = route.exec(req.url);
  const auth = req.headers.authorization || '';
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    if (req.method !== 'POST' || !m) return reply(res, 404, { error: 'not found' });
    const got = crypto.createHash('sha256').update(auth.replace(/^Bearer /, '')).digest('hex');
    if (!auth.startsWith('Bearer ') || got !== tokenHash) return reply(res, 401, { error: 'unauthorized' });
    let block;
    try {
      block = JSON.parse(Buffer.concat(chunks).toString('utf-8'));
    } catch (e) {
      return reply(res, 400, { error: String(e) });
    }
    let t;
    try {
      t = await tool(m[1]);
    } catch (e) {
      return reply(res, 404, { error: 'no such store' });
    }
    const out = { type: 'tool_result', tool_use_id: block.id };
    try {
      out.content = await t[block.input.command](block.input);
    } catch (e) {
      out.content = 'Error: ' + e.message;
      out.is_error = true;
    }
    reply(res, 200, out);
  });
});
server.keepAliveTimeout = 120000;
server.listen(0, '127.0.0.1', () => {
  const a = server.address();
  process.stdout.write(`listening ${a.address}:${a.port}\n`);
});
