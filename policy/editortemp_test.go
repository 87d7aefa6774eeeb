package policy

import "testing"

func TestIsEditorTemp(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		".notes.md.swp": true, ".notes.md.swo": true, ".notes.md.swa": true, // vim's swap files
		"notes.md~": true, "~": false, // a backup (vim, emacs)
		"4913":       true,                          // vim's test that it may write the folder
		".#notes.md": true,                          // emacs's lock
		"#notes.md#": true, "#": false, "##": false, // emacs's auto-save
		"notes.md": false, ".notes.md": false, "notes.swp": false, ".swp": false, ".notes.md.swq": false, ".notes.md.swpx": false,
		"4913.md": false, "49130": false, "a~b": false, "#notes.md": false, "notes.md#": false, ".#": false,
	} {
		if got := IsEditorTemp(name); got != want {
			t.Errorf("IsEditorTemp(%q) = %v, want %v", name, got, want)
		}
	}
}
