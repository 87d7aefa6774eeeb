package storesapi

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/gitmem-dev/gitmem/policy"
)

// Tokens are the named, scoped credentials of the multi-store server, read
// from a token file (policy.ParseTokenFile) that holds only the SHA-256 of
// each secret. Reload reads the file again (on SIGHUP); a file that does
// not parse leaves the tokens as they were. Safe for concurrent use.
type Tokens struct {
	path   string
	mu     sync.RWMutex
	byHash map[string]policy.Token
}

// LoadTokens reads the token file at path.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	return t, t.Reload()
}

// Reload reads the token file again. The file is checked as ssh checks
// a private key (StrictModes): whoever can write it, or replace it, can
// give themselves any store, and its names and scopes are no one else's
// business. So it is refused when another user owns it, or its group or
// others can read or write it, or when a folder above it is another
// user's or can be written by its group or others (but a sticky one,
// such as /tmp, where no one can replace what another owns). Root's
// files and folders are taken as one's own. (Windows has no such modes:
// not checked there.)
func (t *Tokens) Reload() error {
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("read the token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read the token file: %w", err)
	}
	if err := checkTokenFile(t.path, fi); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read the token file: %w", err)
	}
	tf, err := policy.ParseTokenFile(data)
	if err != nil {
		return err
	}
	byHash := make(map[string]policy.Token, len(tf.Tokens))
	for _, tok := range tf.Tokens {
		byHash[tok.SHA256] = tok
	}
	t.mu.Lock()
	t.byHash = byHash
	t.mu.Unlock()
	return nil
}

// Len is the number of tokens.
func (t *Tokens) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byHash)
}

// HashToken is what a token file holds for a secret: the hex SHA-256.
// Secrets are long and random, so a fast hash suffices and a request
// costs one hash, not a password hash's deliberate milliseconds.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Lookup finds the token whose secret is given (the API's bearer token,
// the console's login). Comparing hashes by map lookup leaks nothing
// useful: the hash of a guess says nothing about the secret.
func (t *Tokens) Lookup(secret string) (policy.Token, bool) {
	if secret == "" {
		return policy.Token{}, false
	}
	h := HashToken(secret)
	t.mu.RLock()
	defer t.mu.RUnlock()
	tok, ok := t.byHash[h]
	return tok, ok
}

// bearerSecret reads "Authorization: Bearer <secret>".
func bearerSecret(header string) string {
	scheme, secret, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(secret)
}
