package gitdir

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/go-git/go-git/v5/config"
)

// A gitmem repository is marked in its .git/config ([gitmem] version = 1,
// what `git config gitmem.version` reads), so that gitmem never takes over
// a git repository it did not create: --repo pointed at a code project is
// refused instead of committing onto its branch.
const markSection, markKey, markValue = "gitmem", "version", "1"

// IsMarked reports whether .git/config carries gitmem's mark.
func IsMarked(env *Env, gitDir string) bool {
	marked, _ := Marked(env, gitDir)
	return marked
}

// readMarkConfig parses .git/config as go-git does when it opens the
// repository; nil, nil: there is none.
func readMarkConfig(env *Env, gitDir string) (*config.Config, error) {
	data, err := ReadFile(filepath.Join(gitDir, "config"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if errors.Is(err, ErrNotRegular) || errors.Is(err, syscall.EISDIR) {
		return nil, &Damaged{Problem: ".git/config is not a regular file",
			Repair: "move it aside and write one that holds [core] bare = false and [gitmem] version = 1 (what gitmem init writes), then add its remotes again (gitmem remote add NAME URL)"}
	} else if err != nil {
		return nil, err
	}
	env.count(func(e *Env) *atomic.Int64 { return &e.configParses })
	c := config.NewConfig()
	if err := c.Unmarshal(data); err != nil {
		return nil, &Damaged{Problem: fmt.Sprintf(".git/config does not parse (%v)", err),
			Repair: "correct it by hand (git config --file .git/config --list names the first line git cannot read either), or move it aside and write one that holds " +
				"[core] bare = false and [gitmem] version = 1 (what gitmem init writes), then add its remotes again (gitmem remote add NAME URL)"}
	}
	return c, nil
}

// ReadConfig parses .git/config as go-git does when it opens the
// repository, reading it only if it is a regular file (ReadFile: a named
// pipe put there is not waited on); nil, nil: there is none.
func ReadConfig(gitDir string) (*config.Config, error) { return readMarkConfig(nil, gitDir) }

// Marked reports whether .git/config carries gitmem's mark, from one
// parse of it; it returns a *Damaged when the file does not parse: the
// repository cannot be used (go-git reads the file to open it) until it
// is repaired. A missing file is none of its business (not marked).
func Marked(env *Env, gitDir string) (bool, error) {
	c, err := readMarkConfig(env, gitDir)
	return err == nil && c != nil && c.Raw.Section(markSection).Option(markKey) != "", err
}

// Mark adds gitmem's mark to .git/config, appending to the file as it is
// (git's lock-file way), so that the operator's own settings stay exactly
// as they were written.
func Mark(env *Env, gitDir string) error {
	if IsMarked(env, gitDir) {
		return nil
	}
	path := filepath.Join(gitDir, "config")
	data, err := ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if _, derr := readMarkConfig(env, gitDir); derr != nil {
			return derr // not a regular file: damaged
		}
		return err
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	data = append(data, "["+markSection+"]\n\t"+markKey+" = "+markValue+"\n"...)
	return ReplaceLocked(context.Background(), path, data, nil)
}
