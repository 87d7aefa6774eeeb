// Package operator is what an operator does to one memory, shared by the
// CLI and the HTTP operator API (docs/openapi.yaml) so that each operation
// has one implementation: naming a revision (a tool_use id, a hash, a git
// revision or a time), a change's patch, pages of versions and of memory
// files, reading a memory with what last changed it, writing or deleting
// one as an operator commit under a content precondition, checking what a
// redaction removes, and scanning the history for secrets; and the JSON
// shapes of a change and of a memory that `gitmem ... --json` and the API
// print alike.
//
// It knows gitmem, not HTTP, nor a folder of stores (package stores).
package operator
