package gitmem

import "github.com/go-git/go-git/v5/plumbing"

// What a layer that keeps its own index of the history beside a
// transaction (package memstore: memory ids and versions over a store)
// needs from it.

// HeadCommit returns the commit the view shows (a transaction: the commit
// it builds on), as CommitObject reads it.
func (v *View) HeadCommit() (Commit, error) {
	if v.head.IsZero() {
		return Commit{}, ErrUnknownRev
	}
	return v.r.CommitObject(v.head.String())
}

// CommitObject returns the commit with this full hash, read from the
// objects: a commit answered but not yet in git's files too, where Commit
// would first wait for git's files to follow (the materialiser's work,
// which a caller at every request would serialise). Its Paths and Blobs
// are not filled in.
func (r *Repo) CommitObject(hash string) (Commit, error) {
	if !plumbing.IsHash(hash) {
		return Commit{}, ErrUnknownRev
	}
	r.objects.lock()
	defer r.objects.unlock()
	c, err := r.objects.st.Commit(plumbing.NewHash(hash))
	if err != nil {
		return Commit{}, wrap("read commit", err)
	}
	return commitOf(c), nil
}
