package remote

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
)

// local is a repository on this machine, read and written directly: the
// objects to send are computed on the sending side's store and copied
// into the other; a ref moves the way git's receive-pack moves it (a lock
// file, a check that it still holds the old value, a rename), so gitmem
// and git processes can share the repository.
type local struct {
	store *gd.Store
	bare  bool
	refs  Refs
}

func dialLocal(path string, push bool) (Conn, error) {
	gitDir := path
	bare := true
	if fi, err := os.Stat(filepath.Join(path, ".git")); err == nil && fi.IsDir() {
		gitDir, bare = filepath.Join(path, ".git"), false
	}
	for _, want := range []string{"objects", "refs", "HEAD"} {
		if _, err := os.Stat(filepath.Join(gitDir, want)); err != nil {
			return nil, ErrNotFound
		}
	}
	if push && !bare {
		return nil, errors.New("the remote is a repository with a worktree (another gitmem memory?): push to a bare repository (git init --bare), which every agent shares")
	}
	refs, err := gd.ListRefs(gitDir)
	if err != nil {
		return nil, fmt.Errorf("read the remote's refs: %v", err)
	}
	return &local{store: gd.Open(gitDir), bare: bare, refs: refs}, nil
}

func (l *local) Refs() Refs { return l.refs }

func (l *local) Fetch(ctx context.Context, dst *gd.Store, wants, haves []plumbing.Hash, limit int64) (n int, err error) {
	// The remote's Store is this fetch's alone: its packs are read
	// mapped, no system call per entry (which objects to send walks
	// every new tree through its delta chain).
	err = l.store.Mapped(func() error {
		g := gd.NewGraph(l.store)
		var known []plumbing.Hash
		for _, h := range haves {
			if g.Has(h) {
				known = append(known, h)
			}
		}
		objects, _, err := g.Missing(wants, known)
		if err != nil {
			return fmt.Errorf("read the remote's history: %v", err)
		}
		var total int64
		for _, h := range objects {
			n, err := l.store.Size(h)
			if err != nil {
				return fmt.Errorf("read the remote's object %s: %v", h, err)
			}
			if total += n; total > limit {
				return &gd.TooLargeError{Limit: limit}
			}
		}
		n = len(objects)
		return copyObjects(ctx, l.store, dst, objects)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

func (l *local) Push(ctx context.Context, src *gd.Store, objects []plumbing.Hash, updates []Update) error {
	defer func() { // kept from git's gc until the refs name what they hold
		for _, h := range l.store.Received() {
			gd.Unkeep(l.store.Dir, h)
		}
	}()
	// src is the push's own (a View), which nothing else reads meanwhile:
	// it is read mapped, no pread per entry.
	if err := src.Mapped(func() error { return copyObjects(ctx, src, l.store, objects) }); err != nil {
		return fmt.Errorf("write the objects into the remote: %v", err)
	}

	for _, u := range updates {
		if err := l.store.UpdateRef(context.Background(), u.Name, u.Old, u.New, true); err != nil {
			if cur, rerr := gd.ReadRef(l.store.Dir, u.Name); rerr == nil || errors.Is(rerr, gd.ErrNoRef) {
				if cur != u.Old {
					return &RejectedError{Ref: u.Name.String(), Reason: "fetch first (the remote moved)"}
				}
			}
			return fmt.Errorf("update the remote's %s: %v", u.Name, err)
		}
	}
	// Each push leaves a small pack: fold them now and then, leaving alone
	// the newest (another pusher's, whose ref update may be on its way). A
	// failure costs nothing but the folding.
	l.store.CombinePacks(time.Now().Add(-time.Minute))
	return nil
}

// copyObjects copies objects from one store to another as one pack,
// durably.
func copyObjects(ctx context.Context, from, to *gd.Store, objects []plumbing.Hash) error {
	if len(objects) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := to.WritePackFrom(from, objects)
	return err
}

func (l *local) Close() error { return l.store.Close() }

// ErrNotLocal: Prune works only on a repository on this machine.
var ErrNotLocal = errors.New("not a repository on this machine")

// Prune deletes, in a repository on this machine, the objects no ref
// reaches that are older than before (a redaction's old objects): it packs
// every reachable object into one pack, then deletes the loose objects and
// packs written before before. Objects written since — a push by another
// agent still on its way to its ref update — are kept.
func Prune(url, base string, before time.Time) error {
	ep, err := transport.NewEndpoint(url)
	if err != nil || ep.Protocol != "file" {
		return ErrNotLocal
	}
	p := ep.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	conn, err := dialLocal(p, true)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.(*local).store.Prune(before)
}
