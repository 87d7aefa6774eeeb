// Package memstore is a gitmem store seen as a Memory Store of Anthropic's
// Memory Stores API: memories with ids that survive renames, and versions
// with ids that survive redactions, over a gitmem repository whose
// memories/ folder stays the memory tool's /memories (a memory at path P
// is the file memories/P). It knows gitmem's public API and nothing of
// HTTP (package storesapi serves it) or of a folder of stores (package
// stores).
//
// # Ids
//
// A memory created through this package gets a random id (mem_...), and
// its commit carries it in a Memory-Id trailer with the version's id
// (Memory-Version: memver_...). A memory that appears any other way (the
// memory tool's create, a hand edit, a merge, an operator's put) gets an
// id derived from the commit that made it: a hash of the commit's stable
// key and the path. A commit's stable key is its place on the
// first-parent chain, its author, time, subject and trailers: what a
// redaction keeps (it rewrites trees, so every commit from the first it
// touches gets a new hash, but keeps messages, identities, dates and the
// shape of the graph). Ids are so the same in every clone, and after a
// redaction.
//
// A memory keeps its id when it is renamed: by an update here (the
// Memory-Id trailer names it, Memory-Path and Memory-New-Path say where it
// went) or by the memory tool's rename (Memory-Path -> Memory-New-Path; a
// folder's rename moves every memory in it). A path deleted and written
// again is a new memory.
//
// # Versions
//
// A version is one memory changed by one commit of the first-parent chain:
// created (the path appeared), modified (its content or path changed) or
// deleted. A commit that changes several memories (a folder renamed or
// deleted by the memory tool, a restore, a merge) makes one version of
// each. Versions of this package's commits have the Memory-Version id;
// the others, a hash of the commit's stable key and the memory id. Store
// metadata commits (package stores) and commits that change nothing make
// none.
//
// # The index
//
// Index is what maps ids to paths and commits without a scan: built from
// gitmem's history index (Log gives each commit's trailers, changed paths
// and their blobs) when the store is first used, kept in memory while the
// store is open (stores.Store.Cache), extended by the commits made since
// (an unchanged store costs one comparison of the head), and rebuilt when
// the history was rewritten (a redaction). gitmem's history index is
// already the persisted record of exactly what this needs, kept right
// through crashes, pulls, plain git commits and redactions; a second file
// would be a second cache to keep right, and derived ids would not need
// it.
//
// Writes are one commit each (gitmem's Update, with its group commit: many
// writes in flight share a log sync). Under the writer lock, each write
// checks that the index describes the commit it builds on: the index
// knows the writes of this package in flight (each recognised by its
// Memory-Version trailer); any other commit made since (a tool call, an
// operator's edit, another process) makes the write catch up and run
// again.
//
// # Redaction
//
// Redact removes a version's content from every git object of the store:
// gitmem's Redact with the version's blob and a placeholder that keeps
// every commit's changed paths (so versions stay versions), then a commit
// recording which versions it redacted (Memory-Command: redact, one
// Memory-Redacted trailer each), by whom and when. Every version that held
// the same bytes loses them too (git stores content once). Content a
// memory holds now is refused: only the past is redacted.
package memstore
