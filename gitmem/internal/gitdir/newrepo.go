package gitdir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// StepInit is a write step of a new repository's .git (WriteNewGitDir):
// a folder, HEAD, config, or a folder's sync.
const StepInit = "init"

// newHEAD and newConfig are what a new gitmem repository's HEAD and
// .git/config hold: the branch main, and gitmem's mark.
const (
	newHEAD   = "ref: refs/heads/main\n"
	newConfig = "[core]\n\tbare = false\n[" + markSection + "]\n\t" + markKey + " = " + markValue + "\n"
)

// WriteNewGitDir writes a new, empty, marked repository into the empty
// folder gitDir (a temporary name, renamed to .git once it returns):
// the files go-git's PlainInit writes, and gitmem's mark, each made
// durable with the folders that hold them.
func WriteNewGitDir(env *Env, gitDir string) error {
	dirs := []string{"objects", "objects/info", "objects/pack", "refs", "refs/heads", "refs/tags"}
	for _, d := range dirs {
		if err := env.Injected(StepInit, d); err != nil {
			return err
		}
		if err := os.Mkdir(filepath.Join(gitDir, d), 0o755); err != nil {
			return err
		}
	}
	for _, f := range [][2]string{{"HEAD", newHEAD}, {"config", newConfig}} {
		if err := env.Injected(StepInit, f[0]); err != nil {
			return err
		}
		if err := WriteFileSync(gitDir, f[0]+"-*", filepath.Join(gitDir, f[0]), []byte(f[1]), 0o644); err != nil {
			return err
		}
	}
	for _, d := range append(dirs, ".") {
		if err := env.Injected(StepInit, d+"/"); err != nil {
			return err
		}
		if err := SyncDir(filepath.Join(gitDir, d)); err != nil {
			return err
		}
	}
	return nil
}

// Interrupted reports whether gitDir holds nothing but part of what an
// interrupted initialisation by an earlier gitmem wrote (go-git's
// PlainInit in place, then the mark), which is no repository yet: no
// object, no ref, and no usable HEAD or no mark. Removing it loses
// nothing. A git repository another program made (git init writes
// description, hooks/, info/) is never one, nor a .git that cannot be
// read (out of file descriptors, say).
func Interrupted(gitDir string) bool {
	allowed := []struct {
		dir  string
		want []string
	}{{".", []string{"HEAD", "config", "objects", "refs"}}, {"objects", []string{"info", "pack"}}, {"refs", []string{"heads", "tags"}},
		{"objects/info", nil}, {"objects/pack", nil}, {"refs/heads", nil}, {"refs/tags", nil}}
	for _, a := range allowed { // the top folder first: a repository in use has more there
		d, want := a.dir, a.want
		f, err := OpenDir(filepath.Join(gitDir, d))
		if errors.Is(err, fs.ErrNotExist) && d != "." {
			continue
		} else if err != nil {
			return false
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil || slices.ContainsFunc(names, func(n string) bool { return !slices.Contains(want, n) }) {
			return false
		}
	}
	head, err := ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) || len(head) > 0 && string(head) != newHEAD {
		return false
	}
	config, err := ReadFile(filepath.Join(gitDir, "config"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) || len(config) > 0 && string(config) != "[core]\n\tbare = false\n" && string(config) != newConfig {
		return false
	}
	// Marked, with HEAD in place: an empty gitmem repository, which
	// gets its first commit when opened.
	return len(head) == 0 || string(config) != newConfig
}

// NewTempPrefix starts the name of the temporary folder a new repository
// (or a new .git) is built in before it is renamed into place:
// ".gitmem-new-<pid>.<random>-<start><random>", with the process's
// ProcTag and start time, as the second name of its locks (ownLockName).
const NewTempPrefix = ".gitmem-new-"

// NewTempPattern is the os.MkdirTemp pattern of this process's
// temporary folders for a new repository.
func NewTempPattern() string { return NewTempPrefix + ProcTag + "-" + ownStartDigits() + "*" }

// ClearNewTemps removes the temporary folders for a new repository in
// dir that processes which no longer run left there (killed while they
// built it: ownerGone), and returns how many. Those of running processes
// are theirs to rename or remove.
func ClearNewTemps(dir string) int {
	n := 0
	for _, p := range MatchNames(dir, listNames(dir), NewTempPrefix+"*") {
		tag, rest, _ := strings.Cut(strings.TrimPrefix(filepath.Base(p), NewTempPrefix), "-")
		pid, _, ok := strings.Cut(tag, ".")
		var e *Env
		if ok && e.ownerGone([]string{"", "", tag, pid, rest}) && os.RemoveAll(p) == nil {
			n++
		}
	}
	return n
}
