// Runs Memory Stores API calls through the official TypeScript SDK
// (@anthropic-ai/sdk, pinned in package.json) for gitmem's SDK test
// (cmd/gitmem/memstores_sdk_test.go): one JSON call per line on stdin,
// {op, secret, auth, args: {store, id, params, extra}}, one JSON result per
// line on stdout, {ok, value} or {ok: false, status, class, type,
// message, request_id, error}, each with the number of HTTP requests the
// SDK sent (its retries included).
import Anthropic from '@anthropic-ai/sdk';
import readline from 'node:readline';

const baseURL = process.env.GITMEM_URL;

function client(call, counter) {
  const opts = {
    baseURL,
    maxRetries: 2,
    fetch: (url, init) => {
      counter.n++;
      return fetch(url, init);
    },
  };
  switch (call.auth) {
    case 'x-api-key': // as SDKs before 1.0 send an API key
      opts.apiKey = null;
      opts.authToken = null;
      opts.defaultHeaders = { 'X-Api-Key': call.secret };
      break;
    case 'token':
      opts.apiKey = null;
      opts.authToken = call.secret;
      break;
    default:
      opts.apiKey = call.secret;
  }
  return new Anthropic(opts);
}

async function all(pages) {
  const data = [];
  for await (const item of pages) data.push(item);
  return { data };
}

async function page(p) {
  const pg = await p;
  return { data: pg.data, next_page: pg.next_page ?? null };
}

async function run(call) {
  const counter = { n: 0 };
  const c = client(call, counter);
  const ms = c.beta.memoryStores;
  const a = call.args ?? {};
  const params = { ...(a.params ?? {}), ...(a.extra ?? {}) };
  const inStore = { memory_store_id: a.store, ...params };
  let value;
  try {
    switch (call.op) {
      case 'stores.create': value = await ms.create(params); break;
      case 'stores.retrieve': value = await ms.retrieve(a.id); break;
      case 'stores.update': value = await ms.update(a.id, params); break;
      case 'stores.list': value = await page(ms.list(params)); break;
      case 'stores.listAll': value = await all(ms.list(params)); break;
      case 'stores.delete': value = await ms.delete(a.id); break;
      case 'stores.archive': value = await ms.archive(a.id); break;
      case 'memories.create': value = await ms.memories.create(a.store, params); break;
      case 'memories.retrieve': value = await ms.memories.retrieve(a.id, inStore); break;
      case 'memories.update': value = await ms.memories.update(a.id, inStore); break;
      case 'memories.delete': value = await ms.memories.delete(a.id, inStore); break;
      case 'memories.list': value = await page(ms.memories.list(a.store, params)); break;
      case 'memories.listAll': value = await all(ms.memories.list(a.store, params)); break;
      case 'versions.retrieve': value = await ms.memoryVersions.retrieve(a.id, inStore); break;
      case 'versions.list': value = await page(ms.memoryVersions.list(a.store, params)); break;
      case 'versions.listAll': value = await all(ms.memoryVersions.list(a.store, params)); break;
      case 'versions.redact': value = await ms.memoryVersions.redact(a.id, { memory_store_id: a.store }); break;
      default: throw new Error('unknown op ' + call.op);
    }
  } catch (e) {
    if (!(e instanceof Anthropic.APIError)) {
      return { ok: false, class: e.constructor.name, message: String(e), requests: counter.n };
    }
    return {
      ok: false,
      status: e.status,
      class: e.constructor.name,
      type: e.type ?? null,
      message: e.apiMessage ?? null,
      request_id: e.requestID ?? null,
      error: e.error ?? null,
      requests: counter.n,
    };
  }
  return { ok: true, value, requests: counter.n };
}

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  const out = await run(JSON.parse(line));
  process.stdout.write(JSON.stringify(out) + '\n');
}
