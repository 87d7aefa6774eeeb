package gitmem

import (
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// checkReceived refuses what a fetch brought when one of its objects
// fails git fsck --strict (a tree entry named .git, a bad date, a
// .gitmodules with an option for a URL: gitdir.CheckTree and its
// siblings, the checks gitmem fsck makes), as git's transfer.fsckObjects
// does: every object of the packs it wrote is checked, each pack read
// once in the order it is stored (gd.WalkPack). Once such an
// object is in the repository, git fsck --strict fails for good, reachable
// or not. The error names the first commit of the fetched branch that
// holds it (or the object, when no commit of it does); the caller removes
// the packs.
//
// It refuses them too when they do not connect, as git's connectivity
// check does: an object they name (a commit's tree or parent, a tree's
// entry, a tag's target) that they do not hold and the store did not
// hold already. A server may send such a pack (git daemon does not); a
// ref on it would leave git fsck --strict and gc failing.
func (s *link) checkReceived(packs []plumbing.Hash, tip plumbing.Hash) error {
	bad := map[plumbing.Hash]gd.ObjectProblem{}
	kind := map[plumbing.Hash]plumbing.ObjectType{}
	special := map[plumbing.Hash]string{}
	got, named := map[plumbing.Hash]bool{}, map[plumbing.Hash]naming{}
	for _, p := range packs {
		// Each pack read once, as it is stored; a blob is read only when
		// a tree names it as a special file (below).
		err := s.st.WalkPack(p, func(t plumbing.ObjectType) bool { return t != plumbing.BlobObject }, func(h plumbing.Hash, t plumbing.ObjectType, data []byte) error {
			got[h] = true
			// A malformed object names nothing: the checks below refuse it.
			_ = gd.ObjectLinks(t, data, func(n plumbing.Hash, nt plumbing.ObjectType) { named[n] = naming{nt, h} })
			var ps []gd.ObjectProblem
			switch t {
			case plumbing.TreeObject:
				ps = gd.CheckTree(data, func(b plumbing.Hash, file string) { special[b] = file })
			case plumbing.CommitObject:
				ps = gd.CheckCommit(data)
			case plumbing.TagObject:
				ps = gd.CheckTag(data)
			}
			if len(ps) > 0 {
				bad[h], kind[h] = ps[0], t
			}
			return nil
		})
		if err != nil {
			return wrap("read what the remote sent", err)
		}
	}
	for b, file := range special {
		if data, err := s.st.Blob(b); err == nil {
			if ps := gd.CheckBlob(data, file); len(ps) > 0 {
				bad[b], kind[b] = ps[0], plumbing.BlobObject
			}
		}
	}
	if len(bad) == 0 {
		return s.checkConnected(got, named)
	}
	commit, obj, at := s.holder(tip, bad)
	var what string
	switch {
	case commit.IsZero():
		what = fmt.Sprintf("it sent a %s (%s) that", kind[obj], obj)
	case obj == commit:
		what = fmt.Sprintf("its commit %s is one", commit.String()[:7])
	case at == "":
		what = fmt.Sprintf("its commit %s holds a %s (%s) that", commit.String()[:7], kind[obj], obj.String()[:7])
	default:
		what = fmt.Sprintf("its commit %s holds a %s (%s, at %s) that", commit.String()[:7], kind[obj], obj.String()[:7], at)
	}
	return &ObjectsRefusedError{fmt.Sprintf("%s git fsck --strict refuses: %s; nothing was fetched (git refuses it too, with transfer.fsckObjects)", what, bad[obj])}
}

// checkConnected refuses the objects a fetch brought (got) when one they
// name (named: its type and the object that names it) is neither among
// them nor in the store: the first in hash order is named.
func (s *link) checkConnected(got map[plumbing.Hash]bool, named map[plumbing.Hash]naming) error {
	var missing plumbing.Hash
	for h := range named {
		if !got[h] && !s.st.HasObject(h) && (missing.IsZero() || h.String() < missing.String()) {
			missing = h
		}
	}
	if missing.IsZero() {
		return nil
	}
	n := named[missing]
	what := "object"
	if n.kind != plumbing.AnyObject {
		what = n.kind.String()
	}
	return &ObjectsRefusedError{fmt.Sprintf("the remote did not send the %s %s that its %s names; nothing was fetched (git refuses it too: its objects do not connect)",
		what, missing, n.by.String()[:7])}
}

// naming is how an object fetched names another: the type it gives it,
// and its own hash.
type naming struct {
	kind plumbing.ObjectType
	by   plumbing.Hash
}

// ObjectsRefusedError refuses what a fetch brought: an object git fsck
// --strict refuses, or objects that do not connect (checkReceived).
// Nothing was fetched.
type ObjectsRefusedError struct{ Reason string }

func (e *ObjectsRefusedError) Error() string { return e.Reason }

// holder finds the oldest commit of tip's history, less HEAD's, that is
// or holds one of the bad objects, with that object and its path; a zero
// commit and any bad object when none does.
func (s *link) holder(tip plumbing.Hash, bad map[plumbing.Hash]gd.ObjectProblem) (commit, obj plumbing.Hash, at string) {
	var ours []plumbing.Hash
	if head, err := s.store.headHash(); err == nil && !head.IsZero() {
		ours = append(ours, head)
	}
	seen := map[plumbing.Hash]bool{}
	var find func(tree plumbing.Hash, path string) (plumbing.Hash, string)
	find = func(tree plumbing.Hash, path string) (plumbing.Hash, string) {
		if _, ok := bad[tree]; ok {
			return tree, path
		}
		if seen[tree] {
			return plumbing.ZeroHash, ""
		}
		seen[tree] = true
		t, err := s.st.Tree(tree)
		if err != nil {
			return plumbing.ZeroHash, ""
		}
		for _, e := range t.Entries {
			p := join2(path, e.Name)
			if _, ok := bad[e.Hash]; ok && e.Mode != filemode.Dir {
				return e.Hash, p
			}
			if e.Mode == filemode.Dir {
				if h, q := find(e.Hash, p); !h.IsZero() {
					return h, q
				}
			}
		}
		return plumbing.ZeroHash, ""
	}
	if !tip.IsZero() {
		if commits, err := s.g.Exclusive([]plumbing.Hash{tip}, ours); err == nil {
			for _, c := range commits { // parents first
				if _, ok := bad[c.Hash]; ok {
					return c.Hash, c.Hash, ""
				}
				if h, p := find(c.TreeHash, ""); !h.IsZero() {
					return c.Hash, h, p
				}
			}
		}
	}
	for h := range bad {
		if obj.IsZero() || h.String() < obj.String() {
			obj = h
		}
	}
	return plumbing.ZeroHash, obj, ""
}
