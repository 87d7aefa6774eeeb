package gitmem

import (
	"errors"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// published is what readers see (the newest durable commit) and what the
// next transaction builds on (the newest commit prepared, durable or
// not), and whether the log or git's files failed.
type published struct {
	// mu guards every field below. In the lock order it comes after the
	// committer's queue lock (committer.queueMu) and before toolUseIDs.mu, which the
	// then callbacks take while it is held (enqueue, publish, dropQueued).
	mu      sync.RWMutex
	loaded  bool          // head and tree were read from git's files (refresh)
	head    plumbing.Hash // readers' HEAD: the newest durable commit
	tree    *node         // its tree
	tip     plumbing.Hash // the newest commit prepared (durable or not)
	tipTree *node
	broken  error // the log or git's files failed: no change is written until a checkpoint succeeds
}

// snapshot is readers' HEAD and its tree.
func (s *published) snapshot() (plumbing.Hash, *node) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.head, s.tree
}

// loadedAt is readers' HEAD and its tree, and whether they were loaded.
func (s *published) loadedAt() (plumbing.Hash, *node, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.head, s.tree, s.loaded
}

// load makes head (tree) what readers see and what the next transaction
// builds on: what git's files hold (refresh).
func (s *published) load(head plumbing.Hash, tree *node) {
	s.mu.Lock()
	s.head, s.tree, s.loaded = head, tree, true
	s.tip, s.tipTree = head, tree
	s.mu.Unlock()
}

// forget makes the next refresh load the branch anew (a redaction moved
// it).
func (s *published) forget() {
	s.mu.Lock()
	s.loaded, s.head = false, plumbing.ZeroHash
	s.mu.Unlock()
}

// tipOf is the newest commit prepared and its tree: what the next
// transaction builds on.
func (s *published) tipOf() (plumbing.Hash, *node) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tip, s.tipTree
}

// pending says a commit was prepared that is not durable yet.
func (s *published) pending() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tip != s.head
}

// advance makes a prepared commit (hash, tree) the tip, unless the tip
// is no longer base (the pipeline dropped what it was built on) or
// changes are refused; then also runs under the lock.
func (s *published) advance(base, hash plumbing.Hash, tree *node, then func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tip != base || s.broken != nil {
		if s.broken != nil {
			return s.broken
		}
		return &StorageError{Op: "write the change", Err: errors.New("an earlier change it was built on failed")}
	}
	s.tip, s.tipTree = hash, tree
	then()
	return nil
}

// publish makes a durable commit (hash, tree) readers' HEAD; then also
// runs under the lock.
func (s *published) publish(hash plumbing.Hash, tree *node, then func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.head, s.tree = hash, tree
	then()
}

// rollback sets the tip back to what is durable and refuses changes with
// err until a checkpoint succeeds (a group failed); then also runs under
// the lock.
func (s *published) rollback(err error, then func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tip, s.tipTree = s.head, s.tree
	s.broken = err
	then()
}

// brokenErr is why changes are refused (nil: they are not).
func (s *published) brokenErr() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.broken
}

// failure is the error a failed group leaves for its members.
func (s *published) failure() error {
	if err := s.brokenErr(); err != nil {
		return err
	}
	return &StorageError{Op: "write the change", Err: errors.New("an earlier change in its group failed")}
}

// refuse makes changes refused with err, unless they already are; it
// reports whether they were not.
func (s *published) refuse(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return false
	}
	s.broken = err
	return true
}

// clearBroken lets changes through again after a checkpoint succeeded.
func (s *published) clearBroken() {
	s.mu.Lock()
	s.broken = nil
	s.mu.Unlock()
}

// setTip makes a commit replayed from the log (durable, not yet
// published) what the next transaction builds on.
func (s *published) setTip(hash plumbing.Hash, tree *node) {
	s.mu.Lock()
	s.tip, s.tipTree = hash, tree
	s.mu.Unlock()
}
