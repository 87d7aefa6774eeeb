package gitmem

import (
	"slices"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// prepared is a commit that exists in memory and in the log (once durable)
// but maybe not yet in git's files.
type prepared struct {
	hash, parent plumbing.Hash
	tree         *node
	objs         []gd.Object
	paths        []string // repository paths it changes in the worktree
	rec          histRec
	id           string
	merged       map[string]plumbing.Hash // tool_use ids of the commits a merge or fast-forward brings (share.go)
	adopt        *adoptNote               // an adopt's: what it read and took (nil: no adopt)
	pulled       [][2]string              // a pull's: where the renames it brings moved files (Tx.pulled)
	commit       Commit
	done         bool // published (durable)
	// plain: tree is its parent's with only paths changed (a
	// transaction's own edits, mirrored; no merge, no fast-forward).
	plain bool
}

// moves is what p moved in the memory folder (repository paths, from
// and to, in order): a rename commit's file or folder (its Memory-Path
// and Memory-New-Path), where a pull's renames moved files (pulled:
// those of every rename commit a fast-forward brings, or the files a
// merge moved where the remote renamed them), or the hand edits an adopt
// merged into a file a rename had moved (adoptNote.moved).
func (p *prepared) moves() [][2]string {
	if p.adopt != nil {
		return p.adopt.moved
	}
	if p.pulled != nil {
		return p.pulled
	}
	if p.rec.command != "rename" {
		return nil
	}
	from, ok := strings.CutPrefix(p.rec.path, "/"+memDir+"/")
	to, ok2 := strings.CutPrefix(p.rec.newPath, "/"+memDir+"/")
	if !ok || !ok2 || from == "" || to == "" {
		return nil
	}
	return [][2]string{{full(from), full(to)}}
}

// batch is a group of prepared commits written with one fdatasync.
type batch struct {
	items []*prepared
}

// committer turns a transaction into a durable commit: prepare encodes
// it in memory and makes it the writer's tip (under the writer turn);
// durable appends its group to the write-ahead log with one fdatasync
// (the commit point); publish makes the group readers' HEAD, notes its
// tool_use ids and history, and hands it to the materialiser (backlog).
type committer struct {
	// queueMu guards queue, the group being filled. In the lock order it
	// comes after logFiles.mu (durable takes it with the log held) and
	// before published.mu.
	queueMu sync.Mutex
	queue   *batch

	log     *logFiles
	state   *published
	backlog *backlog
	objs    *gd.Store // prepared objects are readable from memory (Put) until materialised
	ids     toolUseSink
	paths   pathsInFlight
	hist    historySink
	maint   *maintainer // woken when a group was published or a checkpoint is due
	opt     *Options    // Author, Committer, Now, Errorf
}

// toolUseSink keeps the tool_use ids of commits in flight and made
// (toolUseIDs), so that a retry finds the first call's commit. Each
// method runs inside published.mu.
type toolUseSink interface {
	expect(p *prepared)        // p is prepared: its ids are in flight
	durable(items []*prepared) // the group is durable: its ids are done
	dropped(ps []*prepared)    // they failed: their ids are free again
}

// pathsInFlight tracks the worktree paths of commits not yet
// materialised (the mirror's repairs).
type pathsInFlight interface {
	inFlight(p *prepared)
	droppedPaths(ps []*prepared)
}

// historySink appends published commits to the history index in memory
// (historyIndex).
type historySink interface {
	appendPublished(items []*prepared)
}

// prepare encodes tx as a commit on the writer's tip, in memory, and makes
// it the new tip. Called with the writer turn held, after own.
func (r *Repo) prepare(tx *Tx, meta Meta) (*prepared, error) {
	if !tx.ff.IsZero() {
		return r.prepareFastForward(tx) // a pull (share.go)
	}
	return r.committer.prepare(tx, meta)
}

// prepare encodes tx (not a fast-forward) as a commit on the writer's
// tip and enqueues it. Called with the writer turn held, after own.
func (c *committer) prepare(tx *Tx, meta Meta) (*prepared, error) {
	var objs []gd.Object
	put := func(t plumbing.ObjectType, data []byte, base plumbing.Hash) (plumbing.Hash, error) {
		h := plumbing.ComputeHash(t, data)
		objs = append(objs, gd.Object{Type: t, Hash: h, Data: data, Base: base})
		return h, nil
	}
	blobs := map[plumbing.Hash]bool{}
	for _, o := range tx.ops { // the blobs written that the final tree still holds
		if o.kind != 'w' {
			continue
		}
		if n := lookup(tx.root, full(o.to)); n.isFile() && !blobs[n.hash] {
			if data, ok := tx.pending[n.hash]; ok {
				blobs[n.hash] = true
				put(plumbing.BlobObject, data, plumbing.ZeroHash)
			}
		}
	}
	treeHash, _ := writeTrees(put, tx.root, tx.base)
	author := meta.Author
	if author.Name == "" {
		author.Name = c.opt.Author.Name
	}
	if author.Email == "" {
		author.Email = c.opt.Author.Email
	}
	author = author.safe()
	when := c.opt.Now()
	meta.Trailers = append(mergeTrailers(meta.Trailers, tx.trailers), tx.extra...)
	if tx.subject != "" {
		meta.Subject = tx.subject
	}
	msg := meta.message()
	parents := append(parentList(tx.head), tx.merged...)
	raw, err := encodeCommit(treeHash, parents, author, c.opt.Committer, when, msg)
	if err != nil {
		return nil, wrap("encode the commit", err)
	}
	h, _ := put(plumbing.CommitObject, raw, plumbing.ZeroHash)
	_, body, trailers := parseMessage(msg)
	subject := oneLine(meta.Subject)
	p := &prepared{hash: h, parent: tx.head, tree: tx.root, objs: objs, id: meta.ID(), merged: tx.mergedIDs, pulled: tx.pulled,
		adopt: tx.adopt, rec: newRec(h, parents, when, author, subject, trailers)}
	diffNodes(lookup(tx.base, memDir), lookup(tx.root, memDir), "", p.rec.change)
	p.rec.sortPaths()
	if tx.mirror {
		p.paths = tx.touched()
		p.plain = len(tx.merged) == 0
	}
	var ps []string
	for _, q := range parents {
		ps = append(ps, q.String())
	}
	p.commit = Commit{Hash: h.String(), Parents: ps, Author: author, Committer: c.opt.Committer,
		Time: when, Subject: subject, Body: body, Trailers: trailers}
	return c.enqueue(p, tx.head)
}

// enqueue makes a prepared commit the writer's tip and queues it for the
// log. Called with the writer turn held. The check, the new tip and the place in the
// queue are one step under queueMu: a group failing meanwhile
// (dropQueued) either drops this commit with it or is seen here, never
// half of each, so that no commit built on a dropped one is queued or
// left waiting.
func (c *committer) enqueue(p *prepared, base plumbing.Hash) (*prepared, error) {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	// The new tip, unless the pipeline dropped what this was built on.
	// Its objects are readable at once: the next transaction may build on
	// it before it is durable.
	err := c.state.advance(base, p.hash, p.tree, func() {
		c.ids.expect(p)
		c.objs.Put(p.objs)
	})
	if err != nil {
		return nil, err
	}
	c.paths.inFlight(p)
	c.queue.items = append(c.queue.items, p)
	return p, nil
}

// durable returns once p is in the log and published, or with the error
// that kept its group from being written. The first caller to find its
// group unwritten writes it, and every other group member's with it.
func (c *committer) durable(p *prepared) error {
	a := c.log.beginAppend()
	defer a.end()
	if p.done {
		return nil
	}
	c.queueMu.Lock()
	b := c.queue
	if !slices.Contains(b.items, p) {
		// p's group failed before we got here. What was queued since
		// is a later group's: its own callers write it.
		c.queueMu.Unlock()
		return c.state.failure()
	}
	c.queue = &batch{}
	c.queueMu.Unlock()
	return c.writeBatch(a, b)
}

// writeBatch writes a group to the log, then publishes it. On failure
// every commit built on the group (the group after it too) is dropped and
// the tip goes back to what is durable.
func (c *committer) writeBatch(a appending, b *batch) error {
	recs := make([]gd.WALRecord, len(b.items))
	for i, p := range b.items {
		recs[i] = gd.WALRecord{Head: p.hash, Parent: p.parent, Paths: p.paths, Objects: p.objs}
	}
	err := c.state.brokenErr()
	full := false
	if err == nil {
		full, err = a.append(recs)
	}
	if err != nil {
		return c.dropQueued(b, wrap("write the change to the log", err))
	}
	c.publish(b.items)
	if full {
		c.maint.signal()
	}
	return nil
}

// publish makes durable commits visible: their blobs to readers, their
// state to Snapshot, their records to the history index, and queues them
// for materialisation.
func (c *committer) publish(items []*prepared) {
	last := items[len(items)-1]
	c.state.publish(last.hash, last.tree, func() { c.ids.durable(items) })
	c.hist.appendPublished(items)
	c.backlog.add(items)
	for _, p := range items {
		p.done = true
	}
	c.maint.used()
	c.maint.signal()
}

// dropQueued fails a group and everything prepared after it, and sets the
// tip back to what is durable. Until a checkpoint succeeds nothing more is
// written: the log may hold part of the failed group.
func (c *committer) dropQueued(b *batch, err error) error {
	c.queueMu.Lock()
	dropped := append(slices.Clip(b.items), c.queue.items...)
	c.queue = &batch{}
	c.state.rollback(err, func() { c.ids.dropped(dropped) })
	c.queueMu.Unlock()
	for _, p := range dropped {
		c.objs.Drop(p.objs)
	}
	c.paths.droppedPaths(dropped)
	c.opt.Errorf("gitmem: %v; %d change(s) refused", err, len(dropped))
	c.maint.signal()
	return err
}

// drain writes whatever is queued. Called with the writer turn held, so nothing new
// is prepared meanwhile.
func (c *committer) drain() {
	c.queueMu.Lock()
	var last *prepared
	if n := len(c.queue.items); n > 0 {
		last = c.queue.items[n-1]
	}
	c.queueMu.Unlock()
	if last != nil {
		c.durable(last)
	}
}

// queued is how many commits wait for the log.
func (c *committer) queued() int {
	c.queueMu.Lock()
	defer c.queueMu.Unlock()
	return len(c.queue.items)
}
