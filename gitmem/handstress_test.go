package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Item 2 under load: hand edits (appends through os.OpenFile with
// O_APPEND, as `echo x >> a.md` does) land while the model keeps changing
// the same files and serve adopts in the background. Every edit whose
// write succeeded must end up in HEAD's history or in the worktree: none
// may be overwritten by a change gitmem mirrors to the worktree, whenever
// it lands (before the drift check, between the check and the rename, or
// after an adopt read the file). The run is bounded by a count of hand
// edits and a deadline, not by a timing assertion.
func TestHandEditsUnderLoadAreNeverLost(t *testing.T) {
	gittest.Serial(t, "a load test: writers, hand edits and adopts as fast as they go, bounded by a deadline")
	r, dir := quietRepo(t)
	files := []string{"a.md", "b.md", "c.md"}
	for i, f := range files {
		write(t, r, fmt.Sprint("seed", i), f, "seed "+f+"\n")
	}
	settle(t, r)

	const hands = 1500
	deadline := time.Now().Add(4 * time.Second)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var calls atomic.Int64
	// The model: inserts at the top, replaces its own line, deletes and
	// creates c.md again.
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				f := files[(i+w)%len(files)]
				id := fmt.Sprintf("m%d-%d", w, i)
				meta := Meta{Subject: "model " + f, Trailers: []Trailer{{TrailerToolUseID, id}}}
				var err error
				switch {
				case f == "c.md" && i%4 == 0:
					_, err = r.Update(context.Background(), meta, func(tx *Tx) error { return tx.Remove(f) })
				case f == "c.md" && i%4 == 1:
					_, err = r.Update(context.Background(), meta, func(tx *Tx) error {
						if _, err := tx.Stat(f); err == nil {
							return ErrExist
						}
						return tx.WriteFile(f, []byte("created "+id+"\n"))
					})
				case i%3 == 0:
					_, err = r.Update(context.Background(), meta, func(tx *Tx) error {
						data, err := tx.ReadFile(f)
						if err != nil {
							return err
						}
						return tx.WriteFile(f, []byte(strings.Replace(string(data), "seed", "SEED "+id, 1)))
					})
				default:
					_, err = r.Update(context.Background(), meta, func(tx *Tx) error {
						data, err := tx.ReadFile(f)
						if err != nil {
							return err
						}
						return tx.WriteFile(f, append([]byte("model "+id+"\n"), data...))
					})
				}
				if err != nil && !errors.Is(err, ErrNotExist) && !errors.Is(err, ErrExist) {
					t.Errorf("%s: %v", id, err)
					return
				}
				calls.Add(1)
			}
		}()
	}
	// serve's background adopt (--adopt-every), and views of the files.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
				t.Errorf("adopt: %v", err)
				return
			}
			if _, err := r.Snapshot(context.Background(), files[i%len(files)]); err != nil {
				t.Errorf("view: %v", err)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// The operator.
	var written []string
	for i := 0; i < hands && time.Now().Before(deadline); i++ {
		marker := fmt.Sprintf("hand-%d-end", i)
		f, err := os.OpenFile(filepath.Join(dir, "memories", files[i%len(files)]), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			continue // deleted by the model just now
		}
		if _, err := f.WriteString(marker + "\n"); err == nil {
			written = append(written, marker)
		}
		f.Close()
		if i%8 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	stop.Store(true)
	wg.Wait()
	if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
		t.Fatal(err)
	}
	settle(t, r)

	var all strings.Builder
	all.WriteString(gittest.Git(t, dir, "log", "-p", "--format=", "HEAD"))
	for _, f := range files {
		all.WriteString(readDisk(t, dir, f))
	}
	text := all.String()
	var lost []string
	for _, m := range written {
		if !strings.Contains(text, m) {
			lost = append(lost, m)
		}
	}
	perFile := map[string]int{}
	for _, m := range lost {
		var i int
		fmt.Sscanf(m, "hand-%d-end", &i)
		perFile[files[i%len(files)]]++
	}
	t.Logf("%d hand edits, %d model calls, %d lost %v", len(written), calls.Load(), len(lost), perFile)
	if len(lost) > 0 {
		t.Fatalf("%d of %d hand edits lost, e.g. %v", len(lost), len(written), lost[:min(len(lost), 5)])
	}
}

// errValueGone is what a load test's str_replace returns when the value
// the model last wrote is not in the file: an acknowledged change was
// taken back.
var errValueGone = errors.New("the value last written is gone")

// replaceOnce is str_replace: old replaced by new in data, once.
func replaceOnce(data []byte, old, new string) ([]byte, error) {
	if !strings.Contains(string(data), old) {
		return nil, errValueGone
	}
	return []byte(strings.Replace(string(data), old, new, 1)), nil
}

// quietRepo is newRepo without its log (a load test logs thousands of
// "kept" lines).
func quietRepo(t *testing.T, set ...func(*Options)) (*Repo, string) {
	t.Helper()
	dir := gittest.TempDir(t)
	opt := testOptions(t)
	opt.Logf = func(string, ...any) {}
	for _, f := range set {
		f(&opt)
	}
	r, _, err := Init(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir
}

// appendHand appends a line to memories/p as `echo line >> p` does.
func appendHand(t *testing.T, dir, p, line string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "memories", p), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

// changeBehindTheWorktree writes a.md as "one\ntwo\n", then as
// "ONE\ntwo\n" while the worktree has not caught up (the disk lock
// held), runs meanwhile then, and lets the worktree follow.
func changeBehindTheWorktree(t *testing.T, r *Repo, meanwhile func()) {
	t.Helper()
	keepWriterLock(t, r) // t2 is written with the disk lock held
	write(t, r, "t1", "a.md", "one\ntwo\n")
	settle(t, r)
	r.disk.hold()
	write(t, r, "t2", "a.md", "ONE\ntwo\n")
	meanwhile()
	r.disk.mu.Unlock()
	settle(t, r)
}

// A hand edit of a file an adopt has just read and merged (the edit kept
// from before an acknowledged change): the merge gitmem writes must not
// replace a second edit made after the read.
func TestHandEditAfterAnAdoptReadIsKept(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	keepWriterLock(t, r)
	changeBehindTheWorktree(t, r, func() { appendHand(t, dir, "a.md", "first by hand") }) // kept, to be merged
	r.disk.hold()
	if _, err := r.Adopt(context.Background()); err != nil { // reads the file, merges
		t.Fatal(err)
	}
	appendHand(t, dir, "a.md", "second by hand")
	r.disk.mu.Unlock()
	settle(t, r)
	if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
		t.Fatal(err)
	}
	settle(t, r)
	got := read(t, r, "a.md")
	for _, want := range []string{"ONE\n", "first by hand\n", "second by hand\n"} {
		if !strings.Contains(got, want) {
			t.Fatalf("HEAD's a.md = %q, lacks %q", got, want)
		}
	}
	if disk := readDisk(t, dir, "a.md"); disk != got {
		t.Fatalf("worktree %q, HEAD %q", disk, got)
	}
}

// A hand edit that lands between the check for hand edits and the write
// of the acknowledged change (the write step's fault hook makes it land
// there) is merged into it; one on a file the change deletes keeps the
// file.
func TestHandEditBetweenCheckAndWriteIsKept(t *testing.T) {
	t.Parallel()
	r, dir := newRepo(t)
	write(t, r, "t1", "a.md", "one\ntwo\n")
	write(t, r, "t2", "b.md", "bee\n")
	settle(t, r)
	var once sync.Once
	r.objects.st.Env.SetFault(func(step, p string) error {
		if step == gd.StepWorktree && (strings.HasSuffix(p, "a.md") || strings.HasSuffix(p, "b.md")) {
			once.Do(func() {
				appendHand(t, dir, "a.md", "by hand")
				appendHand(t, dir, "b.md", "by hand")
			})
		}
		return nil
	})
	defer r.objects.st.Env.SetFault(nil)
	_, err := r.Update(context.Background(), Meta{Subject: "change", Trailers: []Trailer{{TrailerToolUseID, "t3"}}}, func(tx *Tx) error {
		if err := tx.WriteFile("a.md", []byte("ONE\ntwo\n")); err != nil {
			return err
		}
		return tx.Remove("b.md")
	})
	if err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	r.objects.st.Env.SetFault(nil)
	if _, err := r.Adopt(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, r)
	if got, want := read(t, r, "a.md"), "ONE\ntwo\nby hand\n"; got != want {
		t.Fatalf("a.md = %q, want %q", got, want)
	}
	if got, want := read(t, r, "b.md"), "bee\nby hand\n"; got != want {
		t.Fatalf("b.md = %q, want %q", got, want)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("git status:\n%s", st)
	}
}

// Items 3 and 4 of issue 21 under load: the operator edits the files the
// model is changing the way most programs write a file — read it, change
// it, write it whole (open with O_TRUNC, then write) — appending a marked
// line, while two writers str_replace their own value lines in the same
// files and serve adopts in the background. Between the truncation and
// the write the file is empty or partial; the program's copy holds the
// model's values as they were when it read them, which may be older than
// what reached the worktree since (it writes in two parts, as a program
// writing a larger file does). No adopt may take a half-written file,
// no write may be lost with a file gitmem replaced, and no adopt may put
// an older value of the model's back: every str_replace finds the value
// the model last wrote, every marker reaches HEAD's history, and HEAD
// ends with every acknowledged value and no conflict (the edits never
// touch the same lines). Every read the program makes finds its own last
// edit, but in the instant gitmem puts back an edit that landed while it
// wrote the file (then it reads again: see exchanges). The run is bounded
// by a count of edits and a deadline.
func TestTruncatingHandEditsBesideTheModel(t *testing.T) {
	gittest.Serial(t, "a load test: writers, truncating hand edits and adopts as fast as they go, bounded by a deadline")
	files := []string{"a.md", "b.md", "c.md"}
	// exchanges tells when gitmem writes a file over what may be a hand
	// edit (syncChecked: from its look for one to its end), counted as
	// they begin and end, with those under way. An edit that lands after
	// the look is taken aside as gitmem's version is put in place, and put
	// back after: no file system swaps a file only if it is unchanged. A
	// program that reads the file in that instant (under load, for
	// milliseconds) is shown gitmem's version, and one that rewrites the
	// whole file from that read writes it without its own last edit,
	// which the adopt can only keep beside that edit between conflict
	// markers. Ours reads again when the exchange that hid its edit was
	// under way when it wrote it; in any other case its own last edit
	// must be there (an edit made before the look is never taken aside).
	type exchanging struct{ seq, open atomic.Int64 }
	exchanges := map[string]*exchanging{}
	for _, f := range files {
		exchanges[full(f)] = &exchanging{}
	}
	r, dir := quietRepo(t, func(opt *Options) {
		opt.hooks.exchange = func(q string, open bool) {
			if x := exchanges[q]; x != nil {
				if open {
					x.open.Add(1)
				} else {
					x.open.Add(-1)
				}
				x.seq.Add(1)
			}
		}
	})
	for i, f := range files {
		write(t, r, fmt.Sprint("seed", i), f, fmt.Sprintf("m0-%s: 0\nfiller\nm1-%s: 0\nfiller\nfiller\n", f, f))
	}
	settle(t, r)

	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]int{} // "m<w>-<file>: " -> the last value acknowledged
	var missed []string       // values a str_replace did not find
	calls := 0
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := map[string]int{}
			for i := 0; !stop.Load(); i++ {
				f := files[(i+w)%len(files)]
				key := fmt.Sprintf("m%d-%s: ", w, f)
				old, new := fmt.Sprintf("%s%d\n", key, n[f]), fmt.Sprintf("%s%d\n", key, n[f]+1)
				meta := Meta{Subject: "model " + f, Trailers: []Trailer{{TrailerToolUseID, fmt.Sprintf("m%d-%d", w, i)}}}
				_, err := r.Update(context.Background(), meta, func(tx *Tx) error {
					data, err := tx.ReadFile(f)
					if err == nil {
						data, err = replaceOnce(data, old, new)
					}
					if err != nil {
						return err
					}
					return tx.WriteFile(f, data)
				})
				mu.Lock()
				switch {
				case errors.Is(err, errValueGone):
					missed = append(missed, strings.TrimSpace(old))
				case err != nil:
					t.Errorf("%s: %v", meta.ID(), err)
				default:
					n[f]++
					acked[key] = n[f]
					calls++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // serve's background adopt (--adopt-every)
		defer wg.Done()
		for !stop.Load() {
			if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
				t.Errorf("adopt: %v", err)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	const hands = 300
	var written []string
	deadline := time.Now().Add(4 * time.Second)
	var hidden []string              // edits the next read did not find, but in the exchange they were written in
	reread := 0                      // reads made again: in the exchange the last edit was written in
	wroteIn := map[string][2]int64{} // file -> exchanges' seq and open when its last edit was written
	for i := 0; i < hands && time.Now().Before(deadline); i++ {
		name := files[i%len(files)]
		p := filepath.Join(dir, "memories", name)
		x := exchanges[full(name)]
		var data []byte
		for {
			seq, open := x.seq.Load(), x.open.Load()
			var err error
			if data, err = os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
			if i < len(files) || strings.Contains(string(data), fmt.Sprintf("hand-%d-end\n", i-len(files))) {
				break
			}
			if w := wroteIn[name]; seq != w[0] || w[1] == 0 || open == 0 {
				// Not the exchange under way when the edit was written.
				hidden = append(hidden, fmt.Sprintf("hand-%d-end", i-len(files)))
				break
			}
			reread++
			time.Sleep(time.Millisecond)
		}
		marker := fmt.Sprintf("hand-%d-end", i)
		// Written in two parts, as a program writing a larger file does.
		data = append(data, marker+"\n"...)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		half := len(data) / 2
		_, err = f.Write(data[:half])
		runtime.Gosched()
		if err == nil {
			_, err = f.Write(data[half:])
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		written = append(written, marker)
		wroteIn[name] = [2]int64{x.seq.Load(), x.open.Load()}
		time.Sleep(2 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	for range 2 {
		if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
			t.Fatal(err)
		}
		settle(t, r)
	}

	history := gittest.Git(t, dir, "log", "-p", "--format=", "HEAD")
	var lost []string
	for _, m := range written {
		if !strings.Contains(history, "+"+m+"\n") {
			lost = append(lost, m)
		}
	}
	head := ""
	for _, f := range files {
		head += read(t, r, f)
	}
	var rolledBack []string
	for k, v := range acked {
		if !strings.Contains(head, fmt.Sprintf("%s%d\n", k, v)) {
			rolledBack = append(rolledBack, fmt.Sprintf("%s%d", k, v))
		}
	}
	t.Logf("%d hand edits, %d model calls, %d reads made again (taken while gitmem put an edit back)", len(written), calls, reread)
	if len(hidden) > 0 {
		t.Errorf("the worktree did not show %d hand edits to the next read, outside any exchange: %v", len(hidden), hidden)
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d hand edits never reached a commit, e.g. %v", len(lost), len(written), lost[:min(len(lost), 5)])
	}
	if len(missed) > 0 || len(rolledBack) > 0 {
		t.Errorf("acknowledged values rolled back: not found by the next str_replace %v, not in HEAD %v", missed, rolledBack)
	}
	if n := strings.Count(head, "<<<<<<<"); n > 0 {
		t.Errorf("%d conflict blocks in HEAD:\n%s", n, head)
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
	gittest.Fsck(t, dir)
}

// Item 2 of issue 21 under load: `git reset --hard HEAD~5` three times
// while two writers insert lines into and str_replace values in the same
// files and serve adopts in the background. Each reset's branch move is
// undone, and so is what it wrote to the worktree: no adopt commit is
// made (nobody edits by hand here), every str_replace finds the value the
// model last wrote, and HEAD ends with every inserted line and every last
// value.
func TestResetHardUnderLoad(t *testing.T) {
	gittest.Serial(t, "a load test: two writers, adopts and git reset --hard as fast as they go")
	r, dir := quietRepo(t)
	files := []string{"a.md", "b.md", "c.md"}
	for i, f := range files {
		write(t, r, fmt.Sprint("seed", i), f, fmt.Sprintf("v0-%s: 0\nfiller\nv1-%s: 0\n", f, f))
	}
	settle(t, r)
	const calls = 300 // per writer
	var wg sync.WaitGroup
	var mu sync.Mutex
	var inserted, missed []string
	values := map[string]int{}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := map[string]int{}
			for i := range calls {
				f := files[(i+w)%len(files)]
				key := fmt.Sprintf("v%d-%s: ", w, f)
				old, new := fmt.Sprintf("%s%d\n", key, n[f]), fmt.Sprintf("%s%d\n", key, n[f]+1)
				line := fmt.Sprintf("ins-%d-%d\n", w, i)
				_, err := r.Update(context.Background(), Meta{Subject: "model " + f, Trailers: []Trailer{{TrailerToolUseID, fmt.Sprintf("m%d-%d", w, i)}}}, func(tx *Tx) error {
					data, err := tx.ReadFile(f)
					switch {
					case err != nil:
					case i%2 == 0:
						data = append(data, line...)
					default:
						data, err = replaceOnce(data, old, new)
					}
					if err != nil {
						return err
					}
					return tx.WriteFile(f, data)
				})
				mu.Lock()
				switch {
				case errors.Is(err, errValueGone):
					missed = append(missed, strings.TrimSpace(old))
				case err != nil:
					t.Errorf("m%d-%d: %v", w, i, err)
				case i%2 == 0:
					inserted = append(inserted, line)
				default:
					n[f]++
					values[key] = n[f]
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	var adopts sync.WaitGroup
	adopts.Add(1)
	go func() { // serve's background adopt
		defer adopts.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := r.Adopt(context.Background()); err != nil && !errors.Is(err, ErrNoChange) {
				t.Errorf("adopt: %v", err)
			}
		}
	}()
	resets := 0
	for try := 0; resets < 3 && try < 100; try++ {
		time.Sleep(20 * time.Millisecond)
		if gittest.Command(t, dir, "reset", "-q", "--hard", "HEAD~5").Run() == nil { // else gitmem moved the branch meanwhile, or held a lock
			resets++
		}
	}
	wg.Wait()
	close(stop)
	adopts.Wait()
	settle(t, r)
	if resets == 0 {
		t.Fatal("no reset went through")
	}
	head := ""
	for _, f := range files {
		head += read(t, r, f)
	}
	var lost []string
	for _, l := range inserted {
		if !strings.Contains(head, l) {
			lost = append(lost, strings.TrimSpace(l))
		}
	}
	for k, v := range values {
		if !strings.Contains(head, fmt.Sprintf("%s%d\n", k, v)) {
			lost = append(lost, fmt.Sprintf("%s%d", k, v))
		}
	}
	t.Logf("%d resets, %d inserts", resets, len(inserted))
	if len(lost) > 0 || len(missed) > 0 {
		t.Errorf("acknowledged content gone from HEAD: %v; str_replaces that found no value: %v", lost[:min(len(lost), 8)], missed)
	}
	if log := subjects(t, dir); strings.Contains(log, "adopt") {
		t.Errorf("%d adopt commit(s):\n%s", strings.Count(log, "adopt"), gittest.Git(t, dir, "log", "-p", "--grep=adopt", "--format=%h %s"))
	}
	for _, f := range files {
		if got := readDisk(t, dir, f); got != read(t, r, f) {
			t.Errorf("worktree %s differs from HEAD", f)
		}
	}
	if st := gittest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("git status:\n%s", st)
	}
	gittest.Fsck(t, dir)
}
