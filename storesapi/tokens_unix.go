//go:build unix

package storesapi

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// checkTokenFile refuses a token file (fi, as opened) that another user
// owns or its group or others can read or write, or whose folders
// another user owns or its group or others can write (see Reload).
func checkTokenFile(path string, fi os.FileInfo) error {
	me := os.Geteuid()
	if uid := owner(fi); uid != me && uid != 0 {
		return fmt.Errorf("%s is owned by user %d, not by the user gitmem runs as (%d) or root: whoever owns it can give themselves any store; tokens are taken only from a file of gitmem's user or root (chown %d %s)", path, uid, me, me, path)
	}
	perm := fi.Mode().Perm()
	if how := others(perm&0o040 != 0, perm&0o004 != 0, perm&0o020 != 0, perm&0o002 != 0); how != "" {
		return fmt.Errorf("%s can be %s (mode %04o): tokens are taken only from a file no one else can read or write; run chmod 600 %s", path, how, perm, path)
	}
	for _, dir := range folders(path) {
		di, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("read the token file: %w", err)
		}
		if uid := owner(di); uid != me && uid != 0 {
			return fmt.Errorf("%s: its folder %s is owned by user %d, not by the user gitmem runs as (%d) or root: whoever owns it can replace the token file; tokens are taken only from a folder of gitmem's user or root", path, dir, uid, me)
		}
		dperm := di.Mode().Perm()
		if di.Mode()&os.ModeSticky != 0 {
			continue // no one can rename or delete what another owns in it
		}
		if how := others(false, false, dperm&0o020 != 0, dperm&0o002 != 0); how != "" {
			return fmt.Errorf("%s: its folder %s can be %s (mode %04o): whoever can write there can replace the token file; tokens are taken only from a folder no one else can write; run chmod go-w %s", path, dir, how, dperm, dir)
		}
	}
	return nil
}

// owner is the user id of a file's owner.
func owner(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// others words who besides the owner can read and write: "" for no one,
// else such as "read by its group and others" or "read and written by
// others".
func others(groupRead, otherRead, groupWrite, otherWrite bool) string {
	who := func(g, o bool) string {
		switch {
		case g && o:
			return "its group and others"
		case g:
			return "its group"
		case o:
			return "others"
		}
		return ""
	}
	r, w := who(groupRead, otherRead), who(groupWrite, otherWrite)
	switch {
	case r != "" && r == w:
		return "read and written by " + r
	case r != "" && w != "":
		return "read by " + r + " and written by " + w
	case r != "":
		return "read by " + r
	case w != "":
		return "written by " + w
	}
	return ""
}

// folders are the folders above path, nearest first, to the root: of
// path as given and, when a symbolic link leads elsewhere, of where it
// leads.
func folders(path string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		abs, err := filepath.Abs(p)
		if err != nil {
			return
		}
		for dir := filepath.Dir(abs); !seen[dir]; dir = filepath.Dir(dir) {
			seen[dir] = true
			out = append(out, dir)
			if strings.TrimRight(dir, "/") == "" {
				break
			}
		}
	}
	add(path)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		add(real)
	}
	return out
}
