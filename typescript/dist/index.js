/**
 * Claude's memory tool (`memory_20250818`) for `@anthropic-ai/sdk`'s `toolRunner`, answered by
 * `gitmem serve --http`: every change the model makes to its memory is a git commit that names
 * the call's `tool_use` id.
 *
 * ```ts
 * const memory = gitmemMemoryTool({ url: 'http://127.0.0.1:7077/v1/tool_use', session: 'user-42' });
 * const runner = client.beta.messages.toolRunner({ model, max_tokens, messages, tools: [memory],
 *   betas: ['context-management-2025-06-27'] });
 * ```
 *
 * No dependencies: it needs only `fetch`.
 */
/**
 * The memory tool for `client.beta.messages.toolRunner({ tools: [...] })`. Each call goes to gitmem
 * with its `tool_use` id, one at a time in the order the runner starts them (the runner starts a
 * message's tools together; memory calls must not overtake each other). A result gitmem marks
 * as an error is thrown, so the runner answers it with `is_error: true` and the same text.
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
    async function call(input, context) {
        const id = context?.toolUse?.id;
        if (!id) {
            throw new Error('the memory tool needs the tool_use id: run it through the SDK tool runner, which passes context.toolUse');
        }
        const response = await doFetch(options.url, {
            method: 'POST',
            headers,
            body: JSON.stringify({ type: 'tool_use', id, name: 'memory', input }),
            signal: context?.signal ?? null,
        });
        const text = await response.text();
        if (!response.ok) {
            let message = text.trim();
            try {
                message = JSON.parse(text).error ?? message;
            }
            catch {
                // not JSON: the text as it came
            }
            throw new Error(`gitmem answered ${response.status}: ${message}`);
        }
        const result = JSON.parse(text);
        if (result.is_error) {
            // The runner words a thrown error as "Error: " + its message: gitmem's text exactly.
            throw new Error(result.content.replace(/^Error: /, ''));
        }
        return result.content;
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
    };
}
