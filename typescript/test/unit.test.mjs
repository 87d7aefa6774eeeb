// The module's own contract, with a fake fetch: calls go one at a time in
// the order run() was called, each with its tool_use id and the caller's
// headers; gitmem's errors come back as thrown errors the runner words as
// "Error: " + message, i.e. gitmem's text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gitmemMemoryTool } from '@gitmem-dev/memory-tool';

function fakeFetch(answer) {
  const calls = [];
  let inFlight = 0;
  const fetch = async (url, init) => {
    const body = JSON.parse(init.body);
    calls.push({ url: String(url), headers: init.headers, body, overlapping: inFlight > 0 });
    inFlight++;
    // The first call is the slowest: a second call must still wait for it.
    await new Promise((resolve) => setTimeout(resolve, body.id === 'toolu_1' ? 30 : 0));
    inFlight--;
    const [status, json] = answer(body);
    return new Response(JSON.stringify(json), { status, headers: { 'Content-Type': 'application/json' } });
  };
  return { fetch, calls };
}

const ok = (body) => [200, { type: 'tool_result', tool_use_id: body.id, content: `done ${body.input.command}` }];

test('calls run one at a time, in order, with their ids and headers', async () => {
  const { fetch, calls } = fakeFetch(ok);
  const tool = gitmemMemoryTool({ url: 'http://gitmem.test/v1/tool_use', token: 't0k', session: 's', agent: 'a', fetch });
  assert.equal(tool.type, 'memory_20250818');
  assert.equal(tool.name, 'memory');
  const results = await Promise.all([
    tool.run({ command: 'create', path: '/memories/a', file_text: 'x' }, { toolUse: { id: 'toolu_1' } }),
    tool.run({ command: 'view', path: '/memories/a' }, { toolUse: { id: 'toolu_2' } }),
  ]);
  assert.deepEqual(results, ['done create', 'done view']);
  assert.deepEqual(calls.map((c) => [c.body.id, c.overlapping]), [['toolu_1', false], ['toolu_2', false]]);
  assert.deepEqual(calls[0].body, { type: 'tool_use', id: 'toolu_1', name: 'memory', input: { command: 'create', path: '/memories/a', file_text: 'x' } });
  assert.deepEqual(calls[0].headers, { 'Content-Type': 'application/json', Authorization: 'Bearer t0k', 'Gitmem-Session': 's', 'Gitmem-Agent': 'a' });
});

test('an error result is thrown with gitmem text, and later calls still run', async () => {
  const { fetch } = fakeFetch((body) =>
    body.id === 'toolu_1' ?
      [200, { type: 'tool_result', tool_use_id: body.id, content: 'Error: The path /memories/x does not exist', is_error: true }]
    : ok(body),
  );
  const tool = gitmemMemoryTool({ url: 'http://gitmem.test/v1/tool_use', fetch });
  const failed = tool.run({ command: 'delete', path: '/memories/x' }, { toolUse: { id: 'toolu_1' } });
  const next = tool.run({ command: 'view', path: '/memories' }, { toolUse: { id: 'toolu_2' } });
  await assert.rejects(failed, { message: 'The path /memories/x does not exist' });
  assert.equal(await next, 'done view');
});

test('a refused request and a missing id are errors', async () => {
  const { fetch } = fakeFetch(() => [401, { error: 'missing or wrong bearer token' }]);
  const tool = gitmemMemoryTool({ url: 'http://gitmem.test/v1/tool_use', fetch });
  await assert.rejects(tool.run({ command: 'view', path: '/memories' }, { toolUse: { id: 'toolu_1' } }), {
    message: 'gitmem answered 401: missing or wrong bearer token',
  });
  await assert.rejects(tool.run({ command: 'view', path: '/memories' }), /needs the tool_use id/);
});
