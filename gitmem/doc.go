// Package gitmem is the store behind the memory tool: a git repository
// whose memories/ folder is the model's /memories, where every change is
// exactly one commit.
//
// A Repo keeps HEAD's tree in memory as immutable nodes. Update runs a
// function on a transaction (Tx) over that tree and commits what it
// changed: the blob, the trees on the changed paths and the commit are
// made durable in the write-ahead log (its fdatasync is the commit
// point: Update returns after it), then written as a pack (kept from
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
// Every call that can wait takes a context first, and gives up (writing
// nothing) when it ends or when Close begins.
//
// A Repo is a composition of parts, each a struct that owns its state and
// the lock beside it (parts_test.go checks that no other file touches
// them): the writer lease and turn (turn.go, lease.go), the committer
// and the write-ahead log's files (committer.go, logfiles.go), the
// published state and the tool_use ids (published.go, toolids.go), the
// backlog and the materialiser that writes git's files and has the
// worktree follow (backlog.go, materialise.go, checkpoint.go), the
// maintainer's background loop (maintain.go), the worktree mirror with
// hand-edit adoption (mirror.go, handedit.go, drift.go, repairs.go),
// .git/index (index.go), the history index and its reads (history.go,
// histread.go), commits plain git made (plaingit.go), the object store
// (objects.go), the sharer (share*.go) and the collector (gc.go). Their
// one lock order, what each owns and the life of one call are in
// docs/design.md.
//
// This package knows git and nothing of JSON, HTTP or the tool protocol.
// Its errors are its own (ErrNotExist, *AppliedError, *StorageError, ...):
// no go-git error or host path leaves it.
package gitmem
