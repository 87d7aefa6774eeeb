package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/policy"
)

// MergeRounds is the memory of the merges row (callsDuringSync), for the
// row and for BenchmarkPullMerge: agent A's memory of Files files (4 for
// each commit a round merges), 30 lines each, pushed to a shared remote;
// and rounds remotes r0, r1, ..., each holding another agent's per
// commits on top of it (a line of a file each), pushed there one round
// after the other, so that A's pulls of them come one after the other:
// a merge each once A made calls of its own (Edit).
type MergeRounds struct {
	A     *gitmem.Repo
	Files int
	Sync  gitmem.SyncOptions

	other *gitmem.Repo
}

// NewMergeRounds makes them in work (a folder that does not exist yet).
func NewMergeRounds(ctx context.Context, work string, per, rounds int) (_ *MergeRounds, err error) {
	m := &MergeRounds{Files: 4 * per, Sync: gitmem.SyncOptions{Limits: policy.Limits{MaxFiles: 1000000}}}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	remote := filepath.Join(work, "shared.git")
	if _, err := gitOutput("", "init", "-q", "--bare", "--initial-branch=main", remote); err != nil {
		return nil, err
	}
	opt := func(name string) gitmem.Options {
		return gitmem.Options{Logf: func(string, ...any) {}, Author: gitmem.Signature{Name: name, Email: name + "@agents.invalid"},
			Operator: gitmem.Signature{Name: "op-" + name, Email: "op@agents.invalid"}}
	}
	if m.A, _, err = gitmem.Clone(ctx, remote, filepath.Join(work, "a"), opt("a"), m.Sync); err != nil {
		return nil, err
	}
	var lines []string
	for l := range 30 {
		lines = append(lines, fmt.Sprintf("line %d of a memory file, long enough to be a note", l))
	}
	text := strings.Join(lines, "\n") + "\n"
	if _, err := m.A.Update(ctx, gitmem.Meta{Subject: "seed"}, func(tx *gitmem.Tx) error {
		for i := range m.Files {
			if err := tx.WriteFile(m.name(i), []byte(text)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if _, err := m.A.Sync(ctx, "origin", m.Sync); err != nil {
		return nil, err
	}
	if m.other, _, err = gitmem.Clone(ctx, remote, filepath.Join(work, "b"), opt("b"), m.Sync); err != nil {
		return nil, err
	}
	for r := range rounds {
		for k := range per { // a file each
			if err := edit(ctx, m.other, fmt.Sprintf("o%d_%d", r, k), m.name((r*211+k)*7%m.Files), 1+r%5); err != nil {
				return nil, err
			}
		}
		rem := filepath.Join(work, fmt.Sprintf("round%d.git", r))
		if _, err := gitOutput("", "init", "-q", "--bare", "--initial-branch=main", rem); err != nil {
			return nil, err
		}
		for _, x := range []*gitmem.Repo{m.other, m.A} {
			if err := x.AddRemote(fmt.Sprint("r", r), rem); err != nil {
				return nil, err
			}
		}
		if _, err := m.other.Push(ctx, fmt.Sprint("r", r), m.Sync); err != nil {
			return nil, err
		}
	}
	return m, m.other.Flush(ctx)
}

// Edit is a call on A, as a str_replace: the line-th line of the file
// i (modulo Files) becomes id.
func (m *MergeRounds) Edit(ctx context.Context, id string, i, line int) error {
	return edit(ctx, m.A, id, m.name(i%m.Files), line)
}

// Pull is A's pull of round r, until its files are in the worktree: an
// error if it merged nothing.
func (m *MergeRounds) Pull(ctx context.Context, r int) error {
	got, err := m.A.Pull(ctx, fmt.Sprint("r", r), m.Sync)
	if err == nil && got.Merge == "" {
		err = fmt.Errorf("the pull of round %d merged nothing: %+v", r, got)
	}
	if err == nil { // the merge's files in the worktree: its work, not the next phase's
		err = m.A.Flush(ctx)
	}
	return err
}

// Close closes both memories.
func (m *MergeRounds) Close() {
	for _, r := range []*gitmem.Repo{m.A, m.other} {
		if r != nil {
			r.Close()
		}
	}
}

func (m *MergeRounds) name(i int) string { return fmt.Sprintf("d%02d/f%04d.md", i/100, i) }

// edit is a str_replace of the line-th line of p with id, as the call id.
func edit(ctx context.Context, r *gitmem.Repo, id, p string, line int) error {
	_, err := r.Update(ctx, gitmem.Meta{Subject: "memory: str_replace", Trailers: []gitmem.Trailer{{Key: gitmem.TrailerToolUseID, Value: id}}}, func(tx *gitmem.Tx) error {
		data, err := tx.ReadFile(p)
		if err != nil {
			return err
		}
		ls := strings.Split(string(data), "\n")
		ls[line] = id
		return tx.WriteFile(p, []byte(strings.Join(ls, "\n")))
	})
	return err
}
