package gitmem

import (
	"github.com/go-git/go-git/v5/plumbing"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// unlockObj releases omu, closing the pack files go-git opened unless an
// operation holds them (see gitdir.Store.Release).
func (r *Repo) unlockObj() {
	r.obj.Release()
	r.omu.Unlock()
}

// holdPacks keeps pack files open until dropPacks, for an operation that
// reads many objects (blame, a log with patches).
func (r *Repo) holdPacks() {
	r.omu.Lock()
	r.obj.Hold()
	r.omu.Unlock()
}

// withObjects runs fn on the object store, with omu held, and closes the
// packs fn opened after (see unlockObj).
func (r *Repo) withObjects(fn func(st *gd.Store) error) error {
	r.omu.Lock()
	defer r.unlockObj()
	return fn(r.obj)
}

func (r *Repo) dropPacks() {
	r.omu.Lock()
	r.obj.Unhold()
	r.unlockObj()
}

// readRef reads a ref of the repository (gitdir.ReadRef).
func (r *Repo) readRef(name plumbing.ReferenceName) (plumbing.Hash, error) {
	return gd.ReadRef(r.gitDir, name)
}

// objectOf is a git object held in full.
func objectOf(t plumbing.ObjectType, data []byte) gd.Object {
	return gd.Object{Type: t, Hash: plumbing.ComputeHash(t, data), Data: data}
}
