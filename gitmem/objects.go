package gitmem

import (
	"slices"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// objects is the object store every part of this process reads and
// writes through: go-git's storage, the packs it opened and their caches,
// which are not safe for concurrent use, and the overlay of objects
// durable in the write-ahead log but not yet in git's files (Put, Drop,
// View: lock-free, with the store's own lock). The functions commented
// "Called with objects.mu held" run with mu held.
type objects struct {
	// mu guards st's storage, pack handles and caches. In the lock order
	// it comes after historyIndex.mu, before the leaves; a long read (a
	// redaction's rewrite, a catch-up of the history index) takes it per
	// object, or reads through its own View.
	mu sync.Mutex
	st *gd.Store
}

func (o *objects) lock() { o.mu.Lock() }

// unlock releases mu, closing the pack files go-git opened unless an
// operation holds them (see gitdir.Store.Release).
func (o *objects) unlock() {
	o.st.Release()
	o.mu.Unlock()
}

// holdPacks keeps pack files open until dropPacks, for an operation that
// reads many objects (blame, a log with patches).
func (o *objects) holdPacks() {
	o.lock()
	o.st.Hold()
	o.mu.Unlock()
}

// withObjects runs fn on the object store, with objects.mu held, and closes the
// packs fn opened after (see unlockObj).
func (r *Repo) withObjects(fn func(st *gd.Store) error) error {
	r.objects.lock()
	defer r.objects.unlock()
	return fn(r.objects.st)
}

func (o *objects) dropPacks() {
	o.lock()
	o.st.Unhold()
	o.unlock()
}

// readRef reads a ref of the repository (gitdir.ReadRef).
func (r *Repo) readRef(name plumbing.ReferenceName) (plumbing.Hash, error) {
	return gd.ReadRef(r.gitDir, name)
}

// objectOf is a git object held in full.
func objectOf(t plumbing.ObjectType, data []byte) gd.Object {
	return gd.Object{Type: t, Hash: plumbing.ComputeHash(t, data), Data: data}
}

// blobsInPackOrder reads the blobs hs, in the order of the packs (see
// gitdir.Store.SortForReading), mapped, a few at a time under the
// Store's lock (for the calls of a serve meanwhile), and gives each to
// fn with its read's error; an error from fn ends the reads. The caller
// holds the packs (holdPacks), so that the mappings and the delta bases
// read stay from one batch to the next.
func (o *objects) blobsInPackOrder(hs []plumbing.Hash, fn func(h plumbing.Hash, data []byte, err error) error) error {
	o.lock()
	order := o.st.SortForReading(hs)
	o.unlock()
	for batch := range slices.Chunk(order, 256) {
		o.lock()
		err := o.st.Mapped(func() error {
			for _, l := range batch {
				data, err := o.st.BlobAt(l)
				if err := fn(l.Hash, data, err); err != nil {
					return err
				}
			}
			return nil
		})
		o.unlock()
		if err != nil {
			return err
		}
	}
	return nil
}
