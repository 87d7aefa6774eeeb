//go:build !linux

package gitmem

// exchange is Linux's: elsewhere put moves the old file aside first.
func (w *worktree) exchange(tmp, p string) (aside string, placed, ok bool, err error) {
	return "", false, false, nil
}
