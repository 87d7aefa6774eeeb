// Package handler implements the memory tool protocol (memory_20250818)
// over a gitmem store: it parses tool_use blocks, validates them with the
// policy package, runs them against the store and renders the exact result
// strings of docs/protocol.md. Its transports (stdio, HTTP, and MCP over
// stdio or streamable HTTP) are thin framings over the one Handler.
//
// StoresHTTP serves many stores (package stores) from one process: the
// same tool_use endpoint per store, scoped tokens (Tokens), and the
// operator API of docs/openapi.yaml, behind the checks every HTTP route
// has.
package handler
