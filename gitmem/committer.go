package gitmem

import (
	"slices"
	"time"

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
	read         map[string][]byte        // an adopt's: the worktree files it read (repository paths), before any merge
	commit       Commit
	done         bool // published (durable)
	// plain: tree is its parent's with only paths changed (a
	// transaction's own edits, mirrored; no merge, no fast-forward).
	plain bool
}

// batch is a group of prepared commits written with one fdatasync.
type batch struct {
	items []*prepared
}

// prepare encodes tx as a commit on the writer's tip, in memory, and makes
// it the new tip. Called with wmu held, after own.
func (r *Repo) prepare(tx *Tx, meta Meta) (*prepared, error) {
	if !tx.ff.IsZero() {
		return r.prepareFastForward(tx) // a pull (share.go)
	}
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
		author.Name = r.opt.Author.Name
	}
	if author.Email == "" {
		author.Email = r.opt.Author.Email
	}
	author = author.safe()
	when := r.opt.Now()
	meta.Trailers = append(mergeTrailers(meta.Trailers, tx.trailers), tx.extra...)
	if tx.subject != "" {
		meta.Subject = tx.subject
	}
	msg := meta.message()
	parents := append(parentList(tx.head), tx.merged...)
	raw, err := encodeCommit(treeHash, parents, author, r.opt.Committer, when, msg)
	if err != nil {
		return nil, wrap("encode the commit", err)
	}
	h, _ := put(plumbing.CommitObject, raw, plumbing.ZeroHash)
	_, body, trailers := parseMessage(msg)
	subject := oneLine(meta.Subject)
	p := &prepared{hash: h, parent: tx.head, tree: tx.root, objs: objs, id: meta.ID(), merged: tx.mergedIDs,
		rec: newRec(h, parents, when, author, subject, trailers)}
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
	p.commit = Commit{Hash: h.String(), Parents: ps, Author: author, Committer: r.opt.Committer,
		Time: when, Subject: subject, Body: body, Trailers: trailers}
	return r.enqueue(p, tx.head)
}

// enqueue makes a prepared commit the writer's tip and queues it for the
// log. Called with wmu held. The check, the new tip and the place in the
// queue are one step under qmu: a group failing meanwhile (dropQueued)
// either drops this commit with it or is seen here, never half of each,
// so that no commit built on a dropped one is queued or left waiting.
func (r *Repo) enqueue(p *prepared, base plumbing.Hash) (*prepared, error) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	// The new tip, unless the pipeline dropped what this was built on.
	// Its objects are readable at once: the next transaction may build on
	// it before it is durable.
	err := r.state.advance(base, p.hash, p.tree, func() {
		r.toolIDs.expect(p)
		r.obj.Put(p.objs)
	})
	if err != nil {
		return nil, err
	}
	r.pmu.Lock()
	for _, q := range p.paths {
		r.inflight.add(q)
	}
	r.pmu.Unlock()
	r.queue.items = append(r.queue.items, p)
	return p, nil
}

// durable returns once p is in the log and published, or with the error
// that kept its group from being written. The first caller to find its
// group unwritten writes it, and every other group member's with it.
func (r *Repo) durable(p *prepared) error {
	a := r.log.beginAppend()
	defer a.end()
	if p.done {
		return nil
	}
	r.qmu.Lock()
	b := r.queue
	if !slices.Contains(b.items, p) {
		// p's group failed before we got here. What was queued since
		// is a later group's: its own callers write it.
		r.qmu.Unlock()
		return r.state.failure()
	}
	r.queue = &batch{}
	r.qmu.Unlock()
	return r.writeBatch(a, b)
}

// writeBatch writes a group to the log, then publishes it. On failure
// every commit built on the group (the group after it too) is dropped and
// the tip goes back to what is durable.
func (r *Repo) writeBatch(a appending, b *batch) error {
	recs := make([]gd.WALRecord, len(b.items))
	for i, p := range b.items {
		recs[i] = gd.WALRecord{Head: p.hash, Parent: p.parent, Paths: p.paths, Objects: p.objs}
	}
	err := r.state.brokenErr()
	full := false
	if err == nil {
		full, err = a.append(recs)
	}
	if err != nil {
		return r.dropQueued(b, wrap("write the change to the log", err))
	}
	r.publish(b.items)
	if full {
		r.signal()
	}
	return nil
}

// publish makes durable commits visible: their blobs to readers, their
// state to Snapshot, their records to the history index, and queues them
// for materialisation.
func (r *Repo) publish(items []*prepared) {
	last := items[len(items)-1]
	r.state.publish(last.hash, last.tree, func() { r.toolIDs.durable(items) })
	r.histIndex.appendPublished(items)
	r.backlog.add(items)
	for _, p := range items {
		p.done = true
	}
	r.lastUse.Store(time.Now().UnixNano())
	r.signal()
}

// dropQueued fails a group and everything prepared after it, and sets the
// tip back to what is durable. Until a checkpoint succeeds nothing more is
// written: the log may hold part of the failed group.
func (r *Repo) dropQueued(b *batch, err error) error {
	r.qmu.Lock()
	dropped := append(slices.Clip(b.items), r.queue.items...)
	r.queue = &batch{}
	r.state.rollback(err, func() { r.toolIDs.dropped(dropped) })
	r.qmu.Unlock()
	r.pmu.Lock()
	for _, p := range dropped {
		r.obj.Drop(p.objs)
		for _, q := range p.paths {
			r.inflight.done(q)
		}
	}
	r.pmu.Unlock()
	r.opt.Errorf("gitmem: %v; %d change(s) refused", err, len(dropped))
	r.signal()
	return err
}

// drain writes whatever is queued. Called with wmu held, so nothing new
// is prepared meanwhile.
func (r *Repo) drain() {
	r.qmu.Lock()
	var last *prepared
	if n := len(r.queue.items); n > 0 {
		last = r.queue.items[n-1]
	}
	r.qmu.Unlock()
	if last != nil {
		r.durable(last)
	}
}
