package policy

import "strings"

// IsEditorTemp reports whether a file name is one an editor writes beside
// the file it edits, never a memory: a hand edit of memories/ leaves these
// behind, and gitmem never adopts them (docs/operations.md, "Hand edits").
// Exactly:
//   - .NAME.swp … .NAME.swa: vim's swap files (.swp, then .swo, .swn, … as
//     each is taken), NAME not empty;
//   - NAME~: a backup (vim's backup, emacs's), NAME not empty;
//   - 4913: vim's test that it may write the folder;
//   - .#NAME: emacs's lock;
//   - #NAME#: emacs's auto-save, NAME not empty.
func IsEditorTemp(name string) bool {
	if name == "4913" {
		return true
	}
	if n := len(name); n > 1 && name[n-1] == '~' {
		return true
	}
	if n := len(name); n > 2 && name[0] == '#' && name[n-1] == '#' {
		return true
	}
	if rest, ok := strings.CutPrefix(name, ".#"); ok && rest != "" {
		return true
	}
	if n := len(name); n > 5 && name[0] == '.' && name[n-4:n-1] == ".sw" && 'a' <= name[n-1] && name[n-1] <= 'p' {
		return true
	}
	return false
}
