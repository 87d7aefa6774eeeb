package handler

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeString: on any JSON string, decodeString agrees with
// encoding/json whenever its result is valid UTF-8, and is not valid UTF-8
// only when encoding/json replaced something with U+FFFD.
func FuzzDecodeString(f *testing.F) {
	for _, s := range []string{`""`, `"a"`, `"\u00e9\n\t\"\\\/"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00\ud800x"`,
		`"\ud800\ud800\udc00"`, "\"\xff\"", `"\uFFFD"`, `"\b\f\r"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want string
		if json.Unmarshal(raw, &want) != nil {
			return
		}
		got, ok := decodeString(raw)
		if !ok {
			t.Fatalf("%q: not decoded", raw)
		}
		if utf8.ValidString(got) {
			if got != want {
				t.Fatalf("%q: got %q, encoding/json %q", raw, got, want)
			}
			return
		}
		if !strings.ContainsRune(want, utf8.RuneError) {
			t.Fatalf("%q: refused as invalid, but encoding/json replaced nothing: %q", raw, want)
		}
	})
}

// NotUTF8 names the first string that is not valid UTF-8 as sent, at any
// depth, and nothing in a body whose strings all are.
func TestNotUTF8(t *testing.T) {
	for raw, want := range map[string]string{
		`{"a":"x","b":[1,"y",{"c":"\ud83d\ude00"}],"d":null}`: "",
		`{"content":"\ud800"}`:                                "content",
		"{\"a\":{\"b\":\"ok\",\"c\":\"\xc0\"}}":               "a.c",
		`{"r":["ok","\udc00x"]}`:                              "r[1]",
		"{\"m\":{\"k\xff\":1}}":                               "a member name in m",
		"{\"k\xff\":1}":                                       "a member name in the body",
		`{"a":"\\ud800"}`:                                     "", // an escaped backslash, then text
	} {
		name, bad := NotUTF8([]byte(raw))
		if bad != (want != "") || name != want {
			t.Errorf("%q: %q %v, want %q", raw, name, bad, want)
		}
	}
}
