package memstore

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
)

// A listing's cursor is opaque to clients: base64url of a check and the
// value the page starts after (the path of the last item of the page
// before, a memory's or a roll-up's ending in "/"; the last store's name;
// the last version's id). The check is the first 4 bytes of the SHA-256
// of the listing the cursor is for (its route, its store, its filters:
// the caller names it) and the value. It makes what that listing did not
// hand out (garbage, a path or a name in base64, another store's or
// another listing's cursor, one made with other filters) a 400, rather
// than a page that starts somewhere else or looks empty.
func Cursor(listing, value string) string {
	return base64.RawURLEncoding.EncodeToString(append(cursorSum(listing, value), value...))
}

const cursorCheck = 4

func cursorSum(listing, value string) []byte {
	h := sha256.New()
	h.Write([]byte(strconv.Itoa(len(listing)) + ":" + listing + value))
	return h.Sum(nil)[:cursorCheck]
}

// FromCursor returns the value of a cursor Cursor made for listing (""
// for "", the first page), else an *InvalidError.
func FromCursor(listing, page string) (string, error) {
	if page == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(page)
	if err != nil || len(b) <= cursorCheck || Cursor(listing, string(b[cursorCheck:])) != page {
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
