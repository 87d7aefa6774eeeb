package gitmem

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// The history benchmarks run on a generated repository: 10,000 files in
// 10x10 folders and 100,000 commits, one a minute, each a str_replace
// with real trailers; 1,000 of them edit one "hot" file of 200 lines.
// GITMEM_BENCH_COMMITS changes the size (-short: 5,000).
//
//	go test ./gitmem -run '^$' -bench History -benchtime 5x -timeout 60m

const hotFile = "d0/s0/hot.md"

var benchEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func historySize() (files, commits int) {
	files, commits = 10000, 100000
	if testing.Short() {
		commits = 5000
	}
	if s := os.Getenv("GITMEM_BENCH_COMMITS"); s != "" {
		commits, _ = strconv.Atoi(s)
	}
	return files, commits
}

var genDir string

// genHistory builds the repository once per process: objects go into an
// in-memory store and then into one pack, which is much faster than a
// loose object file each.
func genHistory(b *testing.B) string {
	if genDir != "" {
		return genDir
	}
	files, commits := historySize()
	dir, err := os.MkdirTemp("", "gitmem-history-")
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	r, _, err := Init(context.Background(), dir, Options{Logf: func(string, ...any) {}, Operator: Signature{"op", "op@x"}, Now: func() time.Time { return benchEpoch }})
	if err != nil {
		b.Fatal(err)
	}
	mem := memory.NewStorage()
	put := func(t plumbing.ObjectType, data []byte, _ plumbing.Hash) (plumbing.Hash, error) {
		o := &plumbing.MemoryObject{}
		o.SetType(t)
		o.Write(data)
		return mem.SetEncodedObject(o)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	name := func(i int) string { return fmt.Sprintf("d%d/s%d/f%04d.md", i/1000, i/100%10, i) }
	var root *node
	set := func(p string, data []byte) {
		h, _ := put(plumbing.BlobObject, data, plumbing.ZeroHash)
		root, err = with(root, split(memDir+"/"+p), &node{mode: 0o100644, hash: h, size: int64(len(data))})
		if err != nil {
			b.Fatal(err)
		}
	}
	hot := make([]string, 200)
	for i := range hot {
		hot[i] = fmt.Sprintf("hot line %d\n", i)
	}
	parent, _ := r.readHead()
	commit := func(n int, msg string) {
		tree, err := writeTrees(put, root, nil)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := encodeCommit(tree, parentList(parent), Signature{"bench", "bench@x"}, Signature{"gitmem", "gitmem@x"},
			benchEpoch.Add(time.Duration(n)*time.Minute), msg)
		parent, _ = put(plumbing.CommitObject, raw, plumbing.ZeroHash)
	}
	n := 0
	for i := 0; i < files; i++ {
		set(name(i), []byte(fmt.Sprintf("memory %d\n", i)))
		if i%1000 == 999 {
			commit(n, "memory: seed\n")
			n++
		}
	}
	set(hotFile, []byte(strings.Join(hot, "")))
	for ; n < commits; n++ {
		p := name(rng.IntN(files))
		if n%(commits/1000+1) == 0 {
			p = hotFile
			hot[rng.IntN(len(hot))] = fmt.Sprintf("hot edit %d\n", n)
			set(p, []byte(strings.Join(hot, "")))
		} else {
			set(p, []byte(fmt.Sprintf("memory %s\nrevision %d\n", p, n)))
		}
		commit(n, fmt.Sprintf("memory: str_replace /memories/%s\n\nTool-Use-Id: toolu_gen_%d\nMemory-Command: str_replace\nMemory-Path: /memories/%s\nSession: s%d\n", p, n, p, n%50))
	}
	// All objects into one pack, the branch to the last commit, and the
	// worktree written out, as gitmem would have left it.
	var hashes []plumbing.Hash
	iter, _ := mem.IterEncodedObjects(plumbing.AnyObject)
	iter.ForEach(func(o plumbing.EncodedObject) error { hashes = append(hashes, o.Hash()); return nil })
	pw, err := r.objects.st.Storage().PackfileWriter()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := packfile.NewEncoder(pw, mem, false).Encode(hashes, 0); err != nil {
		b.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		b.Fatal(err)
	}
	old, _ := r.readHead()
	if err := r.objects.st.UpdateRef(context.Background(), r.branch, old, parent, true); err != nil {
		b.Fatal(err)
	}
	r.Close()
	walkFiles(lookup(root, memDir), "", func(p string, nd *node) {
		o, _ := mem.EncodedObject(plumbing.BlobObject, nd.hash)
		rd, _ := o.Reader()
		data, _ := io.ReadAll(rd)
		full := filepath.Join(dir, memDir, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o700)
		os.WriteFile(full, data, 0o600)
	})
	b.Logf("generated %d files, %d commits in %v", files, commits, time.Since(start).Round(time.Millisecond))
	// The first open builds the history index from git: the cold start.
	t0 := time.Now()
	r, err = Open(context.Background(), dir, Options{Logf: func(string, ...any) {}, Operator: Signature{"op", "op@x"}})
	if err != nil {
		b.Fatal(err)
	}
	r.Close()
	b.Logf("cold open (history index built from git): %v", time.Since(t0).Round(time.Millisecond))
	genDir = dir
	return dir
}

func gitTime(b *testing.B, dir string, args ...string) {
	cmd := gittest.Command(b, dir, args...)
	var stderr strings.Builder
	cmd.Stdout = io.Discard
	if args[0] != "log" && args[0] != "blame" {
		cmd.Stdout = &stderr
	}
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, stderr.String())
	}
}

func BenchmarkHistory(b *testing.B) {
	dir := genHistory(b)
	ro := Options{ReadOnly: true, Logf: func(string, ...any) {}}
	open := func(b *testing.B) *Repo {
		r, err := Open(context.Background(), dir, ro)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	ctx := context.Background()
	b.Run("log-first-page/gitmem", func(b *testing.B) {
		for range b.N {
			r := open(b) // as the CLI does: open, read the index, print 20
			n := 0
			r.Log(ctx, LogOptions{Limit: 20}, nil, func(c Commit) error { n++; return nil })
			r.Close()
			if n != 20 {
				b.Fatalf("%d commits", n)
			}
		}
	})
	b.Run("log-first-page/git", func(b *testing.B) {
		for range b.N {
			gitTime(b, dir, "log", "-n", "20", "--format=%h %ad %s")
		}
	})
	b.Run("log-full/gitmem", func(b *testing.B) {
		for range b.N {
			r := open(b)
			r.Log(ctx, LogOptions{}, nil, func(c Commit) error {
				_, err := fmt.Fprintln(io.Discard, c.Hash[:7], c.Time.Format(time.DateTime), c.Subject, c.Trailer(TrailerToolUseID))
				return err
			})
			r.Close()
		}
	})
	b.Run("log-full/git", func(b *testing.B) {
		for range b.N {
			gitTime(b, dir, "log", "--format=%h %ad %s %(trailers:key=Tool-Use-Id,valueonly)")
		}
	})
	b.Run("log-path/gitmem", func(b *testing.B) {
		for range b.N {
			r := open(b)
			n := 0
			r.Log(ctx, LogOptions{Paths: []string{hotFile}}, nil, func(c Commit) error { n++; return nil })
			r.Close()
			if n < 100 {
				b.Fatalf("%d commits touch the hot file", n)
			}
		}
	})
	b.Run("log-path/git", func(b *testing.B) {
		for range b.N {
			gitTime(b, dir, "log", "--format=%h", "--", memDir+"/"+hotFile)
		}
	})
	b.Run("blame/gitmem", func(b *testing.B) {
		for range b.N {
			r := open(b)
			lines, err := r.Blame(ctx, hotFile)
			r.Close()
			if err != nil || len(lines) != 200 {
				b.Fatalf("%d lines, %v", len(lines), err)
			}
		}
	})
	b.Run("blame/git", func(b *testing.B) {
		for range b.N {
			gitTime(b, dir, "blame", "-s", memDir+"/"+hotFile)
		}
	})
	_, commits := historySize()
	cutoff := benchEpoch.Add(time.Duration(commits/2) * time.Minute)
	b.Run("expire-dry-run/gitmem", func(b *testing.B) {
		for range b.N {
			r := open(b)
			stale, err := r.StaleFiles(context.Background(), cutoff, nil, nil)
			r.Close()
			if err != nil || len(stale) == 0 {
				b.Fatalf("%d stale, %v", len(stale), err)
			}
		}
	})
	b.Run("expire-dry-run/git", func(b *testing.B) {
		for range b.N { // the same question to git: every file's last change, in one pass
			gitTime(b, dir, "log", "--format=%ct", "--name-only")
		}
	})
	// Revert recent commits that did not touch the hot file (reverting an
	// old hot edit may legitimately merge to nothing).
	var plain []int
	for n := commits - 1; len(plain) < 400 && n > 0; n-- {
		if n%(commits/1000+1) != 0 {
			plain = append(plain, n)
		}
	}
	nextG, nextGit := 0, 200 // across b.N rounds: never the same commit twice
	b.Run("revert/gitmem", func(b *testing.B) {
		r, err := Open(context.Background(), dir, Options{Logf: func(string, ...any) {}, Operator: Signature{"op", "op@x"}})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		b.ResetTimer()
		for range b.N {
			nextG++
			if _, _, err := r.Revert(context.Background(), []string{fmt.Sprintf("toolu_gen_%d", plain[nextG%200])}, RevertOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("revert/git", func(b *testing.B) {
		for range b.N {
			nextGit++
			sha := strings.TrimSpace(gittest.Git(b, dir, "log", "-1", "--format=%H", fmt.Sprintf("--grep=toolu_gen_%d$", plain[nextGit%400])))
			gitTime(b, dir, "revert", "--no-edit", sha)
		}
	})
}

// BenchmarkStart opens the generated repository for writing (what `serve`
// does at start, warm: the history index and .git/index exist) and takes
// a view, then closes it; it reports the heap the open repository holds.
func BenchmarkStart(b *testing.B) {
	dir := genHistory(b)
	opt := Options{Logf: func(string, ...any) {}, Operator: Signature{"op", "op@x"}}
	var heap uint64
	for range b.N {
		r, err := Open(context.Background(), dir, opt)
		if err != nil {
			b.Fatal(err)
		}
		if v, err := r.Snapshot(context.Background()); err != nil || v.Head() == "" {
			b.Fatal(err)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = max(heap, ms.HeapInuse)
		r.Close()
	}
	b.ReportMetric(float64(heap)/(1<<20), "MiB-heap")
}
