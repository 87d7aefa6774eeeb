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

// writeNamed writes objects as one pack, durably, in flight (see
// gd.Keep: neither git's gc nor gitmem's takes it) until set has moved a
// ref onto them, then gitmem's own.
func (r *Repo) writeNamed(objs []gd.Object, set func() error) error {
	h, err := r.obj.WritePackFiles(objs, true, gd.InFlight)
	if err != nil {
		return err
	}
	r.omu.Lock()
	r.obj.AddPack(h)
	r.unlockObj()
	err = set()
	// Whatever set did (a full gc drops what no ref reaches); one left in
	// flight, on a full disk, is kept all the same and settled at the
	// next start.
	gd.Settle(r.gitDir, h)
	return err
}
