// Reads one JSON memory tool input per line from stdin, runs it through the
// reference backend (BetaLocalFilesystemMemoryTool of @anthropic-ai/sdk) on
// the folder given as argv[2], and prints one JSON result per line, as the
// SDK's tool runner renders it: the string, or "Error: " + message.
//
// gitmem has no empty folders (git does not track them), so after every
// call the harness removes the empty folders under memories/: a documented
// difference that would otherwise show in every later listing.
// An input {"dump":true} prints the final tree: {path: content}; an input
// {"base":"/folder"} starts over on another folder, as a new harness on it
// would (one node process serves many sessions: its start is a quarter
// second of CPU), and prints {}.
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const { BetaLocalFilesystemMemoryTool } = require('@anthropic-ai/sdk/tools/memory/node');

function prune(dir, isRoot) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) prune(path.join(dir, e.name), false);
  }
  if (!isRoot && fs.readdirSync(dir).length === 0) fs.rmdirSync(dir);
}

function dump(dir, prefix, out) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = prefix ? prefix + '/' + e.name : e.name;
    if (e.isDirectory()) dump(path.join(dir, e.name), p, out);
    else out[p] = fs.readFileSync(path.join(dir, e.name), 'utf-8');
  }
  return out;
}

(async () => {
  let base = process.argv[2];
  let tool = await BetaLocalFilesystemMemoryTool.init(base);
  let root = path.join(base, 'memories');
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.trim()) continue;
    const input = JSON.parse(line);
    if (input.base) {
      base = input.base;
      tool = await BetaLocalFilesystemMemoryTool.init(base);
      root = path.join(base, 'memories');
      process.stdout.write('{}\n');
      continue;
    }
    if (input.dump) {
      process.stdout.write(JSON.stringify(dump(root, '', {})) + '\n');
      continue;
    }
    let res;
    try {
      res = { content: await tool[input.command](input), is_error: false };
    } catch (e) {
      res = { content: 'Error: ' + e.message, is_error: true };
    }
    prune(root, true);
    process.stdout.write(JSON.stringify(res) + '\n');
  }
})();
