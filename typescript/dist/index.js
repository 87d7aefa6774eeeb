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
/**
 * gitmem could not be reached, refused the request (`status`: a wrong token is 401, a busy server
 * 503), or did not answer with a tool_result. Nothing reached the memory, unless the answer was
 * lost after gitmem applied the call: running the same call again (its `tool_use` id) is safe.
 */
export class GitmemError extends Error {
    name = 'GitmemError';
    /** The HTTP status gitmem answered with; undefined when there was no answer. */
    status;
    constructor(message, status, options) {
        super(message, options);
        this.status = status;
    }
}
/** How many failed calls the middleware remembers (the last ones). */
const maxFailures = 100;
/**
 * The memory tool for `client.beta.messages.toolRunner({ tools: [...] })`. Each call goes to gitmem
 * with its `tool_use` id, one at a time in the order the runner starts them (the runner starts a
 * message's tools together; memory calls must not overtake each other). A result gitmem marks
 * as an error is thrown, so the runner answers it with `is_error: true` and the same text. A call
 * gitmem did not answer with a tool_result throws a `GitmemError`, which `middleware` turns into
 * the run's own error.
 */
export function gitmemMemoryTool(options) {
    const doFetch = options.fetch ?? globalThis.fetch;
    const headers = { 'Content-Type': 'application/json' };
    if (options.token)
        headers['Authorization'] = `Bearer ${options.token}`;
    if (options.session)
        headers['Gitmem-Session'] = options.session;
    if (options.agent)
        headers['Gitmem-Agent'] = options.agent;
    // The calls that failed with a GitmemError, by tool_use id, for the middleware.
    const failures = new Map();
    async function request(id, input, context) {
        let response;
        let text;
        try {
            response = await doFetch(options.url, {
                method: 'POST',
                headers,
                body: JSON.stringify({ type: 'tool_use', id, name: 'memory', input }),
                signal: context?.signal ?? null,
            });
            text = await response.text();
        }
        catch (e) {
            throw new GitmemError(`gitmem could not be reached at ${String(options.url)}: ${e instanceof Error ? e.message : String(e)}`, undefined, { cause: e });
        }
        if (!response.ok) {
            let message = text.trim();
            try {
                message = JSON.parse(text).error ?? message;
            }
            catch {
                // not JSON: the text as it came
            }
            throw new GitmemError(`gitmem answered ${response.status}: ${message}`, response.status);
        }
        let result;
        try {
            result = JSON.parse(text);
        }
        catch {
            // below
        }
        if (typeof result?.content !== 'string' || result.tool_use_id !== id) {
            throw new GitmemError(`gitmem's answer is not the tool_result of ${id}: ${text.slice(0, 200)}`, response.status);
        }
        return result;
    }
    async function call(input, context) {
        const id = context?.toolUse?.id;
        if (!id) {
            throw new Error('the memory tool needs the tool_use id: run it through the SDK tool runner, which passes context.toolUse');
        }
        let result;
        try {
            result = await request(id, input, context);
        }
        catch (e) {
            if (e instanceof GitmemError) {
                failures.set(id, e);
                for (const old of failures.keys()) {
                    if (failures.size <= maxFailures)
                        break;
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
    async function middleware(req, next) {
        if (failures.size > 0 && typeof req.body === 'string') {
            for (const [id, error] of failures) {
                if (req.body.includes(JSON.stringify(id)))
                    throw error;
            }
        }
        return next(req);
    }
    let tail = Promise.resolve();
    return {
        ...options.extraProps,
        type: 'memory_20250818',
        name: 'memory',
        parse: (content) => content,
        run(args, context) {
            const result = tail.then(() => call(args, context));
            tail = result.catch(() => undefined);
            return result;
        },
        middleware,
    };
}
