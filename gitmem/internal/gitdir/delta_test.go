package gitdir

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// Every delta applies back to its target, and the ones for small edits
// are small.
func TestDeltaRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	text := func(lines int) []byte {
		var b bytes.Buffer
		for i := range lines {
			fmt.Fprintf(&b, "line %d: %x\n", i, rng.Uint64())
		}
		return b.Bytes()
	}
	big := random(300 << 10)
	cases := []struct {
		name         string
		base, target []byte
		max          int // the delta must be at most this long (0: no bound)
	}{
		{"empty both", nil, nil, 4},
		{"empty base", nil, []byte("hello"), 0},
		{"empty target", []byte("hello"), nil, 4},
		{"equal", text(100), nil, 16},
		{"unrelated", random(5000), random(5000), 0},
		{"big copy over 64 KiB", big, append(append([]byte{}, big...), 'x'), 64},
		{"short", []byte("abc"), []byte("abd"), 0},
	}
	cases[3].target = cases[3].base
	// Edits of text: one line changed, inserted, removed; blocks moved.
	for i := range 20 {
		base := text(50 + rng.IntN(500))
		lines := bytes.SplitAfter(base, []byte("\n"))
		k := rng.IntN(len(lines) - 1)
		var target []byte
		switch i % 4 {
		case 0:
			lines[k] = []byte("changed\n")
			target = bytes.Join(lines, nil)
		case 1:
			target = bytes.Join(append(lines[:k:k], append([][]byte{[]byte("inserted line\n")}, lines[k:]...)...), nil)
		case 2:
			target = bytes.Join(append(lines[:k:k], lines[k+1:]...), nil)
		case 3:
			half := len(lines) / 2
			target = bytes.Join(append(append([][]byte{}, lines[half:]...), lines[:half]...), nil)
		}
		cases = append(cases, struct {
			name         string
			base, target []byte
			max          int
		}{fmt.Sprintf("text edit %d", i), base, target, 200})
	}
	for _, c := range cases {
		d := Delta(c.base, c.target, 0)
		if d == nil {
			t.Fatalf("%s: no delta without a limit", c.name)
		}
		got, err := applyDelta(c.base, d)
		if err != nil || !bytes.Equal(got, c.target) {
			t.Fatalf("%s: the delta does not apply back (%v)", c.name, err)
		}
		if c.max > 0 && len(d) > c.max {
			t.Errorf("%s: a delta of %d bytes for %d bytes, want at most %d", c.name, len(d), len(c.target), c.max)
		}
		if len(d) > 0 && Delta(c.base, c.target, len(d)) != nil {
			t.Errorf("%s: the limit is not kept", c.name)
		}
	}
}

// A random base and random edits of it, many times over.
func TestDeltaRandomEdits(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 500 {
		base := make([]byte, rng.IntN(4000))
		alphabet := 2 + rng.IntN(254) // a small alphabet makes repeats
		for i := range base {
			base[i] = byte(rng.IntN(alphabet))
		}
		target := append([]byte{}, base...)
		for range rng.IntN(10) {
			at := rng.IntN(len(target) + 1)
			switch rng.IntN(3) {
			case 0:
				ins := make([]byte, rng.IntN(300))
				for i := range ins {
					ins[i] = byte(rng.IntN(alphabet))
				}
				target = append(target[:at:at], append(ins, target[at:]...)...)
			case 1:
				end := min(len(target), at+rng.IntN(300))
				target = append(target[:at:at], target[end:]...)
			case 2:
				if len(base) > 0 {
					from := rng.IntN(len(base))
					end := min(len(base), from+rng.IntN(500))
					target = append(target[:at:at], append(append([]byte{}, base[from:end]...), target[at:]...)...)
				}
			}
		}
		d := Delta(base, target, 0)
		got, err := applyDelta(base, d)
		if err != nil || !bytes.Equal(got, target) {
			t.Fatalf("iteration %d: the delta does not apply back (%v)", iter, err)
		}
	}
}

// A damaged delta is refused, never applied out of bounds.
func TestApplyDeltaRefusesDamage(t *testing.T) {
	t.Parallel()
	base := []byte("the quick brown fox jumps over the lazy dog, again and again")
	target := []byte("the quick brown cat jumps over the lazy dog, again and again!")
	d := Delta(base, target, 0)
	for i := range d {
		for _, b := range []byte{0, 0x7f, 0x80, 0xff} {
			bad := append([]byte{}, d...)
			bad[i] = b
			if got, err := applyDelta(base, bad); err == nil && len(got) != len(target) {
				t.Fatalf("byte %d = %#x: applied to %d bytes", i, b, len(got))
			}
		}
	}
	for n := range len(d) {
		if _, err := applyDelta(base, d[:n]); err == nil {
			t.Fatalf("a delta cut at %d applied", n)
		}
	}
	if _, err := applyDelta(base[1:], d); err == nil {
		t.Fatal("a delta applied to a base of the wrong size")
	}
}

func BenchmarkDeltaTree(b *testing.B) {
	// A flat folder of 9,000 entries, one of them changed.
	var base bytes.Buffer
	for i := range 9000 {
		fmt.Fprintf(&base, "100644 note-%05d.md\x00%020d", i, i)
	}
	target := bytes.Replace(base.Bytes(), []byte("note-04500.md\x00"), []byte("note-04500.md\x00x"), 1)
	target = append(target[:0:0], target...)
	target = append(target[:len(target)/2], target[len(target)/2+1:]...)
	b.SetBytes(int64(len(target)))
	for range b.N {
		if Delta(base.Bytes(), target, len(target)/2) == nil {
			b.Fatal("no delta")
		}
	}
}
