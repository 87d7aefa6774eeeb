package stores_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
	"github.com/gitmem-dev/gitmem/stores"
)

var epoch = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

var olive = gitmem.Signature{Name: "olive", Email: "olive@example.com"}

func newDir(t *testing.T, root string, opt stores.Options) *stores.Dir {
	t.Helper()
	if root == "" {
		root = gittest.TempDir(t)
	}
	opt.Repo = gitmem.Options{Now: func() time.Time { return epoch }, Logf: t.Logf, Operator: olive}
	d, err := stores.Open(root, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// A store created on someone's behalf (a token's create through the API)
// is theirs from its first commit: memory: init is authored as memory:
// store create is, by the creator, not by the server's git identity (the
// ~/.gitconfig of whoever runs it, which the init commit took). A create
// that names no one (the CLI's) is the operator's, as gitmem init's first
// commit is.
func TestAStoreIsItsCreatorsFromItsFirstCommit(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{})
	for name, author := range map[string]gitmem.Signature{"alice": gitmem.SignatureOf("ops-token"), "bob": {}} {
		if _, err := d.Create(name, stores.Meta{}, author); err != nil {
			t.Fatal(err)
		}
		flush(t, d, name)
	}
	for name, want := range map[string]string{
		"alice": "ops-token <ops-token@gitmem.invalid>|memory: store create\nops-token <ops-token@gitmem.invalid>|memory: init\n",
		"bob":   "olive <olive@example.com>|memory: store create\nolive <olive@example.com>|memory: init\n",
	} {
		if got := gittest.Git(t, filepath.Join(d.Root(), name), "log", "--format=%an <%ae>|%s"); got != want {
			t.Errorf("%s's history:\n%s\nwant\n%s", name, got, want)
		}
	}
}

func TestStoreLifecycle(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{})
	info, err := d.Create("alice", stores.Meta{Description: "Alice's preferences.\nAsk before deleting.",
		Metadata: map[string]string{"user": "alice", "tier": "gold"}}, gitmem.Signature{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "alice" || info.Description != "Alice's preferences.\nAsk before deleting." ||
		info.Metadata["tier"] != "gold" || !info.Created.Equal(epoch) || info.IsArchived() {
		t.Errorf("created %+v", info)
	}
	for _, c := range []struct {
		name string
		want error
	}{{"alice", stores.ErrExists}} {
		if _, err := d.Create(c.name, stores.Meta{}, gitmem.Signature{}); !errors.Is(err, c.want) {
			t.Errorf("create %s again: %v", c.name, err)
		}
	}
	if _, err := d.Create("Bad Name", stores.Meta{}, gitmem.Signature{}); err == nil || !strings.Contains(err.Error(), "store names are") {
		t.Errorf("bad name: %v", err)
	}
	if _, err := d.Create("bob", stores.Meta{Metadata: map[string]string{"a=b": "c"}}, gitmem.Signature{}); err == nil {
		t.Error("bad metadata accepted")
	}
	if _, err := d.Get("nobody"); !errors.Is(err, stores.ErrNotFound) {
		t.Errorf("get nobody: %v", err)
	}

	desc := "Alice's memory"
	mask := policy.ScreenMask
	info, err = d.Update("alice", stores.Change{Description: &desc, Screening: &mask,
		Metadata: map[string]*string{"tier": nil, "region": ptr("eu")}}, gitmem.Signature{Name: "ops-token", Email: "ops-token@gitmem.invalid"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Description != desc || info.Screening != mask || len(info.Metadata) != 2 || info.Metadata["region"] != "eu" {
		t.Errorf("updated %+v", info)
	}
	if info, err = d.Archive("alice", true, gitmem.Signature{}); err != nil || !info.IsArchived() {
		t.Fatalf("archive: %+v %v", info, err)
	}
	if _, err := d.Update("alice", stores.Change{Description: &desc}, gitmem.Signature{}); !errors.Is(err, stores.ErrArchived) {
		t.Errorf("update archived: %v", err)
	}
	// The metadata is in the store's history, attributed.
	flush(t, d, "alice")
	out := gittest.Git(t, filepath.Join(d.Root(), "alice"), "log", "--format=%an|%s|%(trailers:key=Store-Action,valueonly,separator=)")
	want := "olive|memory: store archive|archive\nops-token|memory: store update|update\nolive|memory: store create|create\nolive|memory: init|\n"
	if out != want {
		t.Errorf("history:\n%s\nwant\n%s", out, want)
	}

	// A fresh Dir (another process) reads it back; listing skips archived
	// stores unless asked, and whatever is not a store.
	if _, err := d.Create("bob", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(d.Root(), "not-a-store"), 0o700)
	os.MkdirAll(filepath.Join(d.Root(), ".hidden"), 0o700)
	os.MkdirAll(filepath.Join(d.Root(), ".deleted-carol-x", ".git"), 0o700) // a delete cut short
	d2 := newDir(t, d.Root(), stores.Options{})
	p, err := d2.List(stores.ListOptions{Limit: 10})
	if err != nil || len(p.Items) != 1 || p.Items[0].Name != "bob" || p.Next != "" {
		t.Errorf("list: %+v %v", p, err)
	}
	p, err = d2.List(stores.ListOptions{Limit: 1, IncludeArchived: true})
	if err != nil || len(p.Items) != 1 || p.Items[0].Name != "alice" || p.Next != "alice" || !p.Items[0].IsArchived() ||
		p.Items[0].Description != desc || p.Items[0].Metadata["user"] != "alice" {
		t.Errorf("list page 1: %+v %v", p, err)
	}
	p, err = d2.List(stores.ListOptions{After: p.Next, Limit: 1, IncludeArchived: true})
	if err != nil || len(p.Items) != 1 || p.Items[0].Name != "bob" || p.Next != "" {
		t.Errorf("list page 2: %+v %v", p, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(d.Root(), ".deleted-carol-x")); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("listing did not remove what an interrupted delete left")
		}
	}

	// Unarchived by the second Dir: the first sees it at its next use,
	// once the change is in git's files (within milliseconds).
	if _, err := d2.Archive("alice", false, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	flush(t, d2, "alice")
	if info, err := d.Get("alice"); err != nil || info.IsArchived() {
		t.Errorf("after another process unarchived: %+v %v", info, err)
	}

	if err := d.Delete("alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get("alice"); !errors.Is(err, stores.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.Root(), "alice")); !os.IsNotExist(err) {
		t.Errorf("the folder is still there: %v", err)
	}
	// Deleted by another process while open here.
	if _, err := d.Get("bob"); err != nil {
		t.Fatal(err)
	}
	if err := d2.Delete("bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get("bob"); !errors.Is(err, stores.ErrNotFound) {
		t.Errorf("get after another process deleted: %v", err)
	}
	// The processes that had them open (bob here, alice in the other)
	// write nothing into the deleted stores' folders as they close.
	d.Close()
	d2.Close()
	for _, name := range []string{"alice", "bob"} {
		if _, err := os.Stat(filepath.Join(d.Root(), name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the deleted store %s is back: %v", name, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// flush brings a store's git files up to every acknowledged change, as
// another process reading them needs (gitmem writes them just after it
// acknowledges).
func flush(t *testing.T, d *stores.Dir, name string) {
	t.Helper()
	s, err := d.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	if err := s.Use(func(r *gitmem.Repo, _ stores.Meta) error { return r.Flush(context.Background()) }); err != nil {
		t.Fatal(err)
	}
}

func TestMetadataTravelsWithAClone(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{})
	if _, err := d.Create("team", stores.Meta{Description: "Shared notes", Metadata: map[string]string{"team": "support"}}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	flush(t, d, "team")
	other := gittest.TempDir(t)
	gittest.Git(t, d.Root(), "clone", "-q", filepath.Join(d.Root(), "team"), filepath.Join(other, "team-copy"))
	d2 := newDir(t, other, stores.Options{})
	info, err := d2.Get("team-copy")
	if err != nil || info.Description != "Shared notes" || info.Metadata["team"] != "support" {
		t.Errorf("the clone's metadata: %+v %v", info, err)
	}
}

func TestOpenStoresAreBounded(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{MaxOpen: 3, IdleClose: -1})
	names := []string{"s1", "s2", "s3", "s4", "s5"}
	for _, n := range names {
		if _, err := d.Create(n, stores.Meta{}, gitmem.Signature{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		if _, err := d.Get(n); err != nil {
			t.Fatal(err)
		}
		if got := d.OpenCount(); got > 3 {
			t.Fatalf("%d stores open after %s, the bound is 3", got, n)
		}
	}
	// A store in use is never closed: the bound gives way until it is
	// released.
	var held []*stores.Store
	for _, n := range []string{"s1", "s2", "s3", "s4"} {
		s, err := d.Acquire(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	if got := d.OpenCount(); got != 4 {
		t.Errorf("%d open while 4 are in use", got)
	}
	for _, s := range held {
		if err := s.Use(func(r *gitmem.Repo, m stores.Meta) error { _, err := r.Snapshot(context.Background()); return err }); err != nil {
			t.Errorf("%s: %v", s.Name(), err)
		}
		s.Release()
	}
	if _, err := d.Get("s5"); err != nil {
		t.Fatal(err)
	}
	if got := d.OpenCount(); got != 3 {
		t.Errorf("%d open after the calls ended, the bound is 3", got)
	}
}

func TestIdleStoresAreClosed(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{IdleClose: 20 * time.Millisecond})
	if _, err := d.Create("quiet", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get("quiet"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.OpenCount() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("an idle store stayed open")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := d.Get("quiet"); err != nil {
		t.Errorf("reopen: %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{MaxOpen: 2, IdleClose: -1})
	names := []string{"a", "b", "c", "d"}
	for _, n := range names {
		if _, err := d.Create(n, stores.Meta{}, gitmem.Signature{}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				name := names[(i+j)%len(names)]
				s, err := d.Acquire(context.Background(), name)
				if err != nil {
					t.Error(err)
					return
				}
				err = s.Use(func(r *gitmem.Repo, m stores.Meta) error {
					_, err := r.Update(context.Background(), gitmem.Meta{Subject: "memory: test"}, func(tx *gitmem.Tx) error {
						return tx.WriteFile("n.md", []byte(name))
					})
					return err
				})
				s.Release()
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range names {
		flush(t, d, n)
		total += len(strings.Split(strings.TrimSpace(gittest.Git(t, filepath.Join(d.Root(), n), "log", "--format=%s", "--grep=memory: test")), "\n"))
	}
	if total != 16*20 {
		t.Errorf("%d commits, want %d", total, 16*20)
	}
}

// A store's display name (the Memory Stores API's "name", free text)
// lives in its history beside the rest of its metadata; a store without
// one is called by its folder name.
func TestDisplayName(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{})
	if _, err := d.Create("memstore_1", stores.Meta{DisplayName: "Alice's notes: \"work\" & home"}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create("plain", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	name := "Renamed"
	if _, err := d.Update("memstore_1", stores.Change{DisplayName: &name}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 256), "tab\there"} {
		if _, err := d.Update("memstore_1", stores.Change{DisplayName: &bad}, gitmem.Signature{}); err == nil {
			t.Errorf("display name %q accepted", bad)
		}
	}
	d2 := newDir(t, d.Root(), stores.Options{}) // another process reads it back
	for store, want := range map[string]string{"memstore_1": "Renamed", "plain": "plain"} {
		if info, err := d2.Get(store); err != nil || info.Title() != want {
			t.Errorf("%s: %q %v", store, info.Title(), err)
		}
	}
}

// Where filters a listing on the metadata, before the page is cut: a
// page holds Limit stores that pass.
func TestListWhere(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{})
	for _, name := range []string{"a", "b", "c", "d"} {
		if _, err := d.Create(name, stores.Meta{Metadata: map[string]string{"keep": strconv.FormatBool(name != "b")}}, gitmem.Signature{}); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(i stores.Info) bool { return i.Metadata["keep"] == "true" }
	var got []string
	for after := ""; ; {
		p, err := d.List(stores.ListOptions{After: after, Limit: 2, Where: keep})
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range p.Items {
			got = append(got, i.Name)
		}
		if after = p.Next; after == "" {
			break
		}
	}
	if strings.Join(got, ",") != "a,c,d" {
		t.Errorf("listed %v", got)
	}
}

// A value cached with an open store is made once and kept until the
// store closes.
func TestCacheLivesWithTheOpenStore(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{MaxOpen: 1})
	for _, name := range []string{"a", "b"} {
		if _, err := d.Create(name, stores.Meta{}, gitmem.Signature{}); err != nil {
			t.Fatal(err)
		}
	}
	made := 0
	get := func(name string) any {
		s, err := d.Acquire(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release()
		return s.Cache("k", func() any { made++; return new(int) })
	}
	first := get("a")
	if get("a") != first || made != 1 {
		t.Fatalf("made %d times", made)
	}
	get("b") // closes a: one open store at most
	if get("a") == first || made != 3 {
		t.Errorf("after a was closed and opened again: made %d times", made)
	}
}

// A metadata change made by another process is seen at the next use,
// whether few memory commits came after the one read last (read from
// the objects) or many (read from the log).
func TestMetadataChangeBehindMemoryCommits(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 70} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			d := newDir(t, "", stores.Options{})
			if _, err := d.Create("s", stores.Meta{Description: "before"}, gitmem.Signature{}); err != nil {
				t.Fatal(err)
			}
			write := func(i int) {
				s, err := d.Acquire(context.Background(), "s")
				if err != nil {
					t.Fatal(err)
				}
				defer s.Release()
				err = s.Use(func(r *gitmem.Repo, _ stores.Meta) error {
					_, err := r.Update(context.Background(), gitmem.Meta{Subject: "w"}, func(tx *gitmem.Tx) error {
						return tx.WriteFile(fmt.Sprintf("m%d.md", i), []byte("x"))
					})
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			write(-1)
			if info, err := d.Get("s"); err != nil || info.Description != "before" {
				t.Fatalf("%+v %v", info, err)
			}
			flush(t, d, "s")
			d2 := newDir(t, d.Root(), stores.Options{})
			desc := "after"
			if _, err := d2.Update("s", stores.Change{Description: &desc}, gitmem.Signature{}); err != nil {
				t.Fatal(err)
			}
			flush(t, d2, "s")
			d2.Close()
			for i := range n {
				write(i)
			}
			if info, err := d.Get("s"); err != nil || info.Description != "after" {
				t.Errorf("after another process's change and %d commits: %+v %v", n, info, err)
			}
		})
	}
}

// A background collection holds up no call of its store (design F11): a
// metadata change made while one runs is done at once, and so the tool
// calls queued behind it go on too. (It used to wait for the whole
// collection, holding the store's gate shared, and every later tool call
// queued behind it.)
func TestBackgroundGCHoldsUpNoCall(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{IdleClose: -1})
	if _, err := d.Create("a", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	s, err := d.Acquire(context.Background(), "a") // open: the background packs open stores
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	inGC, changed, packed := make(chan struct{}), make(chan error, 1), make(chan struct{})
	var during error
	done := false // the change was done while the collection ran
	go func() {
		defer close(packed)
		d.PackWith(func(r *gitmem.Repo) (gitmem.GCStats, error) {
			close(inGC)
			select { // the collection runs on until the change is done
			case during = <-changed:
				done = true
			case <-time.After(30 * time.Second): // without the fix: the change waits for the gate
			}
			return r.GC(context.Background(), false)
		})
	}()
	<-inGC
	desc := "changed while gc ran"
	go func() {
		_, err := d.Update("a", stores.Change{Description: &desc}, gitmem.Signature{})
		changed <- err
	}()
	<-packed
	if !done {
		<-changed
		t.Fatal("the metadata change waited for the background collection to end")
	}
	if during != nil {
		t.Fatal(during)
	}
	if info, err := d.Get("a"); err != nil || info.Description != desc {
		t.Errorf("after the change: %+v %v", info, err)
	}
}

// Acquire waiting for a store to open, behind the writer lock another
// process holds (its gc, say), gives up when its context is done, and
// Close ends the opening: neither waits for the other process. (Acquire
// took no context and waited until the lock was free; Close waited for
// the opening.) Once the lock is free the store opens.
func TestAcquireStopsWaitingForTheWriterLock(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	first := newDir(t, root, stores.Options{})
	if _, err := first.Create("alice", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// Another process holds alice's writer lock while its change is
	// under way.
	other, err := gitmem.Open(context.Background(), filepath.Join(root, "alice"), gitmem.Options{Now: func() time.Time { return epoch }, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	held, free, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		other.Update(context.Background(), gitmem.Meta{Subject: "test: hold the writer lock"}, func(*gitmem.Tx) error {
			close(held)
			<-free
			return errors.New("held only")
		})
	}()
	<-held
	var once sync.Once
	letGo := func() {
		once.Do(func() {
			close(free)
			<-done
			other.Close()
		})
	}
	t.Cleanup(letGo)

	d := newDir(t, root, stores.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := d.Acquire(ctx, "alice"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire behind the writer lock, its context done: %v", err)
	}
	waiting := make(chan error, 1)
	go func() {
		s, err := d.Acquire(context.Background(), "alice")
		if err == nil {
			s.Release()
		}
		waiting <- err
	}()
	for deadline := time.Now().Add(time.Minute); d.OpenCount() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the store's opening never began")
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		letGo()
		t.Fatal("Close waited for the other process's lock")
	}
	if err := <-waiting; err == nil {
		t.Fatal("Acquire waiting at Close opened the store")
	}
	letGo()
	s, err := newDir(t, root, stores.Options{}).Acquire(context.Background(), "alice")
	if err != nil {
		t.Fatalf("Acquire once the lock is free: %v", err)
	}
	s.Release()
}

// The background looks for stores to pack only among those used since its
// last look (and those in use): with many stores open, its cost follows
// the stores in use, so it can look as often as serve does for one
// repository.
func TestPackLooksOnlyAtStoresUsedSince(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{IdleClose: -1}) // GCLoose 0: every store looked at is due
	use := func(name string) *stores.Store {
		s, err := d.Acquire(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, name := range []string{"a", "b"} {
		if _, err := d.Create(name, stores.Meta{}, gitmem.Signature{}); err != nil {
			t.Fatal(err)
		}
		use(name).Release()
	}
	looked := func() string {
		var names []string
		d.PackWith(func(r *gitmem.Repo) (gitmem.GCStats, error) {
			names = append(names, filepath.Base(r.Dir()))
			return gitmem.GCStats{}, nil
		})
		slices.Sort(names)
		return strings.Join(names, " ")
	}
	if got := looked(); got != "a b" {
		t.Fatalf("first look: %q, want both stores", got)
	}
	if got := looked(); got != "" {
		t.Fatalf("nothing used since: looked at %q", got)
	}
	use("a").Release()
	if got := looked(); got != "a" {
		t.Fatalf("a used since: looked at %q", got)
	}
	held := use("b")
	defer held.Release()
	if got := looked(); got != "b" {
		t.Fatalf("b in use: looked at %q", got)
	}
}

// TestCreatesOfDifferentNamesOverlap: creating a store does not wait for
// the creation of another (the folder of stores fills at the pace of
// several creates at once), while creates of one name still take turns,
// the second finding the first's store.
func TestCreatesOfDifferentNamesOverlap(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	var first atomic.Bool
	inA, bDone := make(chan struct{}), make(chan struct{})
	now := func() time.Time {
		if first.CompareAndSwap(false, true) { // the first call: in a's create
			close(inA)
			select { // a's create waits here until b's is made
			case <-bDone:
			case <-time.After(20 * time.Second):
				t.Error("creating b waited for the creation of a")
			}
		}
		return epoch
	}
	d, err := stores.Open(root, stores.Options{Repo: gitmem.Options{Now: now, Logf: t.Logf, Operator: olive}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	aDone := make(chan error)
	go func() {
		_, err := d.Create("a", stores.Meta{}, gitmem.Signature{})
		aDone <- err
	}()
	<-inA
	if _, err := d.Create("b", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	close(bDone)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}

	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := d.Create("same", stores.Meta{}, gitmem.Signature{})
			errs <- err
		}()
	}
	made := 0
	for range 8 {
		switch err := <-errs; {
		case err == nil:
			made++
		case !errors.Is(err, stores.ErrExists):
			t.Errorf("create same: %v", err)
		}
	}
	if made != 1 {
		t.Errorf("8 creates of one name made %d stores", made)
	}
	for _, name := range []string{"a", "b", "same"} {
		if _, err := d.Get(name); err != nil {
			t.Errorf("get %s: %v", name, err)
		}
	}
}

// Calls on a store that arrive while it is being deleted get what they
// would a moment later: no store (ErrNotFound), and so does a second
// delete. None opens the store meanwhile: no open (and no repair of a
// branch that seems to have vanished) runs on a folder being deleted.
// Before, the delete took the store out of the pool first, so a call
// arriving then opened it afresh: at "delete: closed" (folder in place)
// the calls were served and wrote, and the second delete removed the
// folder under the first, which failed ("rename ...: no such file or
// directory"); a call whose open met the rename answered "damaged".
// Each call is started at the step and either waits (for the delete, or
// for the name) or ends before the delete goes on.
func TestCallsDuringADeleteFindNoStore(t *testing.T) {
	t.Parallel()
	for _, at := range []string{"delete: closed", "delete: renamed"} {
		t.Run(at, func(t *testing.T) {
			t.Parallel()
			d := newDir(t, "", stores.Options{IdleClose: -1})
			if _, err := d.Create("s", stores.Meta{}, gitmem.Signature{}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Get("s"); err != nil { // open in the pool
				t.Fatal(err)
			}
			const calls = 4
			waits := make(chan string, calls)
			results := make(chan string, calls)
			var once sync.Once
			d.OnStep(func(step string) {
				switch step {
				case "waits for a delete", "waits for the name":
					waits <- step
				case at:
					once.Do(func() {
						for i := range calls {
							go func() { results <- callDuringDelete(d, i) }()
						}
						for range calls { // each waits, or has ended
							select {
							case <-waits:
							case r := <-results:
								results <- r
							}
						}
					})
				}
			})
			if err := d.Delete("s"); err != nil {
				t.Errorf("the delete: %v", err)
			}
			for range calls {
				if r := <-results; r != "no store" {
					t.Errorf("a call during the delete: %s", r)
				}
			}
			if left, _ := os.ReadDir(d.Root()); len(left) != 0 {
				t.Errorf("left in the stores folder: %v", left)
			}
		})
	}
}

// callDuringDelete is call i of TestCallsDuringADeleteFindNoStore: a
// write through Acquire and Use, a read of the metadata, or a second
// delete. It says "no store" for ErrNotFound.
func callDuringDelete(d *stores.Dir, i int) string {
	var err error
	switch i % 3 {
	case 0:
		var s *stores.Store
		if s, err = d.Acquire(context.Background(), "s"); err == nil {
			err = s.Use(func(r *gitmem.Repo, _ stores.Meta) error {
				_, err := r.Update(context.Background(), gitmem.Meta{Subject: "memory: test"}, func(tx *gitmem.Tx) error {
					return tx.WriteFile("n.md", []byte("n"))
				})
				return err
			})
			s.Release()
		}
	case 1:
		_, err = d.Get("s")
	case 2:
		err = d.Delete("s")
	}
	if errors.Is(err, stores.ErrNotFound) {
		return "no store"
	}
	return fmt.Sprintf("%d: %v", i, err)
}

// A store whose open failed and whose folder is gone now was deleted
// while it opened (by another process: this one's calls wait for its
// own deletes): there is no store, not a damaged one. The same failure
// of a store still there is its damage.
func TestAnOpenThatMetADeleteFindsNoStore(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{})
	if _, err := d.Create("here", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	damaged := &gitmem.DamagedError{Problem: "the branch refs/heads/main has disappeared (it was at 99c6fe5)", Repair: "run gitmem fsck --repair"}
	if err := d.OpenErr("gone", damaged); !errors.Is(err, stores.ErrNotFound) {
		t.Errorf("gone: %v", err)
	}
	if err := d.OpenErr("here", damaged); !errors.As(err, new(*gitmem.DamagedError)) {
		t.Errorf("here: %v", err)
	}
}

// A call on a store that is being created waits for the create, and
// gets the store it made. Before, it opened the half-made repository:
// a "read HEAD failed" 500 (cannot be opened) while the create was in
// gitmem.Init, or no store once Init was done and the metadata not yet
// written (the case here).
func TestACallDuringACreateGetsTheStore(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{})
	result := make(chan error, 2)
	var once sync.Once
	d.OnStep(func(step string) {
		switch step {
		case "waits for the name":
			result <- nil
		case "create: initialised":
			once.Do(func() {
				go func() {
					_, err := d.Get("s")
					result <- err
				}()
				if err := <-result; err != nil { // waits (nil), or has ended
					result <- err
				}
			})
		}
	})
	if _, err := d.Create("s", stores.Meta{Description: "made"}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	if err := <-result; err != nil {
		t.Errorf("a call during the create: %v", err)
	}
}

// A listing during a delete that waits for a long call leaves the store
// out at once. It waited for the delete, and so for the call: one slow
// client of one store held every listing of the server (N7 G3).
func TestAListingDuringADeleteDoesNotWait(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{IdleClose: -1})
	for _, name := range []string{"a", "s"} {
		if _, err := d.Create(name, stores.Meta{}, gitmem.Signature{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := d.Acquire(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	inCall, endCall := make(chan struct{}), make(chan struct{})
	go s.Use(func(*gitmem.Repo, stores.Meta) error { close(inCall); <-endCall; return nil }) // the long call
	<-inCall
	marked, waited := make(chan struct{}), make(chan struct{}, 1)
	d.OnStep(func(step string) {
		switch step {
		case "delete: marked":
			close(marked)
		case "waits for a delete":
			waited <- struct{}{}
		}
	})
	deleted := make(chan error, 1)
	go func() { deleted <- d.Delete("s") }()
	<-marked
	listed := make(chan []string, 1)
	go func() {
		p, err := d.List(stores.ListOptions{Limit: 10})
		if err != nil {
			t.Error(err)
		}
		var names []string
		for _, i := range p.Items {
			names = append(names, i.Name)
		}
		listed <- names
	}()
	select {
	case names := <-listed:
		if !slices.Equal(names, []string{"a"}) {
			t.Errorf("listed during the delete: %v, want [a]", names)
		}
	case <-waited:
		t.Error("the listing waited for the delete, which waits for the long call")
	}
	close(endCall)
	s.Release()
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
}

// TestBusyStoreMaterialisesTogether: a store that keeps being changed
// has its changes written to git's files together, once every
// stores.WriteEvery (a pack and a move of the branch for several; the
// first change after a quiet spell waits too), where it wrote a pack per
// change (issue 25: with 100 busy stores, those files were most of
// serve's CPU). Counted in the store's pack folder: 50 changes, one every
// 20 ms, make at most one pack per WriteEvery for each of what writes
// them (the maintainer, the checkpoint, the rewrite of .git/index), and
// Flush's; git's branch holds them all after Flush.
func TestBusyStoreMaterialisesTogether(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	d := newDir(t, root, stores.Options{IdleClose: -1})
	if _, err := d.Create("busy", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	s, err := d.Acquire(context.Background(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	packs := func() int {
		names, _ := filepath.Glob(filepath.Join(root, "busy", ".git", "objects", "pack", "*.pack"))
		return len(names)
	}
	const n = 50
	err = s.Use(func(r *gitmem.Repo, _ stores.Meta) error {
		if err := r.Flush(context.Background()); err != nil {
			return err
		}
		was, start := packs(), time.Now()
		for i := range n {
			if _, err := r.Update(context.Background(), gitmem.Meta{Subject: "memory: test"}, func(tx *gitmem.Tx) error {
				return tx.WriteFile("a.md", []byte(fmt.Sprintf("%d\n", i)))
			}); err != nil {
				return err
			}
			time.Sleep(20 * time.Millisecond)
		}
		// One pack a WriteEvery for each of the maintainer, the
		// checkpoint and the index's rewrite, and Flush's, at most.
		took := time.Since(start)
		most := 4 + 3*int(took/stores.WriteEvery)
		if err := r.Flush(context.Background()); err != nil {
			return err
		}
		if got := packs() - was; got > most {
			t.Errorf("%d changes in %v made %d packs; want at most %d", n, took.Round(time.Millisecond), got, most)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, filepath.Join(root, "busy"), "show", "HEAD:memories/a.md"); got != fmt.Sprintf("%d\n", n-1) {
		t.Fatalf("git's HEAD holds a.md = %q", got)
	}
}

// Two processes change one store's metadata at once (a server, and the
// CLI's store update or archive): each change is made on the metadata of
// the commit it builds on, read under the writer lock, so neither undoes
// the other's, and an archive made meanwhile refuses an update (N6 F14).
// Every commit carries the whole metadata: one built from what was read
// before the other's commit put the other's change back as it was.
func TestMetadataChangesOfTwoProcessesAreBothKept(t *testing.T) {
	t.Parallel()
	cli := "cli"
	for _, c := range []struct {
		name         string
		other, mine  func(d *stores.Dir) (stores.Info, error)
		wantErr      error
		wantMeta     map[string]string
		wantArchived bool
		wantHistory  string // Store-Action of the commits after create, newest first
	}{
		{"update/update",
			func(d *stores.Dir) (stores.Info, error) {
				return d.Update("s", stores.Change{Metadata: map[string]*string{"cli": &cli}}, gitmem.Signature{})
			},
			func(d *stores.Dir) (stores.Info, error) {
				return d.Update("s", stores.Change{Metadata: map[string]*string{"api": ptr("api")}}, gitmem.Signature{})
			},
			nil, map[string]string{"user": "u", "cli": "cli", "api": "api"}, false, "update\nupdate\n"},
		{"update/archive",
			func(d *stores.Dir) (stores.Info, error) {
				return d.Update("s", stores.Change{Metadata: map[string]*string{"cli": &cli}}, gitmem.Signature{})
			},
			func(d *stores.Dir) (stores.Info, error) { return d.Archive("s", true, gitmem.Signature{}) },
			nil, map[string]string{"user": "u", "cli": "cli"}, true, "archive\nupdate\n"},
		{"archive/update",
			func(d *stores.Dir) (stores.Info, error) { return d.Archive("s", true, gitmem.Signature{}) },
			func(d *stores.Dir) (stores.Info, error) {
				return d.Update("s", stores.Change{Metadata: map[string]*string{"api": ptr("api")}}, gitmem.Signature{})
			},
			stores.ErrArchived, map[string]string{"user": "u"}, true, "archive\n"},
		{"archive/archive",
			func(d *stores.Dir) (stores.Info, error) { return d.Archive("s", true, gitmem.Signature{}) },
			func(d *stores.Dir) (stores.Info, error) { return d.Archive("s", true, gitmem.Signature{}) },
			nil, map[string]string{"user": "u"}, true, "archive\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := newDir(t, "", stores.Options{})
			if _, err := d.Create("s", stores.Meta{Metadata: map[string]string{"user": "u"}}, gitmem.Signature{}); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Get("s"); err != nil { // open here, its metadata read
				t.Fatal(err)
			}
			flush(t, d, "s")
			other := newDir(t, d.Root(), stores.Options{})
			var once sync.Once
			d.OnStep(func(step string) {
				if step != "metadata change: begun" {
					return
				}
				once.Do(func() {
					if _, err := c.other(other); err != nil {
						t.Errorf("the other process's change: %v", err)
					}
					flush(t, other, "s")
				})
			})
			info, err := c.mine(d)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("this process's change: %+v %v, want %v", info, err, c.wantErr)
			}
			flush(t, d, "s")
			d.Close()
			other.Close()
			got, err := newDir(t, d.Root(), stores.Options{}).Get("s") // a third process
			if err != nil || !maps.Equal(got.Metadata, c.wantMeta) || got.IsArchived() != c.wantArchived {
				t.Errorf("the metadata after both: %+v %v, want %v archived %v", got, err, c.wantMeta, c.wantArchived)
			}
			out := gittest.Git(t, filepath.Join(d.Root(), "s"), "log", "--format=%(trailers:key=Store-Action,valueonly,separator=)")
			if want := c.wantHistory + "create\n\n"; out != want {
				t.Errorf("history:\n%s\nwant\n%s", out, want)
			}
		})
	}
}

// A store whose write-ahead log is damaged (a folder in its place,
// content that is not a log) cannot be opened to write, so every call
// on it fails: a listing by another process (gitmem store list, a
// server that has not opened it) names it as damaged with the writer's
// words, as it names a store whose branch is damaged (N6 F9). The
// listing read the newest metadata commit only, and called it healthy.
func TestListNamesAStoreWhoseLogIsDamaged(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{})
	for _, name := range []string{"folder", "garbage", "fine"} {
		if _, err := d.Create(name, stores.Meta{}, gitmem.Signature{}); err != nil {
			t.Fatal(err)
		}
	}
	d.Close()
	wal := func(name string) string { return filepath.Join(d.Root(), name, ".git", "gitmem", "wal") }
	if err := os.Remove(wal("folder")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(wal("folder"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wal("garbage"), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"folder", "garbage"} {
		gittest.Damaged(t, filepath.Join(d.Root(), name), "its write-ahead log is damaged on purpose")
	}

	other := newDir(t, d.Root(), stores.Options{})
	p, err := other.List(stores.ListOptions{Limit: 10})
	if err != nil || len(p.Items) != 3 {
		t.Fatalf("list: %+v %v", p, err)
	}
	for _, info := range p.Items {
		var damaged *gitmem.DamagedError
		_, opened := other.Get(info.Name) // what every call on it meets
		switch {
		case info.Name == "fine":
			if info.Err != nil || opened != nil {
				t.Errorf("%s: listed %v, opened %v", info.Name, info.Err, opened)
			}
		case !errors.As(info.Err, &damaged) || !strings.Contains(damaged.Problem, "write-ahead log .git/gitmem/wal"):
			t.Errorf("%s: listed as %v, want damaged: its log (opening it to write: %v)", info.Name, info.Err, opened)
		case !errors.As(opened, new(*gitmem.DamagedError)):
			t.Errorf("%s: listed as damaged (%v), but it opens: %v", info.Name, info.Err, opened)
		}
	}
}

// A write's check of the archived flag under the writer turn
// (Store.ArchivedAt) and a metadata read that waits for the turn do not
// wait for each other: the read (Use, Get) holds the entry's metadata
// lock while it waits for the turn to load what another process
// committed, and the check, with the turn held, takes a lock of its own.
// With one lock for both, N6's archrace.sh hung a store's every call.
func TestArchivedCheckAndAMetadataReadDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{IdleClose: -1})
	if _, err := d.Create("s", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	s, err := d.Acquire(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	// The write has read the metadata; it commits once told.
	inUse, goOn, wrote := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		wrote <- s.Use(func(r *gitmem.Repo, _ stores.Meta) error {
			close(inUse)
			<-goOn
			_, err := r.Update(context.Background(), gitmem.Meta{Subject: "w"}, func(tx *gitmem.Tx) error {
				if archived, err := s.ArchivedAt(tx.Head()); err != nil || archived {
					return fmt.Errorf("archived %v: %v", archived, err)
				}
				return tx.WriteFile("b.md", []byte("b"))
			})
			return err
		})
	}()
	<-inUse
	// Another process moves the branch, and holds the writer lock.
	other, err := gitmem.Open(context.Background(), filepath.Join(d.Root(), "s"), gitmem.Options{Now: func() time.Time { return epoch }, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Update(context.Background(), gitmem.Meta{Subject: "moved"}, func(tx *gitmem.Tx) error { return tx.WriteFile("o.md", []byte("o")) }); err != nil {
		t.Fatal(err)
	}
	if err := other.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	held, free, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	go func() {
		defer close(done)
		other.Update(context.Background(), gitmem.Meta{Subject: "held"}, func(*gitmem.Tx) error {
			once.Do(func() { close(held) })
			<-free
			return errors.New("held only")
		})
	}()
	<-held
	close(goOn) // the write takes the turn and waits for the lock
	gittest.WaitForStack(t, "stores_test.TestArchivedCheckAndAMetadataReadDoNotWaitForEachOther", "gitmem.(*Repo).acquire")
	read := make(chan error, 1)
	go func() { _, err := d.Get("s"); read <- err }() // finds the branch moved: waits for the turn
	gittest.WaitForStack(t, "stores.(*entry).current", "gitmem.(*Repo).loadMoved")
	close(free)
	<-done
	for what, ch := range map[string]chan error{"the write": wrote, "the read": read} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(time.Minute): // a hang guard, not a timing
			t.Fatalf("%s never ended: the check and the read wait for each other", what)
		}
	}
}

// A store deleted by another process (gitmem store delete) while this
// one has it open was deleted, not damaged: this process closes it
// without advising a repair (it logged "the branch has disappeared ...
// run gitmem fsck --repair", and "put the branch back failed"), and a
// call that had it already finds no store, as for a delete of its own.
func TestAStoreDeletedByAnotherProcessClosesQuietly(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	var mu sync.Mutex
	var logs []string
	d, err := stores.Open(root, stores.Options{Repo: gitmem.Options{Now: func() time.Time { return epoch }, Operator: olive,
		Logf: func(f string, a ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(f, a...))
			mu.Unlock()
		}}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, name := range []string{"held", "idle"} {
		if _, err := d.Create(name, stores.Meta{}, gitmem.Signature{}); err != nil {
			t.Fatal(err)
		}
	}
	write := func(s *stores.Store, p string) error {
		return s.Use(func(r *gitmem.Repo, _ stores.Meta) error {
			_, err := r.Update(context.Background(), gitmem.Meta{Subject: "w"}, func(tx *gitmem.Tx) error { return tx.WriteFile(p, []byte("x")) })
			return err
		})
	}
	held, err := d.Acquire(context.Background(), "held")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	idle, err := d.Acquire(context.Background(), "idle")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*stores.Store{held, idle} {
		if err := write(s, "a.md"); err != nil {
			t.Fatal(err)
		}
	}
	idle.Release()
	other := newDir(t, root, stores.Options{}) // gitmem store delete
	for _, name := range []string{"held", "idle"} {
		if err := other.Delete(name); err != nil {
			t.Fatal(err)
		}
	}
	if err := write(held, "b.md"); !errors.Is(err, stores.ErrNotFound) {
		t.Errorf("a write on a store deleted since it was acquired: %v", err)
	}
	for _, name := range []string{"held", "idle"} {
		if _, err := d.Get(name); !errors.Is(err, stores.ErrNotFound) {
			t.Errorf("get %s: %v", name, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range logs {
		if strings.Contains(l, "fsck") || strings.Contains(l, "disappeared") || strings.Contains(l, "failed") {
			t.Errorf("logged: %s", l)
		}
	}
	for _, name := range []string{"held", "idle"} {
		if _, err := os.Stat(filepath.Join(root, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the deleted store %s is back: %v", name, err)
		}
	}
}

// A store's own log lines name it: under serve --stores one process logs
// for every store, and "71 file(s) made by hand in memories/ ... remove
// them" (or any other line a store's repository writes) is of no use to
// an operator who cannot tell which store it is about.
func TestAStoresLogLinesNameIt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var lines []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}
	root := gittest.TempDir(t)
	d, err := stores.Open(root, stores.Options{Repo: gitmem.Options{Now: func() time.Time { return epoch }, Logf: logf, Errorf: logf, Operator: olive, MaxFiles: 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.Create("alice", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.md", "b.md", "c.md"} {
		if err := os.WriteFile(filepath.Join(root, "alice", "memories", f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.Close() // the store's next open adopts the files made by hand
	d, err = stores.Open(root, stores.Options{Repo: gitmem.Options{Now: func() time.Time { return epoch }, Logf: logf, Errorf: logf, Operator: olive, MaxFiles: 2}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	flush(t, d, "alice")
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, l := range lines {
		if strings.Contains(l, "made by hand") {
			found = true
			if !strings.HasPrefix(l, "gitmem: store alice: 1 file(s) made by hand in memories/ (memories/c.md first)") {
				t.Errorf("the log line does not name its store: %q", l)
			}
		}
	}
	if !found {
		t.Errorf("no line about the file left:\n%s", strings.Join(lines, "\n"))
	}
}

// A store's metadata is read at every call from the commits made since
// the last one (Use), and checked inside every change from the commits
// since the last change (ArchivedAt): the same commits, each decoded
// once, not once for each. Under the many-stores row's load the two
// walks decoding them twice were 7% of the bytes a call allocated (issue
// 25). The metadata read stays right: an archive is seen.
func TestMetadataReadsDecodeEachCommitOnce(t *testing.T) {
	t.Parallel()
	d := newDir(t, "", stores.Options{IdleClose: -1})
	if _, err := d.Create("s", stores.Meta{}, gitmem.Signature{}); err != nil {
		t.Fatal(err)
	}
	s, err := d.Acquire(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	change := func(i int) error {
		return s.Use(func(r *gitmem.Repo, _ stores.Meta) error {
			_, err := r.Update(context.Background(), gitmem.Meta{Subject: "w"}, func(tx *gitmem.Tx) error {
				if archived, err := s.ArchivedAt(tx.Head()); err != nil || archived {
					return fmt.Errorf("archived %v: %v", archived, err)
				}
				return tx.WriteFile(fmt.Sprintf("f%d.md", i), []byte("x"))
			})
			return err
		})
	}
	if err := change(0); err != nil { // the first reads from where the store opened
		t.Fatal(err)
	}
	was := s.CommitsDecoded()
	const n = 10
	for i := 1; i <= n; i++ {
		if err := change(i); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.CommitsDecoded() - was; got != n {
		t.Errorf("%d changes' metadata reads decoded %d commits, want %d: each once", n, got, n)
	}
	if _, err := d.Archive("s", true, olive); err != nil {
		t.Fatal(err)
	}
	if err := change(n + 1); err == nil || !strings.Contains(err.Error(), "archived true") {
		t.Errorf("a change after the store was archived: %v, want it refused", err)
	}
}
