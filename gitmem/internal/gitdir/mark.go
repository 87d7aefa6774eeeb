package gitdir

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/config"
)

// A gitmem repository is marked in its .git/config ([gitmem] version = 1,
// what `git config gitmem.version` reads), so that gitmem never takes over
// a git repository it did not create: --repo pointed at a code project is
// refused instead of committing onto its branch.
const markSection, markKey, markValue = "gitmem", "version", "1"

// IsMarked reports whether .git/config carries gitmem's mark.
func IsMarked(gitDir string) bool {
	data, err := os.ReadFile(filepath.Join(gitDir, "config"))
	if err != nil {
		return false
	}
	c := config.NewConfig()
	if err := c.Unmarshal(data); err != nil {
		return false
	}
	return c.Raw.Section(markSection).Option(markKey) != ""
}

// Mark adds gitmem's mark to .git/config, appending to the file as it is
// (git's lock-file way), so that the operator's own settings stay exactly
// as they were written.
func Mark(gitDir string) error {
	if IsMarked(gitDir) {
		return nil
	}
	path := filepath.Join(gitDir, "config")
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	data = append(data, "["+markSection+"]\n\t"+markKey+" = "+markValue+"\n"...)
	return ReplaceLocked(path, data, nil)
}
