// Many agents sharing one memory through one remote: random tool calls
// through the real handler, syncs at random moments, then checks that
// nothing acknowledged was lost and every repository agrees.
package gitmem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/gittest"
	"github.com/gitmem-dev/gitmem/policy"
)

// gitOut runs git in dir and returns its output, leaving a failure of
// git to the caller.
func gitOut(t *testing.T, dir string, args ...string) (string, error) {
	out, err := gittest.Command(t, dir, args...).Output()
	return string(out), err
}

// longRun says whether the long modes of the sharing tests are on
// (GITMEM_SYNC_LONG=1): more calls, more agents. When a check fails,
// GITMEM_SYNC_DEBUG=1 logs where a lost line was on each side, and
// GITMEM_SYNC_KEEP=DIR keeps a copy of every agent's repository in DIR.
func longRun() bool { return os.Getenv("GITMEM_SYNC_LONG") != "" }

func bare(t *testing.T) string {
	dir := filepath.Join(gittest.TempDir(t), "shared.git")
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", dir)
	return dir
}

// sharer is one agent: its clone, its handler and what it was told.
type sharer struct {
	name  string
	repo  *gitmem.Repo
	h     *handler.Handler
	rng   *rand.Rand
	mu    sync.Mutex
	acked []string // tool_use ids of successful changes
	syncs atomic.Int64
	retry atomic.Int64
}

var tokenRE = regexp.MustCompile(`tok-[a-z0-9]+-[0-9]+(?:-[0-9]+)?`)

func newSharer(t *testing.T, remote, name string, seed uint64) *sharer {
	t.Helper()
	dir := filepath.Join(gittest.TempDir(t), name)
	repo, _, err := gitmem.Clone(context.Background(), remote, dir, gitmem.Options{
		Operator: gitmem.Signature{Name: "op-" + name, Email: "op@example.com"},
		Logf:     func(string, ...any) {},
	}, gitmem.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	return &sharer{name: name, repo: repo, h: handler.New(repo, handler.Options{Limits: policy.DefaultLimits}), rng: rand.New(rand.NewPCG(seed, 7))}
}

var sharePaths = []string{"a.md", "b.md", "c.md", "dir/d.md", "dir/e.md", "x/y/z.md"}

// files lists the memory's files with their content.
func memFiles(t *testing.T, r *gitmem.Repo, rev string) map[string]string {
	t.Helper()
	fs, err := r.Files(rev)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for p, h := range fs {
		data, err := r.Blob(h)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(data)
	}
	return out
}

// call makes one random tool call; it returns the call's id when it
// changed the memory.
func (s *sharer) call(t *testing.T, n int) {
	id := fmt.Sprintf("toolu_%s_%d", s.name, n)
	tok := fmt.Sprintf("tok-%s-%d", s.name, n)
	p := "/memories/" + sharePaths[s.rng.IntN(len(sharePaths))]
	in := map[string]any{"path": p}
	view, _ := s.repo.Snapshot(context.Background())
	rel := strings.TrimPrefix(p, "/memories/")
	cur, _ := view.ReadFile(rel)
	lines := tokenRE.FindAllString(string(cur), -1)
	switch k := s.rng.IntN(20); {
	case k < 5 || len(cur) == 0:
		in["command"] = "create"
		in["file_text"] = tok + "-0\n" + tok + "-1\n"
	case k < 10 && len(lines) > 0:
		in["command"] = "str_replace"
		in["old_str"] = lines[s.rng.IntN(len(lines))] + "\n"
		in["new_str"] = tok + "\n"
	case k < 16:
		in["command"] = "insert"
		in["insert_line"] = s.rng.IntN(strings.Count(string(cur), "\n") + 1)
		in["insert_text"] = tok + "\n"
	case k < 18:
		in["command"] = "delete"
	default:
		in = map[string]any{"command": "rename", "old_path": p, "new_path": "/memories/" + sharePaths[s.rng.IntN(len(sharePaths))]}
	}
	input, _ := json.Marshal(in)
	block, _ := json.Marshal(map[string]any{"type": "tool_use", "id": id, "name": "memory", "input": json.RawMessage(input)})
	res := s.h.HandleJSON(context.Background(), handler.Caller{Agent: s.name}, block)
	if !res.IsError {
		s.mu.Lock()
		s.acked = append(s.acked, id)
		s.mu.Unlock()
	} else if strings.Contains(res.Content, "could not complete") {
		t.Errorf("%s: %s", id, res.Content)
	}
}

func (s *sharer) sync(t *testing.T) {
	res, err := s.repo.Sync(context.Background(), "origin", gitmem.SyncOptions{Retries: 50})
	if err != nil {
		t.Errorf("%s: sync: %v", s.name, err)
		return
	}
	s.syncs.Add(1)
	s.retry.Add(int64(res.Retries))
}

// TestAgentsShareAMemory: three agents, each making a few hundred random
// calls (many on the same files and lines) and syncing at random moments
// while they work.
func TestAgentsShareAMemory(t *testing.T) {
	t.Parallel()
	calls := 120
	if longRun() {
		calls = 600
	}
	if testing.Short() {
		calls = 40
	}
	remote := bare(t)
	var agents []*sharer
	for i, name := range []string{"ann", "bob", "cai"} {
		agents = append(agents, newSharer(t, remote, name, uint64(i+1)))
	}
	history := watchRemote(t, remote)
	runAgents(t, agents, calls)
	final := converge(t, agents)
	checkShared(t, agents, remote, final)
	history.check(t, final)
}

// TestManyAgentsLoad: 20 agents push to one remote at the same moment,
// round after round (each agent makes a few calls, then all sync at
// once); all converge and nothing is lost. The push retries (a sync found
// the remote moved and merged again) are the contention on one branch.
func TestManyAgentsLoad(t *testing.T) {
	gittest.Long(t, "20 agents sync at once, round after round")
	gittest.Serial(t, "20 agents in one process sync at once: it keeps both cores busy")
	n, rounds, calls := 20, 1, 3
	if longRun() {
		rounds = 10
	}
	if testing.Short() {
		n = 8
	}
	remote := bare(t)
	var agents []*sharer
	for i := range n {
		agents = append(agents, newSharer(t, remote, fmt.Sprintf("ag%02d", i), uint64(100+i)))
	}
	history := watchRemote(t, remote)
	start := time.Now()
	for round := range rounds {
		var wg sync.WaitGroup
		began := time.Now()
		for _, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range calls {
					a.call(t, round*calls+i)
				}
			}()
		}
		wg.Wait()
		release := make(chan struct{})
		for _, a := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-release
				a.sync(t)
			}()
		}
		close(release)
		wg.Wait()
		var retries int64
		for _, a := range agents {
			retries += a.retry.Swap(0)
		}
		t.Logf("round %d: %d agents synced at once in %s, %d push retries", round+1, n, time.Since(began).Round(time.Millisecond), retries)
	}
	final := converge(t, agents)
	checkShared(t, agents, remote, final)
	history.check(t, final)
	t.Logf("%d agents, %d rounds: %s", n, rounds, time.Since(start).Round(time.Millisecond))
}

// runAgents runs every agent's calls and, beside them, its syncs at
// random moments.
func runAgents(t *testing.T, agents []*sharer, calls int) {
	var wg sync.WaitGroup
	for _, a := range agents {
		done := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(done)
			for i := range calls {
				a.call(t, i)
				if a.rng.IntN(8) == 0 {
					time.Sleep(time.Duration(a.rng.IntN(5)) * time.Millisecond)
				}
			}
		}()
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(len(a.name)), uint64(a.name[len(a.name)-1])))
			for {
				select {
				case <-done:
					return
				case <-time.After(time.Duration(rng.IntN(40)) * time.Millisecond):
					a.sync(t)
				}
			}
		}()
	}
	wg.Wait()
}

// converge syncs every agent until all hold the same commit.
func converge(t *testing.T, agents []*sharer) string {
	for round := 0; round < 5; round++ {
		for _, a := range agents {
			a.sync(t)
		}
		heads := map[string]bool{}
		var head string
		for _, a := range agents {
			c, err := a.repo.Commit(context.Background(), "HEAD")
			if err != nil {
				t.Fatal(err)
			}
			heads[c.Hash], head = true, c.Hash
		}
		if len(heads) == 1 {
			return head
		}
	}
	t.Fatal("the agents did not converge")
	return ""
}

// remoteWatch records every commit the remote's branch pointed at.
type remoteWatch struct {
	mu   sync.Mutex
	seen map[string]bool
	stop chan struct{}
	dir  string
}

func watchRemote(t *testing.T, dir string) *remoteWatch {
	w := &remoteWatch{seen: map[string]bool{}, stop: make(chan struct{}), dir: dir}
	go func() {
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if data, err := os.ReadFile(filepath.Join(dir, "refs", "heads", "main")); err == nil {
				w.mu.Lock()
				w.seen[strings.TrimSpace(string(data))] = true
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// check: the remote's history only grew — every commit its branch ever
// pointed at is in the final history.
func (w *remoteWatch) check(t *testing.T, final string) {
	close(w.stop)
	w.mu.Lock()
	defer w.mu.Unlock()
	all := map[string]bool{}
	for _, h := range strings.Fields(gittest.Git(t, w.dir, "rev-list", final)) {
		all[h] = true
	}
	for h := range w.seen {
		if !all[h] {
			t.Errorf("the remote's branch pointed at %s, which the final history lacks: it was overwritten", h)
		}
	}
	t.Logf("the remote's branch moved %d times", len(w.seen))
}

// checkShared checks the shared history: every repository at the same
// commit with the same files on disk; every acknowledged id in the
// history; no merge dropped a line either side added or both kept; every
// line an acknowledged call wrote is in the final memory unless a named
// commit removed it; both sides of every conflict readable; git fsck
// clean everywhere.
func checkShared(t *testing.T, agents []*sharer, remote, final string) {
	r := agents[0].repo
	want := memFiles(t, r, final)
	for _, a := range agents {
		if got := memFiles(t, a.repo, "HEAD"); !maps.Equal(got, want) {
			t.Errorf("%s's memory differs from %s's", a.name, agents[0].name)
		}
		if err := a.repo.Flush(context.Background()); err != nil {
			t.Errorf("%s: flush: %v", a.name, err)
		}
		if out := gittest.Git(t, a.repo.Dir(), "status", "--porcelain"); out != "" {
			diff, _ := gitOut(t, a.repo.Dir(), "diff")
			t.Errorf("%s's worktree differs from its HEAD:\n%s%s", a.name, out, diff)
		}
		gittest.Fsck(t, a.repo.Dir())
	}
	gittest.Fsck(t, remote)
	if got := strings.TrimSpace(gittest.Git(t, remote, "rev-parse", "main")); got != final {
		t.Errorf("the remote is at %s, the agents at %s", got, final)
	}

	// The history, with each commit's tokens.
	type rec struct {
		c      gitmem.Commit
		tokens map[string]bool
	}
	recs := map[string]*rec{}
	ids := map[string]bool{}
	blobTokens := map[string][]string{}
	err := r.Log(context.Background(), gitmem.LogOptions{}, nil, func(c gitmem.Commit) error {
		ids[c.Trailer(gitmem.TrailerToolUseID)] = true
		fs, err := r.Files(c.Hash)
		if err != nil {
			return err
		}
		toks := map[string]bool{}
		for _, h := range fs {
			if _, ok := blobTokens[h]; !ok {
				data, err := r.Blob(h)
				if err != nil {
					return err
				}
				blobTokens[h] = tokenRE.FindAllString(string(data), -1)
			}
			for _, tk := range blobTokens[h] {
				toks[tk] = true
			}
		}
		recs[c.Hash] = &rec{c, toks}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	for _, a := range agents {
		for _, id := range a.acked {
			acked++
			if !ids[id] {
				t.Errorf("%s was acknowledged but is not in the shared history", id)
			}
		}
	}
	// Every merge kept what either side added and what both kept.
	merges, conflicts := 0, 0
	for _, x := range recs {
		if len(x.c.Parents) != 2 {
			continue
		}
		merges++
		p1, p2 := recs[x.c.Parents[0]], recs[x.c.Parents[1]]
		if p1 == nil || p2 == nil {
			t.Fatalf("merge %s: a parent is not in the history", x.c.Hash)
		}
		// What a side added is what no merge base holds (after criss-cross
		// merges there are several, and a merge may use any of them).
		// Agents that started on an empty remote share none.
		base := &rec{tokens: map[string]bool{}}
		out, _ := gitOut(t, r.Dir(), "merge-base", "--all", x.c.Parents[0], x.c.Parents[1])
		for _, h := range strings.Fields(out) {
			if recs[h] == nil {
				t.Fatalf("merge %s: the merge base %s is not in the history", x.c.Hash, h)
			}
			maps.Copy(base.tokens, recs[h].tokens)
		}
		for _, side := range []*rec{p1, p2} {
			other := p1
			if side == p1 {
				other = p2
			}
			for tk := range side.tokens {
				if (!base.tokens[tk] || other.tokens[tk]) && !x.tokens[tk] {
					t.Errorf("merge %s lost %s", x.c.Hash[:7], tk)
					if os.Getenv("GITMEM_SYNC_DEBUG") != "" {
						bases, _ := gitOut(t, r.Dir(), "merge-base", "--all", x.c.Parents[0], x.c.Parents[1])
						where := func(rev string) string {
							out, _ := gitOut(t, r.Dir(), "grep", "-n", tk, rev, "--", "memories")
							return out
						}
						t.Logf("  bases %q\n  p1 %s: %s\n  p2 %s: %s\n  base: %s\n  merge msg: %s", bases, x.c.Parents[0][:7], where(x.c.Parents[0]), x.c.Parents[1][:7], where(x.c.Parents[1]), where(strings.TrimSpace(bases)), x.c.Body)
					}
				}
			}
		}
		for _, tr := range x.c.Trailers {
			if tr.Key != gitmem.TrailerConflict {
				continue
			}
			conflicts++
			kind, path, _ := strings.Cut(tr.Value, " ")
			if kind != "content" && kind != "add/add" {
				continue
			}
			data, err := r.ReadFileAt(context.Background(), x.c.Hash, strings.TrimPrefix(path, "/memories/"))
			if err != nil || !strings.Contains(string(data), "<<<<<<< local ") || !strings.Contains(string(data), "\n=======\n") || !strings.Contains(string(data), ">>>>>>> origin/main ") {
				t.Errorf("merge %s: the conflict in %s is not readable: %q %v", x.c.Hash[:7], path, data, err)
			}
		}
	}
	// Every line an acknowledged call wrote is in the final memory, or a
	// named (non-merge) commit removed it.
	removed := map[string]bool{}
	for _, x := range recs {
		if len(x.c.Parents) != 1 || x.c.Trailer(gitmem.TrailerToolUseID) == "" {
			continue
		}
		for tk := range recs[x.c.Parents[0]].tokens {
			if !x.tokens[tk] {
				removed[tk] = true
			}
		}
	}
	finalTokens := recs[final].tokens
	written := 0
	for _, x := range recs {
		id := x.c.Trailer(gitmem.TrailerToolUseID)
		if id == "" || len(x.c.Parents) != 1 {
			continue
		}
		for tk := range x.tokens {
			if !strings.HasPrefix(tk, "tok-"+strings.TrimPrefix(id, "toolu_")[:strings.Index(strings.TrimPrefix(id, "toolu_"), "_")]) {
				continue
			}
			written++
			if !finalTokens[tk] && !removed[tk] {
				t.Errorf("%s (written by %s) is missing and no named commit removed it", tk, id)
			}
		}
	}
	if keep := os.Getenv("GITMEM_SYNC_KEEP"); keep != "" && t.Failed() {
		for _, a := range agents {
			exec.Command("cp", "-a", a.repo.Dir(), filepath.Join(keep, a.name)).Run()
		}
	}
	t.Logf("%d acknowledged changes, %d commits, %d merges, %d conflicts, %d lines checked",
		acked, len(recs), merges, conflicts, len(slices.Collect(maps.Keys(finalTokens))))
	_ = written
}
