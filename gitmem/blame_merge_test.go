package gitmem

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// gitBlameHashes is git blame's commit for every line of the memory file
// p at HEAD.
func gitBlameHashes(t *testing.T, dir, p string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(gittest.Git(t, dir, "blame", "--porcelain", "HEAD", "--", memDir+"/"+p), "\n") {
		// A line's header: 40 hex digits, its line in the origin, its line
		// in the result, [the size of its group].
		if f := strings.Fields(l); len(f) >= 3 && len(f[0]) == 40 && !strings.HasPrefix(l, "\t") {
			if _, err := strconv.Atoi(f[2]); err == nil {
				out = append(out, f[0])
			}
		}
	}
	return out
}

// blameAgreesWithGit compares gitmem's blame of every file at HEAD with
// git blame's, line by line.
func blameAgreesWithGit(t *testing.T, r *Repo, what string) {
	t.Helper()
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	fs, err := r.Files("HEAD")
	if err != nil {
		t.Fatal(err)
	}
	for p := range fs {
		lines, err := r.Blame(context.Background(), p)
		if err != nil {
			t.Fatalf("%s: blame %s: %v", what, p, err)
		}
		want := gitBlameHashes(t, r.Dir(), p)
		if len(want) != len(lines) {
			t.Fatalf("%s: %s: gitmem blames %d lines, git %d", what, p, len(lines), len(want))
		}
		bad := 0
		for i, l := range lines {
			if l.Commit.Hash != want[i] {
				if bad++; bad <= 5 {
					got, _ := r.Commit(context.Background(), l.Commit.Hash)
					exp, _ := r.Commit(context.Background(), want[i])
					t.Errorf("%s: %s line %d %q: gitmem names %s %q (%s), git blame %s %q (%s)", what, p, i+1, l.Text,
						l.Commit.Hash[:7], got.Subject, got.Trailer(TrailerToolUseID), want[i][:7], exp.Subject, exp.Trailer(TrailerToolUseID))
				}
			}
		}
		if bad > 0 {
			t.Fatalf("%s: %s: %d of %d lines blamed on another commit than git blame names", what, p, bad, len(lines))
		}
	}
}

// blameEdit is one tool call on a file in the random histories: a line
// inserted, replaced or deleted, a conflict resolved, a file made.
func blameEdit(t *testing.T, rng *rand.Rand, r *Repo, id string) {
	t.Helper()
	// The second file moves round other.md, notes/other.md (the same
	// name), moved.md.
	next := map[string]string{"other.md": "notes/other.md", "notes/other.md": "moved.md", "moved.md": "other.md"}
	// Where it is now: the memory as acknowledged (a Snapshot; not
	// r.Files("HEAD"), which reads git's pack indexes anew at every call,
	// ~40% of this test's CPU).
	other := "other.md"
	v, err := r.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	for _, q := range []string{"other.md", "notes/other.md", "moved.md"} {
		if _, err := v.Stat(q); err == nil {
			other = q
		}
	}
	if rng.IntN(12) == 0 { // a rename (then edits and merges follow it)
		to := next[other]
		_, err := r.Update(context.Background(), Meta{Subject: "memory: rename", Trailers: []Trailer{{TrailerToolUseID, id}, {TrailerCommand, "rename"},
			{TrailerPath, "/memories/" + other}, {TrailerNewPath, "/memories/" + to}}},
			func(tx *Tx) error { return tx.Rename(other, to) })
		if err == nil || errors.Is(err, ErrNotExist) || errors.Is(err, ErrExist) {
			return
		}
		t.Fatalf("%s: rename %s: %v", id, other, err)
	}
	p := []string{"shared.md", "shared.md", other}[rng.IntN(3)]
	// Lines are mostly unique; some repeat (a blank line, a common note),
	// so that a diff has more than one way to match them.
	newLine := func() string {
		switch rng.IntN(8) {
		case 0:
			return "\n"
		case 1:
			return "- same note\n"
		default:
			return fmt.Sprintf("%s line %d\n", id, rng.IntN(1000))
		}
	}
	cmd := ""
	_, err = r.Update(context.Background(), Meta{Subject: "memory: edit /memories/" + p, Trailers: []Trailer{{TrailerToolUseID, id}, {TrailerCommand, "str_replace"}, {TrailerPath, "/memories/" + p}}},
		func(tx *Tx) error {
			data, err := tx.ReadFile(p)
			if err != nil {
				cmd = "create"
				return tx.WriteFile(p, []byte(newLine()+newLine()))
			}
			lines := splitKeep(string(data))
			var markers []int
			for i, l := range lines {
				if strings.HasPrefix(l, markerOurs) || l == markerSep || strings.HasPrefix(l, markerTheirs) {
					markers = append(markers, i)
				}
			}
			switch k := rng.IntN(10); {
			case len(markers) > 0 && k < 3:
				cmd = "resolve"
				var kept []string
				for i, l := range lines {
					if len(markers) > 0 && markers[0] == i {
						markers = markers[1:]
						continue
					}
					kept = append(kept, l)
				}
				lines = kept
			case k < 5 || len(lines) == 0:
				cmd = "insert"
				at := rng.IntN(len(lines) + 1)
				var ins []string
				for range 1 + rng.IntN(3) {
					ins = append(ins, newLine())
				}
				lines = append(lines[:at], append(ins, lines[at:]...)...)
			case k < 8:
				cmd = "replace"
				lines[rng.IntN(len(lines))] = newLine()
			default:
				cmd = "delete"
				at := rng.IntN(len(lines))
				lines = append(lines[:at], lines[at+1:]...)
			}
			return tx.WriteFile(p, []byte(strings.Join(lines, "")))
		})
	if err != nil {
		t.Fatalf("%s (%s %s): %v", id, cmd, p, err)
	}
}

// TestBlameAgreesWithGitAfterMerges builds histories of three agents at
// random (seeded): tool calls on two shared files, syncs through a bare
// remote, and pulls straight from one another, which make criss-cross
// merges; merges where both sides changed one file in different places
// or in the same (conflicts, later resolved by a tool call); lines a merge
// takes unchanged from its second parent. After each history gitmem's
// blame of every file, in every agent, must name the commit git blame
// names for every line.
func TestBlameAgreesWithGitAfterMerges(t *testing.T) {
	t.Parallel()
	seeds := gittest.Size(t, 2, 6)
	if v, err := strconv.Atoi(os.Getenv("GITMEM_BLAME_SEEDS")); err == nil {
		seeds = v
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 21))
			remote := bareRemote(t)
			names := []string{"a", "b", "c"}
			agents := make([]*Repo, len(names))
			for i, n := range names {
				agents[i] = agent(t, remote, n)
				if i == 0 {
					syncOK(t, agents[0])
				}
			}
			for i, r := range agents {
				for j, n := range names {
					if j != i {
						if err := r.AddRemote("peer-"+n, agents[j].Dir()); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			calls := 0
			for step := range 120 {
				i := rng.IntN(len(agents))
				r := agents[i]
				switch k := rng.IntN(10); {
				case k < 6:
					calls++
					blameEdit(t, rng, r, fmt.Sprintf("t%d%s", calls, names[i]))
				case k < 8: // straight from a peer: criss-cross merges
					j := (i + 1 + rng.IntN(len(agents)-1)) % len(agents)
					if err := agents[j].Flush(context.Background()); err != nil {
						t.Fatal(err)
					}
					if _, err := r.Pull(context.Background(), "peer-"+names[j], SyncOptions{}); err != nil {
						t.Fatalf("step %d: %s pulls %s: %v", step, names[i], names[j], err)
					}
				default:
					syncOK(t, r)
				}
			}
			for i, r := range agents {
				blameAgreesWithGit(t, r, fmt.Sprintf("seed %d, agent %s", seed, names[i]))
				gittest.Fsck(t, r.Dir())
			}
			// The histories hold what they are for: criss-cross merges
			// (two merge bases), conflicts.
			crisscross := 0
			for _, l := range strings.Split(strings.TrimSpace(gittest.Git(t, agents[0].Dir(), "rev-list", "--merges", "--parents", "HEAD")), "\n") {
				if f := strings.Fields(l); len(f) == 3 && strings.Count(gittest.Git(t, agents[0].Dir(), "merge-base", "--all", f[1], f[2]), "\n") > 1 {
					crisscross++
				}
			}
			conflicts := strings.Count(gittest.Git(t, agents[0].Dir(), "log", "--format=%(trailers:key=Memory-Conflict,valueonly)"), "content")
			if crisscross == 0 || conflicts == 0 {
				t.Errorf("the history has %d criss-cross merges, %d conflicts", crisscross, conflicts)
			}
		})
	}
}
