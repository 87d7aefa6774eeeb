package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on a store's metadata, as Anthropic's hosted memory stores have
// them: a description of up to 1,024 characters, at most 16 key/value
// pairs, keys of 1 to 64 characters and values of at most 512.
const (
	MaxStoreNameBytes       = 63
	MaxStoreDisplayName     = 255
	MaxStoreDescription     = 1024
	MaxStoreMetadata        = 16
	MaxStoreMetadataKey     = 64
	MaxStoreMetadataValue   = 512
	storeNameCharsForHumans = "lowercase letters, digits, '.', '_' and '-'"
)

// CheckStoreName accepts a store name: 1 to 63 bytes of lowercase ASCII
// letters, digits, '.', '_' and '-', starting with a letter or digit and
// not ending with '.'. A name is a folder under the stores directory, so it
// must be one path segment, the same on every file system (no case
// folding, no "..", nothing hidden).
func CheckStoreName(name string) error {
	if !validName(name) {
		return fmt.Errorf("store names are 1 to %d characters: %s, starting with a letter or digit; got %q",
			MaxStoreNameBytes, storeNameCharsForHumans, name)
	}
	return nil
}

func validName(name string) bool {
	if name == "" || len(name) > MaxStoreNameBytes || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// CheckStoreDisplayName accepts a store's display name (the Memory Stores
// API's "name"): 1 to 255 characters of valid UTF-8 without control
// characters; names need not be unique.
func CheckStoreDisplayName(n string) error {
	if !utf8.ValidString(n) {
		return fmt.Errorf("the name is not valid UTF-8")
	}
	if c := utf8.RuneCountInString(n); c < 1 || c > MaxStoreDisplayName {
		return fmt.Errorf("the name is %d characters; a name is 1 to %d", c, MaxStoreDisplayName)
	}
	if strings.ContainsFunc(n, unicode.IsControl) {
		return fmt.Errorf("the name contains a control character")
	}
	return nil
}

// CheckStoreDescription accepts a description of up to 1,024 characters
// of valid UTF-8 (newlines and tabs allowed, other control characters not).
func CheckStoreDescription(d string) error {
	if !utf8.ValidString(d) {
		return fmt.Errorf("the description is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(d); n > MaxStoreDescription {
		return fmt.Errorf("the description is %d characters, the limit is %s", n, Thousands(MaxStoreDescription))
	}
	for _, r := range d {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return fmt.Errorf("the description contains a control character")
		}
	}
	return nil
}

// CheckStoreMetadata accepts at most 16 key/value pairs; keys are 1 to 64
// characters without '=', spaces or control characters; values at most 512
// characters without control characters or surrounding spaces.
func CheckStoreMetadata(m map[string]string) error {
	if len(m) > MaxStoreMetadata {
		return fmt.Errorf("a store has at most %d metadata pairs, got %d", MaxStoreMetadata, len(m))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		n := utf8.RuneCountInString(k)
		if n == 0 || n > MaxStoreMetadataKey || !utf8.ValidString(k) || strings.ContainsFunc(k, func(r rune) bool {
			return r == '=' || unicode.IsSpace(r) || unicode.IsControl(r)
		}) {
			return fmt.Errorf("metadata keys are 1 to %d characters without '=', spaces or control characters; got %q", MaxStoreMetadataKey, k)
		}
		if utf8.RuneCountInString(v) > MaxStoreMetadataValue || !utf8.ValidString(v) || strings.TrimSpace(v) != v ||
			strings.ContainsFunc(v, unicode.IsControl) {
			return fmt.Errorf("metadata %s: values are at most %d characters, without control characters or surrounding spaces", k, MaxStoreMetadataValue)
		}
	}
	return nil
}

// Token is a named credential of the multi-store server, from its token
// file. Only the SHA-256 of the secret is kept: tokens are long random
// strings, so a fast hash is enough and a request costs one hash.
type Token struct {
	Name   string   `json:"name"`
	SHA256 string   `json:"sha256"`
	Stores []string `json:"stores"` // store names or globs (*, ?, [a-z])
	Access string   `json:"access"` // "read-only" or "read-write"
	Role   string   `json:"role"`   // "agent" or "operator"
}

// Access and role values of a token.
const (
	ReadOnly  = "read-only"
	ReadWrite = "read-write"
	Agent     = "agent"
	Operator  = "operator"
)

// ReadOnly reports whether the token may only read.
func (t Token) ReadOnly() bool { return t.Access == ReadOnly }

// Operator reports whether the token may use the operator API.
func (t Token) Operator() bool { return t.Role == Operator }

// Allows reports whether the token's scope covers the store.
func (t Token) Allows(store string) bool {
	for _, g := range t.Stores {
		if ok, _ := path.Match(g, store); ok {
			return true
		}
	}
	return false
}

// TokenFile is the token file of the multi-store server.
type TokenFile struct {
	Tokens []Token `json:"tokens"`
}

// ParseTokenFile reads and checks a token file:
//
//	{"tokens": [{"name": "support-bot", "sha256": "<hex of the secret's SHA-256>",
//	             "stores": ["user-*"], "access": "read-write", "role": "agent"}]}
//
// Names are unique and follow the store-name rules (they become commit
// authors); each token names at least one store or glob; access is
// read-only or read-write; role is agent or operator.
func ParseTokenFile(data []byte) (TokenFile, error) {
	var f TokenFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("token file: %v", err)
	}
	names, hashes := map[string]bool{}, map[string]bool{}
	for i, t := range f.Tokens {
		what := fmt.Sprintf("token file: token %d (%q)", i+1, t.Name)
		if err := CheckToken(t); err != nil {
			return f, fmt.Errorf("%s: %v", what, err)
		}
		switch {
		case names[t.Name]:
			return f, fmt.Errorf("%s: the name is used twice", what)
		case hashes[strings.ToLower(t.SHA256)]:
			return f, fmt.Errorf("%s: the same secret as another token", what)
		}
		f.Tokens[i].SHA256 = strings.ToLower(t.SHA256)
		names[t.Name], hashes[f.Tokens[i].SHA256] = true, true
	}
	return f, nil
}

// CheckToken checks one token as a token file must hold it (ParseTokenFile
// checks each, then that names and secrets are not used twice).
func CheckToken(t Token) error {
	switch {
	case !validName(t.Name):
		return fmt.Errorf("names are 1 to %d characters: %s, starting with a letter or digit", MaxStoreNameBytes, storeNameCharsForHumans)
	case len(t.SHA256) != 64 || !validHex(t.SHA256):
		return fmt.Errorf("sha256 must be the 64 hex digits of the secret's SHA-256 (gitmem token add writes it)")
	case len(t.Stores) == 0:
		return fmt.Errorf("stores must name at least one store or glob (\"*\" for all)")
	case t.Access != ReadOnly && t.Access != ReadWrite:
		return fmt.Errorf("access must be %q or %q", ReadOnly, ReadWrite)
	case t.Role != Agent && t.Role != Operator:
		return fmt.Errorf("role must be %q or %q", Agent, Operator)
	}
	for _, g := range t.Stores {
		if err := CheckStoreGlob(g); err != nil {
			return err
		}
	}
	return nil
}

// CheckStoreGlob accepts a store name or a glob over store names (path.Match
// syntax: *, ?, [a-z]).
func CheckStoreGlob(g string) error {
	if g == "" || strings.Contains(g, "/") {
		return fmt.Errorf("%q is not a store name or glob", g)
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("%q is not a valid glob: %v", g, err)
	}
	return nil
}

func validHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}
