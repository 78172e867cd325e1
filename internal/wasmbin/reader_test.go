package wasmbin

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

var errTest = errors.New("test: malformed")

func newReader(b ...byte) *Reader { return &Reader{B: b, Malformed: errTest} }

func TestU32(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want uint32
		ok   bool
	}{
		{"zero", []byte{0}, 0, true},
		{"one byte", []byte{0x7F}, 127, true},
		{"two bytes", []byte{0x80, 0x01}, 128, true},
		{"non-minimal zero", []byte{0x80, 0x80, 0x00}, 0, true},
		{"max", []byte{0xFF, 0xFF, 0xFF, 0xFF, 0x0F}, math.MaxUint32, true},
		{"2^32", []byte{0x80, 0x80, 0x80, 0x80, 0x10}, 0, false},
		{"six bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 0, false},
		{"truncated", []byte{0x80}, 0, false},
		{"empty", nil, 0, false},
	}
	for _, c := range cases {
		r := newReader(c.b...)
		got := r.U32()
		if ok := r.Err == nil; got != c.want || ok != c.ok {
			t.Errorf("%s: U32(% x) = %d, err %v; want %d, ok %v", c.name, c.b, got, r.Err, c.want, c.ok)
		}
		if r.Err != nil && (!errors.Is(r.Err, errTest) || r.Off != len(r.B)) {
			t.Errorf("%s: error %v (offset %d of %d), want errTest at the end", c.name, r.Err, r.Off, len(r.B))
		}
	}
}

// TestReads: the other reads, their offsets, and that the first error sticks.
func TestReads(t *testing.T) {
	cases := []struct {
		name    string
		b       []byte
		read    func(r *Reader)
		wantOff int
		wantErr bool
	}{
		{"bytes", []byte{1, 2, 3}, func(r *Reader) { r.Bytes(2) }, 2, false},
		{"bytes past the end", []byte{1, 2}, func(r *Reader) { r.Bytes(3) }, 2, true},
		{"name", []byte{2, 'h', 'i', 9}, func(r *Reader) {
			if string(r.Name()) != "hi" {
				r.Fail(errTest, "wrong name")
			}
		}, 3, false},
		{"skip LEB", []byte{0xFF, 0xFF, 0x7F, 1}, (*Reader).SkipLEB, 3, false},
		{"LEB of 11 bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0}, (*Reader).SkipLEB, 11, true},
		{"value type", []byte{0x7F, 1}, (*Reader).ValType, 1, false},
		{"reference type", []byte{0x63, 0x80, 0x01, 1}, (*Reader).ValType, 3, false},
		{"limits without maximum", []byte{0, 0x80, 0x01, 9}, (*Reader).Limits, 3, false},
		{"limits with maximum", []byte{1, 1, 0x80, 0x01, 9}, (*Reader).Limits, 4, false},
		{"end with bytes left", []byte{1}, func(r *Reader) { r.End("nothing") }, 1, true},
		{"end", []byte{1}, func(r *Reader) { r.Byte(); r.End("a byte") }, 1, false},
		{"error sticks", []byte{5, 1, 2}, func(r *Reader) {
			r.Bytes(4)
			if r.Byte() != 0 || r.U32() != 0 || r.Peek() != 0 {
				r.Fail(errTest, "a read after the error returned data")
			}
		}, 3, true},
	}
	for _, c := range cases {
		r := newReader(c.b...)
		c.read(r)
		if r.Off != c.wantOff || (r.Err != nil) != c.wantErr {
			t.Errorf("%s: offset %d, err %v; want offset %d, error %v", c.name, r.Off, r.Err, c.wantOff, c.wantErr)
		}
	}
}

// FuzzU32 compares U32 with encoding/binary's LEB128 decoder (Uvarint), which accepts up to 10
// bytes and 64 bits: U32 must agree where the encoding has at most 5 bytes and the value 32 bits,
// and fail elsewhere.
func FuzzU32(f *testing.F) {
	for _, b := range [][]byte{{0}, {0x80, 0x01}, {0xFF, 0xFF, 0xFF, 0xFF, 0x0F}, {0x80, 0x80, 0x80, 0x80, 0x10}, {0x80}} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &Reader{B: b, Malformed: errTest}
		got := r.U32()
		want, n := binary.Uvarint(b)
		if n > 0 && n <= 5 && want <= math.MaxUint32 {
			if r.Err != nil || got != uint32(want) || r.Off != n {
				t.Fatalf("U32(% x) = %d at offset %d, err %v; Uvarint: %d in %d bytes", b, got, r.Off, r.Err, want, n)
			}
			return
		}
		if r.Err == nil || !errors.Is(r.Err, errTest) || r.Off != len(b) {
			t.Fatalf("U32(% x) = %d at offset %d, err %v; want errTest (Uvarint: %d, %d)", b, got, r.Off, r.Err, want, n)
		}
	})
}

// FuzzReads runs a sequence of reads chosen by the input's bytes over the rest of it: no read
// panics, the offset stays within the input, and after an error it is at the end.
func FuzzReads(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7}, []byte{0x63, 0x80, 0x01, 2, 'h', 'i', 1, 1, 2})
	f.Fuzz(func(t *testing.T, ops, b []byte) {
		r := &Reader{B: b, Malformed: errTest}
		for _, op := range ops {
			switch op % 8 {
			case 0:
				r.Byte()
			case 1:
				r.Bytes(uint32(op) >> 3)
			case 2:
				r.U32()
			case 3:
				r.SkipLEB()
			case 4:
				r.Name()
			case 5:
				r.ValType()
			case 6:
				r.Limits()
			case 7:
				r.Peek()
			}
			if r.Off < 0 || r.Off > len(b) || (r.Err != nil && (r.Off != len(b) || !errors.Is(r.Err, errTest))) {
				t.Fatalf("after op %d: offset %d of %d, err %v", op, r.Off, len(b), r.Err)
			}
		}
	})
}
