// Package handler implements the memory tool protocol (memory_20250818)
// over a gitmem store: it parses tool_use blocks, validates them with the
// policy package, runs them against the store and renders the exact result
// strings of docs/protocol.md. Its transports (stdio, HTTP, and MCP over
// stdio or streamable HTTP) are thin framings over the one Handler.
//
// It knows gitmem and policy only. The multi-store HTTP server (package
// storesapi) is built on ServeToolUse, HTTPOptions.Protect, WriteJSON,
// HTTPError and ReadBody.
package handler
