// Package policy holds gitmem's pure rules: how a model's /memories path is
// validated and mapped to a path inside the store, the size and count limits,
// how file views are numbered and paginated, how sizes are printed, the
// secret rules that screen what the model writes, and the multi-store
// server's rules (store names and metadata, tokens and their scopes).
//
// Nothing here does I/O. Every function is deterministic, so the rules can be
// table-tested and fuzzed on their own; the handler applies them, the store
// never sees a path that did not pass ParsePath.
package policy
