//go:build unix

package storesapi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gitmem-dev/gitmem/storesapi"
)

// The token file is checked as ssh checks a private key (StrictModes):
// only the bits that let someone else read or write it count, and the
// file and every folder above it must be the server's user's or root's
// and writable by no one else (a sticky folder such as /tmp lets no one
// replace what it holds), or whoever owns or can replace the file gives
// themselves any store. (Findings D5 and N6: a 0600 file owned by nobody,
// and one in a 0777 folder, were taken; 0610 was refused as "read or
// written by others".)
func TestTokenFileIsCheckedAsSSHChecksAKey(t *testing.T) {
	root := t.TempDir()
	file := func(name string, dirMode, mode os.FileMode) string {
		t.Helper()
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "tokens.json")
		writeTokens(t, path, testTokens)
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, dirMode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, c := range []struct {
		name          string
		dirMode, mode os.FileMode
		want          string // "" accepted, else what the refusal says after the file's name
	}{
		{"owner-only", 0o700, 0o600, ""},
		{"read-only", 0o755, 0o400, ""},
		{"execute-bits", 0o700, 0o711, ""},
		{"group-execute", 0o700, 0o610, ""},
		{"group-read", 0o700, 0o640, " can be read by its group (mode 0640)"},
		{"others-read", 0o700, 0o604, " can be read by others (mode 0604)"},
		{"group-write", 0o700, 0o620, " can be written by its group (mode 0620)"},
		{"others-write", 0o700, 0o602, " can be written by others (mode 0602)"},
		{"world-read", 0o700, 0o644, " can be read by its group and others (mode 0644)"},
		{"world-rw", 0o700, 0o666, " can be read and written by its group and others (mode 0666)"},
		{"mixed", 0o700, 0o664, " can be read by its group and others and written by its group (mode 0664)"},
		{"folder-0777", 0o777, 0o600, ": its folder %s can be written by its group and others (mode 0777)"},
		{"folder-0770", 0o770, 0o600, ": its folder %s can be written by its group (mode 0770)"},
		{"folder-sticky", 0o777 | os.ModeSticky, 0o600, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := file(c.name, c.dirMode, c.mode)
			_, err := storesapi.LoadTokens(path)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			want := path + c.want
			if strings.Contains(c.want, "%s") {
				want = path + strings.Replace(c.want, "%s", filepath.Dir(path), 1)
			}
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("got %v\nwant it to begin %q", err, want)
			}
		})
	}

	// Owned by another user (a root server, the file nobody's): refused,
	// and so is a folder another user owns. Only root can give a file away.
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give a file to another user")
	}
	const nobody = 65534
	owned := file("owned", 0o700, 0o600)
	if err := os.Chown(owned, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	want := owned + " is owned by user 65534, not by the user gitmem runs as (0) or root"
	if _, err := storesapi.LoadTokens(owned); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a token file owned by nobody: %v\nwant it to begin %q", err, want)
	}
	folder := file("folder-owned", 0o700, 0o600)
	if err := os.Chown(filepath.Dir(folder), nobody, nobody); err != nil {
		t.Fatal(err)
	}
	want = folder + ": its folder " + filepath.Dir(folder) + " is owned by user 65534, not by the user gitmem runs as (0) or root"
	if _, err := storesapi.LoadTokens(folder); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a token file in nobody's folder: %v\nwant it to begin %q", err, want)
	}
}
