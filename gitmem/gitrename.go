package gitmem

import (
	"bytes"
	"path"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// How git blame follows a file its parent does not hold at that path
// (blame.c's find_rename): the files the commit deleted are the
// candidates; one with the very blob wins (the same file name first, then
// the first in path order), then one with the same file name at least 75%
// similar, then the most similar, at least 50% (diffcore-rename.c,
// diffcore-delta.c). Ported so that Blame follows renames where git does,
// through merges too.

const (
	renameMaxScore      = 60000
	renameMinScore      = 30000 // git's default: 50%
	renameBasenameScore = renameMinScore + (renameMaxScore-renameMinScore)/2
	spanHashBase        = 107927
)

// renameSource is where git blame finds the file dst (blob dstBlob) of
// commit in its parent: the path in parent, or false.
func (hr historyReader) renameSource(commit, parent plumbing.Hash, dst string, dstBlob plumbing.Hash) (string, bool, error) {
	var sources []renameCandidate
	hr.o.lock()
	err := func() error {
		var trees [2]plumbing.Hash
		for i, h := range []plumbing.Hash{commit, parent} {
			c, err := hr.o.st.Commit(h)
			if err != nil {
				return objectError("commit", h, "", err)
			}
			if trees[i], err = hr.memTree(c.TreeHash); err != nil {
				return objectError("tree", c.TreeHash, "", err)
			}
		}
		gone := map[string]bool{}
		if err := hr.diffTrees(trees[1], trees[0], "", func(p string, b plumbing.Hash) {
			if b.IsZero() {
				gone[p] = true
			}
		}); err != nil {
			return err
		}
		return hr.diffTrees(trees[0], trees[1], "", func(p string, b plumbing.Hash) {
			if gone[p] && !b.IsZero() {
				sources = append(sources, renameCandidate{p, b})
			}
		})
	}()
	hr.o.unlock()
	if err != nil || len(sources) == 0 {
		return "", false, err
	}
	return pickRename(sources, dst, dstBlob, hr.o.readFile)
}

// renameCandidate is a file of the parent that the commit has not:
// where the file blame follows may come from.
type renameCandidate struct {
	path string
	blob plumbing.Hash
}

// pickRename is the path of the one of sources git blame takes for the
// file dst (blob dstBlob), or false; read reads the blob h of the file p.
func pickRename(sources []renameCandidate, dst string, dstBlob plumbing.Hash, read func(h plumbing.Hash, p string) ([]byte, error)) (string, bool, error) {
	slices.SortFunc(sources, func(a, b renameCandidate) int { return strings.Compare(a.path, b.path) })
	sameName := func(p string) bool { return path.Base(p) == path.Base(dst) }
	// An exact rename: the same blob.
	best := -1
	for i, s := range sources {
		if s.blob == dstBlob && (best < 0 || sameName(s.path) && !sameName(sources[best].path)) {
			best = i
		}
	}
	if best >= 0 {
		return sources[best].path, true, nil
	}
	dstData, err := read(dstBlob, dst)
	if err != nil {
		return "", false, err
	}
	dstSpans := spanHashes(dstData)
	score := func(s renameCandidate) (int, error) {
		data, err := read(s.blob, s.path)
		if err != nil {
			return 0, err
		}
		return similarity(data, dstData, dstSpans), nil
	}
	// The one candidate with the same file name, when no other has it.
	named := -1
	for i, s := range sources {
		if sameName(s.path) {
			if named >= 0 {
				named = -2
				break
			}
			named = i
		}
	}
	if named >= 0 {
		sc, err := score(sources[named])
		if err != nil {
			return "", false, err
		}
		if sc >= renameBasenameScore {
			return sources[named].path, true, nil
		}
	}
	return mostSimilar(sources, score, sameName)
}

// mostSimilar is the path of the source of the highest score, or false
// when none reaches renameMinScore: git keeps the best four candidates
// (record_if_better) and sorts them, stably, by score, then same file
// name.
func mostSimilar(sources []renameCandidate, score func(renameCandidate) (int, error), sameName func(string) bool) (string, bool, error) {
	type cand struct{ src, score, name int }
	worse := func(a, b cand) int { // score_compare: > 0 when a sorts after b
		switch {
		case a.src < 0:
			if b.src >= 0 {
				return 1
			}
			return 0
		case b.src < 0:
			return -1
		case a.score == b.score:
			return b.name - a.name
		}
		return b.score - a.score
	}
	top := []cand{{-1, 0, 0}, {-1, 0, 0}, {-1, 0, 0}, {-1, 0, 0}}
	for i, s := range sources {
		sc, err := score(s)
		if err != nil {
			return "", false, err
		}
		c := cand{i, sc, 0}
		if sameName(s.path) {
			c.name = 1
		}
		w := 0
		for k := 1; k < len(top); k++ {
			if worse(top[k], top[w]) > 0 {
				w = k
			}
		}
		if worse(top[w], c) > 0 {
			top[w] = c
		}
	}
	slices.SortStableFunc(top, worse)
	if top[0].src < 0 || top[0].score < renameMinScore {
		return "", false, nil
	}
	return sources[top[0].src].path, true, nil
}

// similarity is estimate_similarity: how much of the larger of src and
// dst is material src shares with dst, out of renameMaxScore; 0 when
// their sizes differ too much to reach renameMinScore.
func similarity(src, dst []byte, dstSpans map[uint32]int) int {
	maxSize, baseSize := max(len(src), len(dst)), min(len(src), len(dst))
	if maxSize*(renameMaxScore-renameMinScore) < (maxSize-baseSize)*renameMaxScore || len(dst) == 0 {
		return 0
	}
	copied := 0
	for h, n := range spanHashes(src) {
		copied += min(n, dstSpans[h])
	}
	return copied * renameMaxScore / maxSize
}

// spanHashes is diffcore-delta.c's hash_chars: the content cut into
// pieces ending at a newline or 64 bytes long, each piece's hash with the
// bytes it accounts for (a CR before LF not counted in text).
func spanHashes(buf []byte) map[uint32]int {
	text := bytes.IndexByte(buf[:min(len(buf), 8000)], 0) < 0
	out := map[uint32]int{}
	var acc1, acc2 uint32
	n := 0
	for i, b := range buf {
		c := uint32(b)
		if text && c == '\r' && i+1 < len(buf) && buf[i+1] == '\n' {
			continue
		}
		old1 := acc1
		acc1 = (acc1 << 7) ^ (acc2 >> 25)
		acc2 = (acc2 << 7) ^ (old1 >> 25)
		acc1 += c
		if n++; n < 64 && c != '\n' {
			continue
		}
		out[(acc1+acc2*0x61)%spanHashBase] += n
		n, acc1, acc2 = 0, 0, 0
	}
	if n > 0 {
		out[(acc1+acc2*0x61)%spanHashBase] += n
	}
	return out
}
