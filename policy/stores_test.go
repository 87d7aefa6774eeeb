package policy

import (
	"strings"
	"testing"
)

func TestCheckStoreName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"a", "alice", "user-42", "team_a.prod", "0", strings.Repeat("a", 63)} {
		if err := CheckStoreName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Alice", "-a", ".a", "_a", "a.", "a..b", "a/b", "a b", "ü", "a\x00", strings.Repeat("a", 64), ".", ".."} {
		err := CheckStoreName(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		want := "store names are 1 to 63 characters: lowercase letters, digits, '.', '_' and '-', starting with a letter or digit; got "
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestCheckStoreMetadata(t *testing.T) {
	t.Parallel()
	if err := CheckStoreDescription("Preferences of one customer.\nAsk before deleting."); err != nil {
		t.Error(err)
	}
	if err := CheckStoreDescription(strings.Repeat("é", 1025)); err == nil || err.Error() != "the description is 1025 characters, the limit is 1,024" {
		t.Errorf("long description: %v", err)
	}
	if err := CheckStoreDescription("a\x1bb"); err == nil {
		t.Error("a control character was accepted")
	}
	if err := CheckStoreMetadata(map[string]string{"user": "alice", "tier": "gold plan"}); err != nil {
		t.Error(err)
	}
	many := map[string]string{}
	for i := range 17 {
		many[string(rune('a'+i))] = "x"
	}
	for _, m := range []map[string]string{
		many,
		{"": "x"},
		{"a=b": "x"},
		{"a b": "x"},
		{strings.Repeat("k", 65): "x"},
		{"k": " padded"},
		{"k": "line\nbreak"},
		{"k": strings.Repeat("v", 513)},
	} {
		if err := CheckStoreMetadata(m); err == nil {
			t.Errorf("%q accepted", m)
		}
	}
}

const hashA = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

func TestParseTokenFile(t *testing.T) {
	t.Parallel()
	f, err := ParseTokenFile([]byte(`{"tokens":[
		{"name":"support-bot","sha256":"` + strings.ToUpper(hashA) + `","stores":["user-*","shared"],"access":"read-write","role":"agent"},
		{"name":"auditor","sha256":"` + strings.Repeat("0", 64) + `","stores":["*"],"access":"read-only","role":"operator"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	bot, aud := f.Tokens[0], f.Tokens[1]
	if bot.SHA256 != hashA {
		t.Errorf("hash not lower-cased: %s", bot.SHA256)
	}
	for store, want := range map[string]bool{"user-1": true, "user-": true, "shared": true, "users": false, "other": false} {
		if bot.Allows(store) != want {
			t.Errorf("support-bot on %s: %v", store, !want)
		}
	}
	if bot.ReadOnly() || bot.Operator() || !aud.ReadOnly() || !aud.Operator() || !aud.Allows("anything") {
		t.Errorf("flags: %+v %+v", bot, aud)
	}

	for _, c := range []struct{ file, want string }{
		{`{"tokens":[{"name":"Bad","sha256":"` + hashA + `","stores":["*"],"access":"read-only","role":"agent"}]}`, "names are 1 to 63"},
		{`{"tokens":[{"name":"a","sha256":"xyz","stores":["*"],"access":"read-only","role":"agent"}]}`, "sha256 must be"},
		{`{"tokens":[{"name":"a","sha256":"` + hashA + `","stores":[],"access":"read-only","role":"agent"}]}`, "stores must name"},
		{`{"tokens":[{"name":"a","sha256":"` + hashA + `","stores":["["],"access":"read-only","role":"agent"}]}`, "not a valid glob"},
		{`{"tokens":[{"name":"a","sha256":"` + hashA + `","stores":["*"],"access":"write","role":"agent"}]}`, "access must be"},
		{`{"tokens":[{"name":"a","sha256":"` + hashA + `","stores":["*"],"access":"read-only","role":"admin"}]}`, "role must be"},
		{`{"tokens":[{"name":"a","sha256":"` + hashA + `","stores":["*"],"access":"read-only","role":"agent"},
		             {"name":"a","sha256":"` + strings.Repeat("1", 64) + `","stores":["*"],"access":"read-only","role":"agent"}]}`, "used twice"},
		{`{"tokens":[{"name":"a","sha256":"` + hashA + `","stores":["*"],"access":"read-only","role":"agent"},
		             {"name":"b","sha256":"` + hashA + `","stores":["*"],"access":"read-only","role":"agent"}]}`, "same secret"},
		{`{"tokens":[{"name":"a","secret":"plain"}]}`, "unknown field"},
	} {
		if _, err := ParseTokenFile([]byte(c.file)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.file, err, c.want)
		}
	}
}
