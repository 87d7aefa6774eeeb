package gitmem

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// gitChanged runs one git diff -U0 on each pair of texts (a[i], b[i])
// and returns, for each pair, the lines of each side that it marks
// changed (0-based): one git process for all the pairs, each a file of
// two folders.
func gitChanged(t *testing.T, dir string, a, b [][]string) (ca, cb []map[int]bool) {
	t.Helper()
	for _, side := range []struct {
		name  string
		texts [][]string
	}{{"a", a}, {"b", b}} {
		os.MkdirAll(filepath.Join(dir, side.name), 0o700)
		for i, text := range side.texts {
			os.WriteFile(filepath.Join(dir, side.name, fmt.Sprint(i)), []byte(strings.Join(text, "")), 0o600)
		}
	}
	cmd := gittest.Command(t, dir, "diff", "--no-index", "--no-renames", "--no-color", "-U0", "a", "b")
	out, err := cmd.Output()
	if err != nil && cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("git diff: %v", err)
	}
	for range a {
		ca, cb = append(ca, map[int]bool{}), append(cb, map[int]bool{})
	}
	file := regexp.MustCompile(`^diff --git a/a/(\d+) b/b/(\d+)$`)
	hunk := regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)
	at := -1
	for _, l := range strings.Split(string(out), "\n") {
		if m := file.FindStringSubmatch(l); m != nil {
			if m[1] != m[2] {
				t.Fatalf("git diff paired %s with %s", m[1], m[2])
			}
			at, _ = strconv.Atoi(m[1])
			continue
		}
		m := hunk.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for _, side := range []struct {
			start, count string
			set          map[int]bool
		}{{m[1], m[2], ca[at]}, {m[3], m[4], cb[at]}} {
			s, _ := strconv.Atoi(side.start)
			n := 1
			if side.count != "" {
				n, _ = strconv.Atoi(side.count)
			}
			for i := range n {
				side.set[s-1+i] = true
			}
		}
	}
	return ca, cb
}

// TestGitDiffMatchesGit checks the port of git's diff against git diff
// -U0 (the same diff, trim of a common tail included): on random texts
// made of few distinct lines (so that many matches tie), indented and
// blank lines (the indent heuristic), texts large enough for xdiff's cost
// heuristics, and common tails over 1 KiB, it marks the same lines of
// each side changed.
func TestGitDiffMatchesGit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(9, 21))
	vocab := []string{"a\n", "b\n", "c\n", "\n", "\n", "  x\n", "\ty\n", "    z\n", "}\n", "if {\n", "- same note\n", "   \n"}
	line := func(unique int) string {
		if rng.IntN(4) < unique {
			return fmt.Sprintf("%sline %d\n", strings.Repeat(" ", rng.IntN(3)*2), rng.IntN(1<<30))
		}
		return vocab[rng.IntN(len(vocab))]
	}
	text := func(n, unique int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = line(unique)
		}
		return out
	}
	edit := func(a []string, edits, unique int) []string {
		b := append([]string{}, a...)
		for range edits {
			at := rng.IntN(len(b) + 1)
			switch rng.IntN(4) {
			case 0: // insert
				b = append(b[:at], append(text(1+rng.IntN(4), unique), b[at:]...)...)
			case 1: // delete
				if at < len(b) {
					b = append(b[:at], b[min(len(b), at+1+rng.IntN(3)):]...)
				}
			case 2: // move a block
				if n := len(b); n > 2 {
					i, k := rng.IntN(n), 1+rng.IntN(3)
					blk := append([]string{}, b[i:min(n, i+k)]...)
					b = append(b[:i], b[min(n, i+k):]...)
					at = rng.IntN(len(b) + 1)
					b = append(b[:at], append(blk, b[at:]...)...)
				}
			default: // replace
				if at < len(b) {
					b[at] = line(unique)
				}
			}
		}
		return b
	}
	// check takes a case: the port's changed lines are compared with git's
	// once every case is drawn, with one git process.
	// The large texts cost the most (the race detector's share): a
	// quarter as many of them in the quick part.
	per := gittest.Size(t, 1, 4)
	var as, bs [][]string
	var oas, obs []map[int]bool
	check := func(a, b []string) {
		t.Helper()
		cases := len(as) + 1
		m := gitMatch(a, b)
		oa, ob := map[int]bool{}, map[int]bool{}
		matched := map[int]bool{}
		last := -1
		for i, j := range m {
			if j < 0 {
				ob[i] = true
				continue
			}
			if j <= last || a[j] != b[i] {
				t.Fatalf("case %d: line %d matched to %d (after %d): %q vs %q", cases, i, j, last, b[i], a[j])
			}
			last, matched[j] = j, true
		}
		for i := range a {
			if !matched[i] {
				oa[i] = true
			}
		}
		as, bs, oas, obs = append(as, a), append(bs, b), append(oas, oa), append(obs, ob)
	}
	for range 150 { // small, with many ties
		a := text(rng.IntN(30), rng.IntN(3))
		check(a, edit(a, 1+rng.IntN(6), rng.IntN(3)))
	}
	for range 60 { // unrelated texts from a small vocabulary
		check(text(rng.IntN(40), 0), text(rng.IntN(40), 0))
	}
	for range 3 * per { // large and heavily edited: the cost heuristics
		a := text(600+rng.IntN(1500), rng.IntN(4))
		check(a, edit(a, 200+rng.IntN(600), rng.IntN(4)))
	}
	for range 12 { // a common tail of more than 1 KiB
		a := text(20+rng.IntN(40), rng.IntN(3))
		tail := text(150+rng.IntN(150), 2)
		b := edit(a, 1+rng.IntN(5), 1)
		if rng.IntN(2) == 0 {
			tail[len(tail)-1] = strings.TrimSuffix(tail[len(tail)-1], "\n") // no final newline
		}
		check(append(a, tail...), append(b, tail...))
	}
	for range max(1, per/2) { // blocks kept and replaced, over 65,536 diagonals: the snake heuristic
		// Lines of a vocabulary of 2,000, so that each has matches on
		// the other side (none is set aside) and the cost grows.
		blk := func() []string {
			out := make([]string, 30)
			for i := range out {
				out[i] = fmt.Sprintf("v%d\n", rng.IntN(2000))
			}
			return out
		}
		var a, b []string
		for range 1200 {
			x := blk()
			a = append(a, x...)
			if rng.IntN(2) == 0 {
				x = blk()
			}
			b = append(b, x...)
		}
		check(a, b)
	}
	for range 6 { // many copies of few lines (xdl_cleanup_records' limit)
		a := make([]string, 400)
		for i := range a {
			a[i] = vocab[rng.IntN(3)]
		}
		check(a, edit(a, 50, 0))
	}
	gas, gbs := gitChanged(t, dir, as, bs)
	for i := range as {
		a, b, ga, gb, oa, ob := as[i], bs[i], gas[i], gbs[i], oas[i], obs[i]
		if fmt.Sprint(ga) != fmt.Sprint(oa) || fmt.Sprint(gb) != fmt.Sprint(ob) {
			t.Fatalf("case %d (%d and %d lines, %s and %s): git diff changes\n a %v\n b %v\nthe port\n a %v\n b %v",
				i+1, len(a), len(b), filepath.Join(dir, "a", fmt.Sprint(i)), filepath.Join(dir, "b", fmt.Sprint(i)), ga, gb, oa, ob)
		}
	}
}

// TestRenameSimilarityMatchesGit checks the port of git's rename score
// against git diff -M: for a file and an edited copy under another name,
// git reports a rename exactly when the port's score reaches 50%, with the
// same percentage.
func TestRenameSimilarityMatchesGit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 21))
	renamed := 0
	for n := range 80 {
		var src []string
		for range 1 + rng.IntN(40) {
			src = append(src, fmt.Sprintf("%s %d%s", strings.Repeat("w", rng.IntN(90)), rng.IntN(50), []string{"\n", "\r\n"}[rng.IntN(2)]))
		}
		dst := append([]string{}, src...)
		for range rng.IntN(len(src) + 1) {
			dst[rng.IntN(len(dst))] = fmt.Sprintf("new %d\n", rng.IntN(1000))
		}
		a, b := filepath.Join(dir, fmt.Sprint("a", n)), filepath.Join(dir, fmt.Sprint("b", n))
		os.MkdirAll(a, 0o700)
		os.MkdirAll(b, 0o700)
		s, d := []byte(strings.Join(src, "")), []byte(strings.Join(dst, ""))
		os.WriteFile(filepath.Join(a, "x.md"), s, 0o600)
		os.WriteFile(filepath.Join(b, "y.md"), d, 0o600)
		out, _ := gittest.Command(t, dir, "diff", "--no-index", "-M", "--name-status", filepath.Base(a), filepath.Base(b)).Output()
		want := "no rename"
		if m := regexp.MustCompile(`^R(\d+)\t`).FindStringSubmatch(string(out)); m != nil {
			want = m[1] + "%"
		}
		got := "no rename"
		if string(s) == string(d) {
			got = "100%" // an exact rename (renameSource checks the blob first)
		} else if sc := similarity(s, d, spanHashes(d)); sc >= renameMinScore {
			got = fmt.Sprintf("%03d%%", sc*100/renameMaxScore)
			renamed++
		}
		if got != want {
			t.Fatalf("case %d: git diff -M: %s, the port: %s\n%s", n, want, got, out)
		}
	}
	if renamed == 0 || renamed == 80 {
		t.Fatalf("%d of 80 pairs are renames: the cases do not tell the two apart", renamed)
	}
}
