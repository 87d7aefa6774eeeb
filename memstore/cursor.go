package memstore

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"strconv"
)

// A listing's cursor is the path of the last item of the page before
// (a memory's, or a roll-up's ending in "/"), opaque to clients.
func encodeCursor(path string) string { return base64.RawURLEncoding.EncodeToString([]byte(path)) }

func decodeCursor(page string) (string, error) {
	if page == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(page)
	if err != nil || len(b) == 0 {
		return "", invalid("page %s is not a cursor of this listing", quote(page))
	}
	return string(b), nil
}

// gitBlobHash is the hash git gives a blob of content data.
func gitBlobHash(data []byte) string {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}
