// Package gitmem is the store behind the memory tool: a git repository
// whose memories/ folder is the model's /memories, where every change is
// exactly one commit.
//
// A Repo keeps HEAD's tree in memory as immutable nodes. Update runs a
// function on a transaction (Tx) over that tree and commits what it
// changed: the blob, the trees on the changed paths and the commit are
// made durable in the write-ahead log, then written as a pack (kept from
// git's gc for good: see gitdir.Keep), the branch moves the way git moves
// it (lock file, rename), and the worktree is mirrored, so a mutation
// costs the size of what it touches, not of the memory or its history.
// Snapshot gives readers an immutable View. Every gitmem process on a
// repository shares one writer lock (.git/gitmem/lock).
//
// The history index (.git/gitmem/history) records each commit's trailers
// and changed files; Log, Blame, Resolve, StaleFiles and the tool_use id
// retries read it instead of walking git. It is a cache: caught up from
// git when the branch moved elsewhere, and saved by whichever process
// caught it up (see history.go); a writer reads the tool_use ids of the
// commits it lacks first and catches it up in the background. Revert,
// Restore, Expire, Redact and GC are the operator's tools.
//
// This package knows git and nothing of JSON, HTTP or the tool protocol.
// Its errors are its own (ErrNotExist, *AppliedError, *StorageError, ...):
// no go-git error or host path leaves it.
package gitmem
