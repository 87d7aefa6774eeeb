package policy

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// An edit cannot get a secret into a file in pieces: FindEdit finds, in
// the file as the edit leaves it, the secrets of the text written and
// those that cross where it meets the file's own text — a secret
// completed by a str_replace or an insert, or whose halves a removal
// joined — and not the secrets the file already held elsewhere.
func TestFindEdit(t *testing.T) {
	t.Parallel()
	s := DefaultSecretRules()
	r := rand.New(rand.NewPCG(3, 4))
	const head, tail = "# Notes\n\nLikes green tea.\n", "Meeting on Tuesday.\n"
	for _, p := range plants(r) {
		at := strings.Index(p.text, p.secret)
		mid := at + len(p.secret)/2 // a split inside the secret
		secretLine := 4 + strings.Count(p.text[:at], "\n")
		file := head + p.text + tail
		for _, tc := range []struct {
			name       string
			before     string // the file's text before what the edit wrote
			written    string
			after      string // the file's text after it
			wantSecret bool
		}{
			{"written whole", head, p.text, tail, true},
			{"the file's start, the edit's end", head + p.text[:mid], p.text[mid:], tail, true},
			{"the edit's start, the file's end", head, p.text[:mid], p.text[mid:] + tail, true},
			{"a removal joins the halves", head + p.text[:mid], "", p.text[mid:] + tail, true},
			{"a middle written", head + p.text[:at+2], p.text[at+2 : at+len(p.secret)-2], p.text[at+len(p.secret)-2:] + tail, true},
			{"an edit elsewhere", file + "more\n", "and more\n", "", false},
			{"an edit above", "", "A title\n", file, false},
			{"a removal elsewhere", file, "", "the end\n", false},
		} {
			text := tc.before + tc.written + tc.after
			start, end := len(tc.before), len(tc.before)+len(tc.written)
			fs := s.FindEdit("notes.md", text, start, end, s.Find("notes.md", tc.written))
			if !tc.wantSecret {
				if len(fs) != 0 {
					t.Errorf("%s, %s: found %+v, a secret the file held already", p.kind, tc.name, fs)
				}
				continue
			}
			if len(fs) != 1 || fs[0].Rule != p.rule || text[fs[0].Start:fs[0].End] != p.secret || fs[0].Line != secretLine {
				t.Errorf("%s, %s: found %+v; want %s %q on line %d", p.kind, tc.name, fs, p.rule, p.secret, secretLine)
			}
		}
	}
}

// FindEdit reads only near the edit: a file far longer than JoinWindow
// costs what the edit's neighbourhood costs, and a secret far from the
// edit is not reported.
func TestFindEditReadsNearTheEdit(t *testing.T) {
	t.Parallel()
	s := DefaultSecretRules()
	gh := "ghp_" + strings.Repeat("aB3dE5gH7j", 3) + "kLmNoP"
	far := "token " + gh + "\n" + strings.Repeat("an ordinary line of notes\n", 2*JoinWindow/26+10)
	// The edit completes a second token at the end; the first, far above,
	// is the file's own.
	text := far + "token " + gh[:10] + gh[10:] + "\n"
	start := len(far) + len("token ") + 10
	fs := s.FindEdit("notes.md", text, start, start, nil)
	if len(fs) != 1 || fs[0].Start != len(far)+len("token ") || fs[0].Line != strings.Count(far, "\n")+1 {
		t.Errorf("found %+v", fs)
	}
}

// BenchmarkFindEdit: the screening a str_replace of one line adds under
// the writer lock, in a 1 MiB note dense with key-like words, beside
// screening the whole file.
func BenchmarkFindEdit(b *testing.B) {
	s := DefaultSecretRules()
	line := "the api key and the auth token are kept in the vault, secret=see-vault\n"
	text := strings.Repeat(line, (1<<20)/len(line))
	mid := len(text) / 2
	mid -= mid % len(line)
	b.Run("edit", func(b *testing.B) {
		for b.Loop() {
			s.FindEdit("notes.md", text, mid, mid+len(line), nil)
		}
	})
	b.Run("whole-file", func(b *testing.B) {
		for b.Loop() {
			s.Find("notes.md", text)
		}
	})
}
