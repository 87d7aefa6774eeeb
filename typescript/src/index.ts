/**
 * Claude's memory tool (`memory_20250818`) for `@anthropic-ai/sdk`'s `toolRunner`, answered by
 * `gitmem serve --http`: every change the model makes to its memory is a git commit that names
 * the call's `tool_use` id.
 *
 * ```ts
 * const memory = gitmemMemoryTool({ url: 'http://127.0.0.1:7077/v1/tool_use', session: 'user-42' });
 * const client = new Anthropic({ middleware: [memory.middleware] });
 * const runner = client.beta.messages.toolRunner({ model, max_tokens, messages, tools: [memory],
 *   betas: ['context-management-2025-06-27'] });
 * ```
 *
 * The memory's own errors ("The path ... does not exist") go to the model, as the API's memory
 * tool's do. A failure to reach gitmem, or a refusal of the request (a wrong token: 401), is the
 * developer's: the runner throws a `GitmemError` (see `middleware`).
 *
 * No dependencies: it needs only `fetch`.
 */

/** A memory command, as the model sends it (the SDK's `BetaMemoryTool20250818Command`). */
export type MemoryCommand =
  | { command: 'view'; path: string; view_range?: Array<number> }
  | { command: 'create'; path: string; file_text: string }
  | { command: 'str_replace'; path: string; old_str: string; new_str: string }
  | { command: 'insert'; path: string; insert_line: number; insert_text: string }
  | { command: 'delete'; path: string }
  | { command: 'rename'; old_path: string; new_path: string };

/** What the tool runner passes to `run`: the call being served, whose id gitmem records. */
export interface MemoryToolRunContext {
  toolUse: { id: string };
  signal?: AbortSignal | null | undefined;
}

export interface GitmemMemoryToolOptions {
  /** The server's tool_use route, e.g. `http://127.0.0.1:7077/v1/tool_use`. */
  url: string | URL;
  /** The server's bearer token (`gitmem serve --token`), if it has one. */
  token?: string | undefined;
  /** The `Session:` trailer of the commits. */
  session?: string | undefined;
  /** The `Agent:` trailer (and author name) of the commits. */
  agent?: string | undefined;
  /** Makes the requests (default: the global `fetch`). */
  fetch?: typeof fetch | undefined;
  /** Other properties of the tool definition sent to the API, e.g. `cache_control`. */
  extraProps?: { cache_control?: { type: 'ephemeral'; ttl?: '5m' | '1h' } | null } | undefined;
}

/** The memory tool, in the shape of the SDK's `BetaRunnableTool<MemoryCommand>`. */
export interface GitmemMemoryTool {
  type: 'memory_20250818';
  name: 'memory';
  cache_control?: { type: 'ephemeral'; ttl?: '5m' | '1h' } | null;
  parse: (content: unknown) => MemoryCommand;
  /** Runs a call; throws gitmem's error text for the model, or a `GitmemError` for the developer. */
  run: (args: MemoryCommand, context?: MemoryToolRunContext) => Promise<string>;
  /**
   * For the SDK client's `middleware` (`new Anthropic({ middleware: [memory.middleware] })`). The
   * tool runner turns whatever a tool throws into an error result for the model; this stops the
   * request that would carry the result of a call that failed with a `GitmemError` (any request
   * naming its `tool_use` id) and throws that error instead, so the run ends with it.
   */
  middleware: <R extends { body?: unknown }>(request: R, next: (request: R) => Promise<Response>) => Promise<Response>;
}

/**
 * gitmem could not be reached, refused the request (`status`: a wrong token is 401, a busy server
 * 503), or did not answer with a tool_result. Nothing reached the memory, unless the answer was
 * lost after gitmem applied the call: running the same call again (its `tool_use` id) is safe.
 */
export class GitmemError extends Error {
  override name = 'GitmemError';
  /** The HTTP status gitmem answered with; undefined when there was no answer. */
  readonly status: number | undefined;
  constructor(message: string, status?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.status = status;
  }
}

/** How many failed calls the middleware remembers (the last ones). */
const maxFailures = 100;

interface ToolResult {
  type: 'tool_result';
  tool_use_id: string;
  content: string;
  is_error?: boolean;
}

/**
 * The memory tool for `client.beta.messages.toolRunner({ tools: [...] })`. Each call goes to gitmem
 * with its `tool_use` id, one at a time in the order the runner starts them (the runner starts a
 * message's tools together; memory calls must not overtake each other). A result gitmem marks
 * as an error is thrown, so the runner answers it with `is_error: true` and the same text. A call
 * gitmem did not answer with a tool_result throws a `GitmemError`, which `middleware` turns into
 * the run's own error.
 */
export function gitmemMemoryTool(options: GitmemMemoryToolOptions): GitmemMemoryTool {
  const doFetch = options.fetch ?? globalThis.fetch;
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (options.token) headers['Authorization'] = `Bearer ${options.token}`;
  if (options.session) headers['Gitmem-Session'] = options.session;
  if (options.agent) headers['Gitmem-Agent'] = options.agent;

  // The calls that failed with a GitmemError, by tool_use id, for the middleware.
  const failures = new Map<string, GitmemError>();

  async function request(id: string, input: MemoryCommand, context: MemoryToolRunContext | undefined): Promise<ToolResult> {
    let response: Response;
    let text: string;
    try {
      response = await doFetch(options.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ type: 'tool_use', id, name: 'memory', input }),
        signal: context?.signal ?? null,
      });
      text = await response.text();
    } catch (e) {
      throw new GitmemError(`gitmem could not be reached at ${String(options.url)}: ${e instanceof Error ? e.message : String(e)}`, undefined, { cause: e });
    }
    if (!response.ok) {
      let message = text.trim();
      try {
        message = (JSON.parse(text) as { error?: string }).error ?? message;
      } catch {
        // not JSON: the text as it came
      }
      throw new GitmemError(`gitmem answered ${response.status}: ${message}`, response.status);
    }
    let result: ToolResult | undefined;
    try {
      result = JSON.parse(text) as ToolResult;
    } catch {
      // below
    }
    if (typeof result?.content !== 'string' || result.tool_use_id !== id) {
      throw new GitmemError(`gitmem's answer is not the tool_result of ${id}: ${text.slice(0, 200)}`, response.status);
    }
    return result;
  }

  async function call(input: MemoryCommand, context: MemoryToolRunContext | undefined): Promise<string> {
    const id = context?.toolUse?.id;
    if (!id) {
      throw new Error('the memory tool needs the tool_use id: run it through the SDK tool runner, which passes context.toolUse');
    }
    let result: ToolResult;
    try {
      result = await request(id, input, context);
    } catch (e) {
      if (e instanceof GitmemError) {
        failures.set(id, e);
        for (const old of failures.keys()) {
          if (failures.size <= maxFailures) break;
          failures.delete(old);
        }
      }
      throw e;
    }
    if (result.is_error) {
      // The runner words a thrown error as "Error: " + its message: gitmem's text exactly.
      throw new Error(result.content.replace(/^Error: /, ''));
    }
    return result.content;
  }

  async function middleware<R extends { body?: unknown }>(req: R, next: (request: R) => Promise<Response>): Promise<Response> {
    if (failures.size > 0 && typeof req.body === 'string') {
      for (const [id, error] of failures) {
        if (req.body.includes(JSON.stringify(id))) throw error;
      }
    }
    return next(req);
  }

  let tail: Promise<unknown> = Promise.resolve();
  return {
    ...options.extraProps,
    type: 'memory_20250818',
    name: 'memory',
    parse: (content: unknown) => content as MemoryCommand,
    run(args: MemoryCommand, context?: MemoryToolRunContext): Promise<string> {
      const result = tail.then(() => call(args, context));
      tail = result.catch(() => undefined);
      return result;
    },
    middleware,
  };
}
