// The module's own contract, with a fake fetch: calls go one at a time in
// the order run() was called, each with its tool_use id and the caller's
// headers; gitmem's errors come back as thrown errors the runner words as
// "Error: " + message, i.e. gitmem's text; a failure to get a tool_result
// is a GitmemError, which the middleware throws for the request that
// would carry it to the model.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gitmemMemoryTool, GitmemError } from '@gitmem-dev/memory-tool';

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

test('a refused request, no answer, or no tool_result is a GitmemError; a missing id an error', async () => {
  const { fetch } = fakeFetch(() => [401, { error: 'missing or wrong bearer token' }]);
  const tool = gitmemMemoryTool({ url: 'http://gitmem.test/v1/tool_use', fetch });
  await assert.rejects(tool.run({ command: 'view', path: '/memories' }, { toolUse: { id: 'toolu_1' } }), (e) => {
    assert.ok(e instanceof GitmemError);
    assert.equal(e.name, 'GitmemError');
    assert.equal(e.message, 'gitmem answered 401: missing or wrong bearer token');
    assert.equal(e.status, 401);
    return true;
  });
  const down = gitmemMemoryTool({ url: 'http://gitmem.test/v1/tool_use', fetch: async () => { throw new TypeError('fetch failed'); } });
  await assert.rejects(down.run({ command: 'view', path: '/memories' }, { toolUse: { id: 'toolu_2' } }), {
    name: 'GitmemError', message: 'gitmem could not be reached at http://gitmem.test/v1/tool_use: fetch failed', status: undefined,
  });
  const { fetch: odd } = fakeFetch(() => [200, { hello: 'world' }]);
  const strange = gitmemMemoryTool({ url: 'http://gitmem.test/v1/tool_use', fetch: odd });
  await assert.rejects(strange.run({ command: 'view', path: '/memories' }, { toolUse: { id: 'toolu_3' } }), {
    name: 'GitmemError', message: 'gitmem\'s answer is not the tool_result of toolu_3: {"hello":"world"}',
  });
  await assert.rejects(tool.run({ command: 'view', path: '/memories' }), /needs the tool_use id/);
});

test('the middleware throws a call\'s GitmemError for any request naming the call, and only those', async () => {
  const { fetch } = fakeFetch((body) =>
    body.id === 'toolu_bad' ? [503, { error: 'the server is busy' }]
    : body.id === 'toolu_err' ? [200, { type: 'tool_result', tool_use_id: body.id, content: 'Error: The path /memories/x does not exist', is_error: true }]
    : ok(body),
  );
  const tool = gitmemMemoryTool({ url: 'http://gitmem.test/v1/tool_use', fetch });
  await assert.rejects(tool.run({ command: 'view', path: '/memories' }, { toolUse: { id: 'toolu_bad' } }), { name: 'GitmemError' });
  await assert.rejects(tool.run({ command: 'delete', path: '/memories/x' }, { toolUse: { id: 'toolu_err' } }), { message: 'The path /memories/x does not exist' });
  await tool.run({ command: 'view', path: '/memories' }, { toolUse: { id: 'toolu_ok' } });
  const sent = [];
  const next = async (request) => { sent.push(request); return new Response('{}'); };
  const carrying = (id) => ({ body: JSON.stringify({ messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: 'x' }] }] }) });
  await assert.rejects(tool.middleware(carrying('toolu_bad'), next), { name: 'GitmemError', message: 'gitmem answered 503: the server is busy', status: 503 });
  await tool.middleware(carrying('toolu_err'), next); // a memory error is the model's
  await tool.middleware(carrying('toolu_ok'), next);
  await tool.middleware({ body: undefined }, next);
  assert.equal(sent.length, 3);
});
