package gitmem

import (
	"time"
)

// The commit pipeline. A change becomes durable with one fdatasync, shared
// by every change waiting at that moment (group commit):
//
//  1. prepare (under the writer turn; the committer, committer.go): the
//     transaction's objects are encoded and hashed in memory and the
//     commit becomes the writer's tip (published.go). The next
//     transaction builds on it at once; readers do not see it yet.
//  2. durable (group commit): the first waiter writes every prepared
//     commit to the write-ahead log (logfiles.go, over gitdir.WAL) and
//     fdatasyncs once; then the commits are published to readers
//     (Snapshot) and their callers acknowledged. The log has two files:
//     appends go to one while a checkpoint empties the other.
//  3. materialise (in the background: the maintainer, maintain.go; and
//     before any operation that reads git's own files; the commits wait
//     in the backlog, backlog.go, and are written under the disk lock,
//     materialise.go): the objects, the branch and the worktree files
//     are written, without an fsync each, and the history index is
//     appended. git and other processes see the commit from here on.
//     With Options.MaterialiseEvery, a change waits up to that long for
//     the maintainer, which writes all that waits at once.
//  4. checkpoint (checkpoint.go; at most every Options.CheckpointEvery
//     (default checkpointEvery), when the
//     log grows, and before the writer lock is released): the log
//     switches files; what was materialised is made durable with one
//     syncfs; the old file is emptied.
//
// A crash at any point loses nothing acknowledged: the next owner of the
// writer lock replays the log (the objects are in it, raw, so the hashes
// are the same), then checkpoints.
//
// The process keeps the writer lock while it writes and gives it up when
// it has been idle for releaseIdle and .git/index holds its changes (see
// Repo.idleToRelease), or as soon as another process queues
// for it (.git/gitmem/intent), after a checkpoint: the lock's holder is
// the only one with a non-empty log.

const (
	checkpointEvery = time.Second
	checkpointBytes = 16 << 20
	foldBelow       = 1024      // a group of fewer objects ...
	foldBelowBytes  = 256 << 10 // ... and fewer bytes waits in memory to be folded
	foldAt          = 32        // folded once this many wait ...
	foldBytes       = 8 << 20   // ... or they hold this much
	releaseIdle     = 200 * time.Millisecond
	backlogWait     = 10 * time.Second
	spareAt         = 32 << 10
	spareCap        = checkpointBytes + 4<<20
	pollEvery       = 10 * time.Millisecond
	pollLate        = 100 * time.Millisecond // pollEvery's bound with MaterialiseEvery (Options.pollEvery)
)

// pollEvery is how often the maintenance loop looks for work besides the
// changes that wake it: another process waiting for the writer lock (two
// flocks of the intent lock), a checkpoint, materialisation or idle
// release due. With changes written late (MaterialiseEvery) a twentieth
// of that, up to pollLate: what it looks for comes that rarely, and under
// serve --stores (2 s) a hundred busy stores looked 10,000 times a
// second, 8% of the server's CPU (issue 25). A process waiting for a
// store's writer lock waits up to pollLate for it to be let go.
func (o *Options) pollEvery() time.Duration {
	return min(max(o.MaterialiseEvery/20, pollEvery), pollLate)
}

// initPipeline makes the pipeline's parts (the mirror, which the
// committer tells of the paths in flight, is made before).
func (r *Repo) initPipeline() {
	r.committer = committer{queue: &batch{}, log: &r.log, state: &r.state, backlog: &r.backlog, objs: r.objects.st,
		ids: r.toolIDs, paths: r.mirror, hist: r.histIndex, maint: &r.maint, opt: &r.opt}
	r.maint = newMaintainer(r.opt.ReleaseIdle)
	r.disk.setCheckpointEvery(r.opt.CheckpointEvery)
	r.backlog = newBacklog()
	r.mat = &materialiser{disk: &r.disk, log: &r.log, backlog: &r.backlog, state: &r.state, objs: &r.objects,
		mirror: r.mirror, hist: r.histIndex, follow: r, branches: r, gitDir: r.gitDir, branch: &r.branch, life: r.life, opt: &r.opt}
}
