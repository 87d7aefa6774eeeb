package gitmem

// What a layer that keeps its own index of the history beside a
// transaction (package memstore: memory ids and versions over a store)
// needs from it.

// HeadCommit returns the commit the view shows (a transaction: the commit
// it builds on), read from the objects: in a transaction, that commit may
// be answered and durable but not yet in git's files, where Commit would
// wait for it. Its Paths and Blobs are not filled in.
func (v *View) HeadCommit() (Commit, error) {
	if v.head.IsZero() {
		return Commit{}, ErrUnknownRev
	}
	v.r.omu.Lock()
	defer v.r.unlockObj()
	c, err := v.r.obj.Commit(v.head)
	if err != nil {
		return Commit{}, wrap("read commit", err)
	}
	return commitOf(c), nil
}
