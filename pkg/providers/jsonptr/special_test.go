package jsonptr

import (
	"encoding/binary"
	"testing"
)

// TestSpecial8: special8 says yes exactly when one of a word's eight bytes
// is '"', '\\' or under 0x20, for every byte value at every position among
// bytes it must pass over (plain ASCII, UTF-8's high bytes, the neighbours
// of the special values), and for two special bytes in one word.
func TestSpecial8(t *testing.T) {
	isSpecial := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }
	for _, fill := range []byte{'x', 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xc3, 0xff} {
		for pos := range 8 {
			for c := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				if got, want := special8(binary.LittleEndian.Uint64(w[:])), isSpecial(byte(c)); got != want {
					t.Fatalf("special8(% x) = %v, want %v", w, got, want)
				}
			}
		}
	}
	for _, w := range [][8]byte{
		{'"', 'a', 'a', 'a', 'a', 'a', 'a', '\\'},
		{0x00, 0x1f, 'a', 'a', 'a', 'a', 'a', 'a'},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f},
	} {
		if !special8(binary.LittleEndian.Uint64(w[:])) {
			t.Errorf("special8(% x) = false, want true", w)
		}
	}
}
