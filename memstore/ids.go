package memstore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"strings"
	"sync"
	"time"
)

// Id prefixes, as the Memory Stores API has them.
const (
	PrefixStore   = "memstore_"
	PrefixMemory  = "mem_"
	PrefixVersion = "memver_"
)

// idEncoding is lowercase base32hex: its alphabet is in ASCII order, so
// ids of equal length sort as their bytes, and a store id is a valid store
// folder name (policy.CheckStoreName).
var idEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// NewID is prefix and 26 characters: the time in milliseconds and a count
// (so that of the ids this process makes, a later one sorts later, also
// within a millisecond or under a fixed clock), then 64 random bits.
func NewID(prefix string, now time.Time) string {
	idMu.Lock()
	ms := max(uint64(now.UnixMilli()), idLast)
	if ms == idLast {
		idCount++
		if idCount == 0 { // 65,536 in one millisecond: borrow the next
			ms++
		}
	} else {
		idCount = 0
	}
	idLast = ms
	count := idCount
	idMu.Unlock()
	var b [16]byte
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	b[6], b[7] = byte(count>>8), byte(count)
	rand.Read(b[8:])
	return prefix + idEncoding.EncodeToString(b[:])
}

var (
	idMu    sync.Mutex
	idLast  uint64
	idCount uint16
)

// derivedID is prefix and 26 characters of a hash of parts: the id of a
// memory or version no trailer names.
func derivedID(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return prefix + idEncoding.EncodeToString(h.Sum(nil)[:16])
}

// idLike reports whether s could be an id with prefix: short, and only
// the characters ids are made of (so that a message may quote it).
func idLike(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || rest == "" || len(s) > 128 {
		return false
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
