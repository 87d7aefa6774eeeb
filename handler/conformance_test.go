package handler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/handler"
	"github.com/gitmem-dev/gitmem/internal/nodetest"
	"github.com/gitmem-dev/gitmem/policy"
)

// reference drives the Anthropic TypeScript SDK's file backend through
// testdata/reference/harness.js (installed by .ci/run with npm).
type reference struct {
	cmd *exec.Cmd
	in  *json.Encoder
	out *bufio.Scanner
}

// startReference starts the harness, on a folder of its own; a test that
// runs several sessions starts each over with restart rather than
// starting a process for each.
func startReference(t *testing.T) *reference {
	t.Helper()
	dir := nodetest.Harness(t, "testdata/reference", "@anthropic-ai/sdk")
	cmd := exec.Command("node", filepath.Join(dir, "harness.js"), t.TempDir())
	// The harness runs one call at a time: libuv's pool of 4 threads,
	// woken for each file operation, took half of node's CPU (1,800
	// calls: 7.2 s with 4 threads, 3.7 s with 1).
	cmd.Env = append(os.Environ(), "UV_THREADPOOL_SIZE=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 64<<20)
	return &reference{cmd: cmd, in: json.NewEncoder(stdin), out: sc}
}

// restart starts the harness over on a new empty folder of t's, as a
// harness of its own would.
func (r *reference) restart(t *testing.T) {
	t.Helper()
	if err := r.in.Encode(map[string]any{"base": t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if !r.out.Scan() || r.out.Text() != "{}" {
		t.Fatalf("reference harness did not start over: %q %v", r.out.Text(), r.out.Err())
	}
}

func (r *reference) call(t *testing.T, input map[string]any) handler.Result {
	t.Helper()
	if err := r.in.Encode(input); err != nil {
		t.Fatal(err)
	}
	if !r.out.Scan() {
		t.Fatalf("reference harness ended: %v", r.out.Err())
	}
	var res struct {
		Content string `json:"content"`
		IsError bool   `json:"is_error"`
	}
	if err := json.Unmarshal(r.out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	return handler.Result{Content: res.Content, IsError: res.IsError}
}

// normalizeSizes blanks the size column of folder lines in a listing:
// gitmem prints the total size of the files beneath a folder, the
// reference the folder inode's size (a documented difference).
func normalizeSizes(content string) string {
	if !strings.HasPrefix(content, "Here're the files") {
		return content
	}
	lines := strings.Split(content, "\n")
	for i, l := range lines {
		size, p, ok := strings.Cut(l, "\t")
		if ok && (i == 1 || strings.HasSuffix(p, "/")) && size != "" {
			lines[i] = "-\t" + p
		}
	}
	return strings.Join(lines, "\n")
}

// session generates random memory tool calls that stay out of the domains
// where gitmem deliberately differs from the reference (docs/protocol.md,
// "Differences from the reference"); those have their own tests.
type session struct {
	rng  *rand.Rand
	snap func() *gitmem.View
}

var (
	dirs  = []string{"", "a", "b", "a/c", "a/c/d", "node_modules", ".hid"}
	names = []string{"x.md", "y.txt", "notes", ".dot", "Ü.md", "z z"}
	words = []string{"alpha", "beta", "gamma", "delta", "x", "yy", "", "color: blue", "é", "$&", "tab\there"}
)

func (s *session) text() string {
	var lines []string
	for range s.rng.IntN(6) {
		lines = append(lines, words[s.rng.IntN(len(words))]+" "+words[s.rng.IntN(len(words))])
	}
	t := strings.Join(lines, "\n")
	if s.rng.IntN(2) == 0 {
		t += "\n"
	}
	return t
}

func (s *session) anyPath() string {
	d := dirs[s.rng.IntN(len(dirs))]
	if s.rng.IntN(4) == 0 && d != "" {
		return d
	}
	return strings.TrimPrefix(d+"/"+names[s.rng.IntN(len(names))], "/")
}

// files and folders that exist now, from gitmem's own state.
func (s *session) existing() (files, folders []string) {
	v := s.snap()
	var walk func(rel string)
	walk = func(rel string) {
		kids, _ := v.List(rel)
		for _, k := range kids {
			p := strings.TrimPrefix(rel+"/"+k.Name, "/")
			if k.Dir {
				folders = append(folders, p)
				walk(p)
			} else {
				files = append(files, p)
			}
		}
	}
	walk("")
	return files, folders
}

// parentIsFile: the reference leaks an OS error (ENOTDIR) there.
func (s *session) parentIsFile(rel string, files []string) bool {
	for _, f := range files {
		if strings.HasPrefix(rel, f+"/") {
			return true
		}
	}
	return false
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

func (s *session) next() map[string]any {
	files, folders := s.existing()
	mem := func(rel string) string { return policy.Display(rel) }
	anyPath := func() string {
		for {
			if p := s.anyPath(); !s.parentIsFile(p, files) {
				return p
			}
		}
	}
	for {
		switch s.rng.IntN(9) {
		case 0, 1:
			p := anyPath()
			return map[string]any{"command": "create", "path": mem(p), "file_text": s.text()}
		case 2:
			if len(folders) == 0 || s.rng.IntN(3) == 0 {
				return map[string]any{"command": "view", "path": "/memories"}
			}
			return map[string]any{"command": "view", "path": mem(pick(s.rng, folders))}
		case 3:
			if len(files) == 0 {
				continue
			}
			in := map[string]any{"command": "view", "path": mem(pick(s.rng, files))}
			if s.rng.IntN(2) == 0 {
				a := s.rng.IntN(5)
				b := []int{-1, a, a + s.rng.IntN(4), -2 - s.rng.IntN(3)}[s.rng.IntN(4)] // [-1, -2]: JavaScript's slice
				in["view_range"] = []int{a, b}
			}
			return in
		case 4:
			if len(files) == 0 {
				continue
			}
			f := pick(s.rng, files)
			data, _ := s.snap().ReadFile(f)
			content := string(data)
			old := pick(s.rng, words)
			if len(content) > 0 && s.rng.IntN(3) > 0 {
				i := s.rng.IntN(len(content))
				j := min(len(content), i+1+s.rng.IntN(6))
				old = content[i:j]
			}
			if old == "" || strings.Contains(old, "\n") || !sameVerdict(content, old) || !utf8Boundaries(old) {
				continue
			}
			return map[string]any{"command": "str_replace", "path": mem(f), "old_str": old, "new_str": s.text()}
		case 5:
			if len(files) == 0 {
				continue
			}
			f := pick(s.rng, files)
			data, _ := s.snap().ReadFile(f)
			n := policy.CountLines(string(data))
			line := s.rng.IntN(n + 1)
			if s.rng.IntN(6) == 0 && len(data) > 0 && !strings.HasSuffix(string(data), "\n") {
				line = n + 1 + s.rng.IntN(2) // out of range where both count alike
			}
			return map[string]any{"command": "insert", "path": mem(f), "insert_line": line, "insert_text": s.text()}
		case 6:
			all := append(append([]string{}, files...), folders...)
			if len(all) == 0 || s.rng.IntN(5) == 0 {
				return map[string]any{"command": "delete", "path": mem(anyPath())}
			}
			return map[string]any{"command": "delete", "path": mem(pick(s.rng, all))}
		case 7:
			all := append(append([]string{}, files...), folders...)
			if len(all) == 0 {
				continue
			}
			from, to := pick(s.rng, all), anyPath()
			if s.rng.IntN(5) == 0 {
				from = anyPath()
			}
			if strings.HasPrefix(to, from+"/") || s.parentIsFile(to, files) || to == from {
				continue
			}
			return map[string]any{"command": "rename", "old_path": mem(from), "new_path": mem(to)}
		case 8:
			return map[string]any{"command": "view", "path": mem(anyPath())}
		}
	}
}

// sameVerdict: gitmem counts occurrences over the whole file (overlapping
// ones too), the reference counts lines that contain old_str. They agree
// when no line holds old_str twice.
func sameVerdict(content, old string) bool {
	for _, line := range strings.Split(content, "\n") {
		if n := strings.Count(line, old); n > 1 || n == 1 && strings.Index(line, old) != strings.LastIndex(line, old) {
			return false
		}
		if i := strings.Index(line, old); i >= 0 && strings.Contains(line[i+1:], old) {
			return false
		}
	}
	return true
}

func utf8Boundaries(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestConformanceWithReferenceSDK(t *testing.T) {
	t.Parallel()
	const sessions, calls = 12, 150
	ref := startReference(t)
	for seed := range uint64(sessions) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			ref.restart(t)
			h, repo := newHandler(t, policy.Limits{})
			s := &session{rng: rand.New(rand.NewPCG(seed, 7)), snap: func() *gitmem.View {
				v, err := repo.Snapshot(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return v
			}}
			for i := range calls {
				input := s.next()
				raw, _ := json.Marshal(input)
				got := call(h, fmt.Sprintf("toolu_%d_%d", seed, i), string(raw))
				want := ref.call(t, input)
				if normalizeSizes(got.Content) != normalizeSizes(want.Content) || got.IsError != want.IsError {
					t.Fatalf("call %d %s:\ngitmem    (is_error=%v) %q\nreference (is_error=%v) %q",
						i, raw, got.IsError, got.Content, want.IsError, want.Content)
				}
			}
			// The final trees are identical.
			if err := ref.in.Encode(map[string]any{"dump": true}); err != nil || !ref.out.Scan() {
				t.Fatal("no dump from the reference")
			}
			var refTree map[string]string
			json.Unmarshal(ref.out.Bytes(), &refTree)
			ours := map[string]string{}
			files, _ := s.existing()
			for _, f := range files {
				data, _ := s.snap().ReadFile(f)
				ours[f] = string(data)
			}
			if !maps.Equal(ours, refTree) {
				t.Fatalf("final trees differ:\ngitmem    %v\nreference %v", slices.Sorted(maps.Keys(ours)), slices.Sorted(maps.Keys(refTree)))
			}
		})
	}
}

// The reference's known bugs, each run through both backends: the
// reference shows the bug, gitmem the documented behaviour.
func TestReferenceBugsAreAvoided(t *testing.T) {
	t.Parallel()
	ref := startReference(t)
	for _, tc := range []struct {
		name      string
		setup     []map[string]any
		call      map[string]any
		refBroken func(handler.Result) bool // the reference's result shows the bug
		ours      string
	}{
		{
			name:      "/memoriesX is taken as /memories/X",
			call:      map[string]any{"command": "create", "path": "/memoriesX/a.md", "file_text": "x"},
			refBroken: func(r handler.Result) bool { return !r.IsError },
			ours:      "Error: Path must start with /memories, got: /memoriesX/a.md",
		},
		{
			name:      "multi-line old_str never matches",
			setup:     []map[string]any{{"command": "create", "path": "/memories/f", "file_text": "a\nb\nc\n"}},
			call:      map[string]any{"command": "str_replace", "path": "/memories/f", "old_str": "a\nb", "new_str": "x"},
			refBroken: func(r handler.Result) bool { return r.IsError },
			ours:      "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tx\n     2\tc\n     3\t",
		},
		{
			name:      "two occurrences on one line count as one",
			setup:     []map[string]any{{"command": "create", "path": "/memories/f", "file_text": "ab ab\n"}},
			call:      map[string]any{"command": "str_replace", "path": "/memories/f", "old_str": "ab", "new_str": "x"},
			refBroken: func(r handler.Result) bool { return !r.IsError },
			ours:      "Error: No replacement was performed. Multiple occurrences of old_str `ab` in lines: 1. Please ensure it is unique",
		},
		{
			name:      "a trailing newline counts as a line for insert",
			setup:     []map[string]any{{"command": "create", "path": "/memories/f", "file_text": "a\n"}},
			call:      map[string]any{"command": "insert", "path": "/memories/f", "insert_line": 2, "insert_text": "x"},
			refBroken: func(r handler.Result) bool { return !r.IsError },
			ours:      "Error: Invalid `insert_line` parameter: 2. It should be within the range of lines of the file: [0, 1]",
		},
		{
			name:  "OS errors leak the host path",
			setup: []map[string]any{{"command": "create", "path": "/memories/f", "file_text": "a"}},
			call:  map[string]any{"command": "create", "path": "/memories/f/child", "file_text": "x"},
			refBroken: func(r handler.Result) bool {
				return strings.Contains(r.Content, "/tmp/") || strings.Contains(r.Content, "ENOTDIR") || strings.Contains(r.Content, "EEXIST")
			},
			ours: "Error: Cannot create /memories/f/child: one of its parent folders is a file",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref.restart(t)
			h, _ := newHandler(t, policy.Limits{})
			for i, in := range tc.setup {
				raw, _ := json.Marshal(in)
				call(h, fmt.Sprint("setup", i), string(raw))
				ref.call(t, in)
			}
			raw, _ := json.Marshal(tc.call)
			if got := call(h, "toolu_case", string(raw)); got.Content != tc.ours {
				t.Errorf("gitmem: %q\nwant     %q", got.Content, tc.ours)
			}
			if r := ref.call(t, tc.call); !tc.refBroken(r) {
				t.Errorf("the reference no longer shows this bug (%q); update docs/protocol.md", r.Content)
			}
		})
	}
}
