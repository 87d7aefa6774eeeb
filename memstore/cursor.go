package memstore

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
)

// A listing's cursor is opaque to clients: base64url of a check (the
// first 4 bytes of the value's SHA-256) and the value, which is the path
// of the last item of the page before (a memory's, or a roll-up's ending
// in "/"), or the last store's name in the store listing. The check
// makes what a listing did not hand out (garbage, a path or a name in
// base64) a 400, rather than a page that starts somewhere else or looks
// empty.
func Cursor(value string) string {
	sum := sha256.Sum256([]byte(value))
	return base64.RawURLEncoding.EncodeToString(append(sum[:cursorCheck], value...))
}

const cursorCheck = 4

// FromCursor returns the value of a cursor Cursor made ("" for "", the
// first page), else an *InvalidError.
func FromCursor(page string) (string, error) {
	if page == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(page)
	if err != nil || len(b) <= cursorCheck || Cursor(string(b[cursorCheck:])) != page {
		return "", invalid("page %s is not a cursor of this listing", quote(page))
	}
	return string(b[cursorCheck:]), nil
}

// gitBlobHash is the hash git gives a blob of content data.
func gitBlobHash(data []byte) string {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}
