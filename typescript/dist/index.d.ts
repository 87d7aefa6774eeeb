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
/** A memory command, as the model sends it (the SDK's `BetaMemoryTool20250818Command`). */
export type MemoryCommand = {
    command: 'view';
    path: string;
    view_range?: Array<number>;
} | {
    command: 'create';
    path: string;
    file_text: string;
} | {
    command: 'str_replace';
    path: string;
    old_str: string;
    new_str: string;
} | {
    command: 'insert';
    path: string;
    insert_line: number;
    insert_text: string;
} | {
    command: 'delete';
    path: string;
} | {
    command: 'rename';
    old_path: string;
    new_path: string;
};
/** What the tool runner passes to `run`: the call being served, whose id gitmem records. */
export interface MemoryToolRunContext {
    toolUse: {
        id: string;
    };
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
    extraProps?: {
        cache_control?: {
            type: 'ephemeral';
            ttl?: '5m' | '1h';
        } | null;
    } | undefined;
}
/** The memory tool, in the shape of the SDK's `BetaRunnableTool<MemoryCommand>`. */
export interface GitmemMemoryTool {
    type: 'memory_20250818';
    name: 'memory';
    cache_control?: {
        type: 'ephemeral';
        ttl?: '5m' | '1h';
    } | null;
    parse: (content: unknown) => MemoryCommand;
    run: (args: MemoryCommand, context?: MemoryToolRunContext) => Promise<string>;
}
/**
 * The memory tool for `client.beta.messages.toolRunner({ tools: [...] })`. Each call goes to gitmem
 * with its `tool_use` id, one at a time in the order the runner starts them (the runner starts a
 * message's tools together; memory calls must not overtake each other). A result gitmem marks
 * as an error is thrown, so the runner answers it with `is_error: true` and the same text.
 */
export declare function gitmemMemoryTool(options: GitmemMemoryToolOptions): GitmemMemoryTool;
