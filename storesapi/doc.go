// Package storesapi is the HTTP API over a folder of stores (package
// stores), served from one process: POST /v1/stores/{store}/tool_use, the
// memory tool endpoint of each store (a handler.Handler per call); the
// operator API of docs/openapi.yaml (stores, memories, versions, revert,
// restore, redact: the functions of package operator, as the CLI calls
// them); Anthropic's Memory Stores API under /v1/memory_stores (package
// memstore's memories and versions, in the objects and errors of the
// official SDKs: docs/memory-stores.md); and scoped tokens (Tokens), all
// behind the checks every gitmem HTTP route has
// (handler.HTTPOptions.Protect).
package storesapi
