package gitmem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// A commit that changes hundreds of files with long paths has a history
// index record longer than the reader's buffer (idsBuffer's 256 KiB):
// the changes after it are appended to the index, its tool_use ids are
// still read, and the next change after a restart goes through.
func TestLongHistoryRecordIsRead(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	// 450 paths of ~770 bytes (three folders of 250 bytes each), a record
	// of ~360 KiB: the length of 4,000 short paths, for a ninth of the
	// files to write.
	folder := strings.Repeat(strings.Repeat("n", 249)+"/", 3)
	_, err = r.Update(context.Background(), Meta{Subject: "seed", Trailers: []Trailer{{TrailerToolUseID, "toolu_seed"}}}, func(tx *Tx) error {
		for i := range 450 {
			if err := tx.WriteFile(fmt.Sprintf("notes/%s%05d.md", folder, i), []byte("x\n")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "toolu_after", "a.md", "a\n")
	write(t, r, "toolu_later", "b.md", "b\n")
	r.Close()
	// The changes after the long record were appended to the index as
	// they were made (not left for the next start to rebuild from git).
	data, err := os.ReadFile(filepath.Join(dir, ".git", "gitmem", "history"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if longest := len(slices.MaxFunc(lines, func(a, b string) int { return len(a) - len(b) })); longest <= 256<<10 {
		t.Fatalf("the longest record is %d bytes, not longer than the reader's buffer", longest)
	}
	head := strings.TrimSpace(gittest.Git(t, dir, "rev-parse", "HEAD"))
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, head) {
		t.Fatalf("the index ends at %.40s, not at HEAD %s", last, head)
	}
	r, err = Open(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write(t, r, "toolu_next", "c.md", "c\n")
	// The seed's id is known: the same call again is not made twice.
	_, err = r.Update(context.Background(), Meta{Subject: "seed", Trailers: []Trailer{{TrailerToolUseID, "toolu_seed"}}}, func(tx *Tx) error {
		return tx.WriteFile("d.md", []byte("d\n"))
	})
	var applied *AppliedError
	if !errors.As(err, &applied) || applied.Commit.Subject != "seed" {
		t.Fatalf("the seed's id again: %v", err)
	}
}

// A tool_use id is read from a record's trailers alone: an agent (so the
// author's name), a subject or another trailer's value that reads
// "Tool-Use-Id" does not stand for it, and the same call after a restart
// is still known.
func TestIDIsReadFromTheTrailersOnly(t *testing.T) {
	t.Parallel()
	dir := gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	meta := Meta{Subject: "Tool-Use-Id", Author: Signature{"Tool-Use-Id", "claude@gitmem.invalid"},
		Trailers: []Trailer{{TrailerAgent, "Tool-Use-Id"}, {TrailerToolUseID, "toolu_A1"}}}
	if _, err := r.Update(context.Background(), meta, func(tx *Tx) error { return tx.WriteFile("a.md", []byte("a\n")) }); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if r, err = Open(context.Background(), dir, testOptions(t)); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Update(context.Background(), meta, func(tx *Tx) error { return tx.WriteFile("a.md", []byte("again\n")) })
	var applied *AppliedError
	if !errors.As(err, &applied) || applied.ID != "toolu_A1" {
		t.Fatalf("the same tool_use id after a restart: %v", err)
	}
	// The author's email is no id.
	_, err = r.Update(context.Background(), Meta{Subject: "x", Trailers: []Trailer{{TrailerToolUseID, "claude@gitmem.invalid"}}}, func(tx *Tx) error {
		return tx.WriteFile("b.md", []byte("b\n"))
	})
	if err != nil {
		t.Fatalf("a fresh id: %v", err)
	}
}

// damagedHistory makes a repository of three calls, toolu_1 to toolu_3,
// whose history index then loses ("lost") or doubles ("doubled") the
// record of toolu_2, or loses the first record ("root lost": the init
// commit, reached by no other line), and returns it with the index
// file's sound content.
func damagedHistory(t *testing.T, damage string) (dir, path string, sound []byte) {
	t.Helper()
	dir = gittest.TempDir(t)
	r, _, err := Init(context.Background(), dir, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		write(t, r, fmt.Sprintf("toolu_%d", i), fmt.Sprintf("f%d.md", i), "x\n")
	}
	r.Close()
	path = filepath.Join(dir, ".git", "gitmem", "history")
	if sound, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(sound), "\n")
	mid := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "toolu_2") })
	if mid < 0 {
		t.Fatal("no record of toolu_2")
	}
	var damaged []string
	switch damage {
	case "lost":
		damaged = slices.Delete(slices.Clone(lines), mid, mid+1)
	case "doubled":
		damaged = slices.Insert(slices.Clone(lines), mid, lines[mid])
	case "root lost":
		damaged = slices.Delete(slices.Clone(lines), 1, 2) // after the header
	}
	if err := os.WriteFile(path, []byte(strings.Join(damaged, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, path, sound
}

// A history index that lost a record in the middle (or holds one twice)
// but still ends at HEAD is rebuilt, in the background, from start: the
// lost record's id is known at once, and a retry of its call makes no
// second commit.
func TestDamagedHistoryIndexIsRebuilt(t *testing.T) {
	t.Parallel()
	for _, damage := range []string{"lost", "doubled", "root lost"} {
		t.Run(damage, func(t *testing.T) {
			dir, path, sound := damagedHistory(t, damage)
			r, err := Open(context.Background(), dir, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			_, err = r.Update(context.Background(), Meta{Subject: "again", Trailers: []Trailer{{TrailerToolUseID, "toolu_2"}}}, func(tx *Tx) error {
				return tx.WriteFile("f2.md", []byte("again\n"))
			})
			var applied *AppliedError
			if !errors.As(err, &applied) {
				t.Fatalf("a retry of toolu_2 after the index was damaged: %v", err)
			}
			r.histIndex.wg.Wait() // the background build
			if got, _ := os.ReadFile(path); string(got) != string(sound) {
				t.Fatalf("the index was not rebuilt:\n%s", got)
			}
		})
	}
}

// fsck names a history index damaged in the middle, and --repair
// rebuilds it.
func TestFsckRepairsADamagedHistoryIndex(t *testing.T) {
	t.Parallel()
	dir, path, sound := damagedHistory(t, "lost")
	rep, err := Fsck(context.Background(), dir, testOptions(t), false)
	if err != nil || len(rep.Problems) != 1 || !strings.HasPrefix(rep.Problems[0].What, "the history index (.git/gitmem/history) is damaged at record") {
		t.Fatalf("fsck: %v %+v", err, rep.Problems)
	}
	if rep, err = Fsck(context.Background(), dir, testOptions(t), true); err != nil || len(rep.Problems) != 1 || !rep.Problems[0].Repaired {
		t.Fatalf("fsck --repair: %v %+v", err, rep.Problems)
	}
	if got, _ := os.ReadFile(path); string(got) != string(sound) {
		t.Fatalf("not rebuilt:\n%s", got)
	}
	if rep, err = Fsck(context.Background(), dir, testOptions(t), false); err != nil || len(rep.Problems) != 0 {
		t.Fatalf("fsck after the repair: %v %+v", err, rep.Problems)
	}
}

// log reading a history index that lost a record (in the middle, or its
// first) says the index is damaged: it does not list the history without
// that commit.
func TestLogOfADamagedHistoryIndex(t *testing.T) {
	t.Parallel()
	for _, damage := range []string{"lost", "doubled", "root lost"} {
		t.Run(damage, func(t *testing.T) {
			dir, _, _ := damagedHistory(t, damage)
			opt := testOptions(t)
			opt.ReadOnly = true // nothing rebuilds the file meanwhile
			r, err := Open(context.Background(), dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var ids []string
			err = r.Log(context.Background(), LogOptions{}, nil, func(c Commit) error {
				ids = append(ids, c.Trailer(TrailerToolUseID))
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), "gitmem fsck --repair rebuilds it") {
				t.Fatalf("log of a damaged index: %v, listed %q", err, ids)
			}
		})
	}
}
