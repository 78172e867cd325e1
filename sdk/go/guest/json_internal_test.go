package guest

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"testing"
)

// firstFlagged returns the index of the byte the lowest set bit of m flags, 8 for none.
func firstFlagged(m uint64) int { return bits.TrailingZeros64(m) >> 3 }

// TestWordScanners checks specialBytes and nonDigits against their byte-wise definitions for
// every byte value at every position, behind plain (or digit) bytes and before every kind of
// byte, which the word tricks' borrows and carries could confuse.
func TestWordScanners(t *testing.T) {
	for pos := 0; pos < 8; pos++ {
		for c := 0; c < 256; c++ {
			for _, after := range []byte{'a', '"', 0, 0xff, '9', ':'} {
				var w [8]byte
				for i := range w {
					switch {
					case i < pos:
						w[i] = 'x'
					case i == pos:
						w[i] = byte(c)
					default:
						w[i] = after
					}
				}
				x := binary.LittleEndian.Uint64(w[:])
				want := 8
				for i, b := range w {
					if !plainByte[b] {
						want = i
						break
					}
				}
				if got := firstFlagged(specialBytes(x)); got != want {
					t.Fatalf("specialBytes(%q): first special at %d, want %d", w, got, want)
				}
				for i := 0; i < pos; i++ {
					w[i] = byte('0' + i)
				}
				x = binary.LittleEndian.Uint64(w[:])
				want = 8
				for i, b := range w {
					if b < '0' || b > '9' {
						want = i
						break
					}
				}
				if got := firstFlagged(nonDigits(x)); got != want {
					t.Fatalf("nonDigits(%q): first non-digit at %d, want %d", w, got, want)
				}
			}
		}
	}
}

func TestAppendInt(t *testing.T) {
	for _, v := range []int64{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 12345, -1, -9, -10, -99, -100, -12345,
		1e9, 1e18, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1} {
		if got, want := string(appendInt([]byte("x"), v)), "x"+strconv.FormatInt(v, 10); got != want {
			t.Errorf("appendInt(%d) = %q, want %q", v, got, want)
		}
	}
}
