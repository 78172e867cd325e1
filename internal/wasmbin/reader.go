// Package wasmbin reads the primitive encodings of the WebAssembly binary format (LEB128
// numbers, byte vectors, value types, limits) for the decoders of internal/looprewrite and
// internal/wasmbounds.
package wasmbin

import "fmt"

// Reader reads B from Off. The first error sticks in Err: after it, Off is len(B) and reads
// return zero values. The Reader's own errors (the input ends, a number is too long or too
// large) wrap Malformed, which the caller sets.
type Reader struct {
	B         []byte
	Off       int
	Err       error
	Malformed error
}

// Fail records an error wrapping kind, at the current offset, unless there is one already, and
// moves to the end.
func (r *Reader) Fail(kind error, format string, args ...any) {
	if r.Err == nil {
		r.Err = fmt.Errorf("%w: at byte %d: %s", kind, r.Off, fmt.Sprintf(format, args...))
	}
	r.Off = len(r.B)
}

// Left returns the number of bytes not read yet.
func (r *Reader) Left() int { return len(r.B) - r.Off }

// End fails (Malformed) unless every byte was read; what names the thing read, for the message.
func (r *Reader) End(what string) {
	if r.Err == nil && r.Off != len(r.B) {
		r.Fail(r.Malformed, "%d bytes after %s", r.Left(), what)
	}
}

// Peek returns the next byte without reading it, 0 at the end.
func (r *Reader) Peek() byte {
	if r.Off >= len(r.B) {
		return 0
	}
	return r.B[r.Off]
}

// Byte reads a byte.
func (r *Reader) Byte() byte {
	if r.Off >= len(r.B) {
		r.Fail(r.Malformed, "unexpected end")
		return 0
	}
	c := r.B[r.Off]
	r.Off++
	return c
}

// Bytes reads n bytes (a subslice of B), failing when fewer are left.
func (r *Reader) Bytes(n uint32) []byte {
	if uint64(n) > uint64(r.Left()) {
		r.Fail(r.Malformed, "%d bytes declared, %d left", n, r.Left())
		return nil
	}
	s := r.B[r.Off : r.Off+int(n)]
	r.Off += int(n)
	return s
}

// U32 reads an unsigned LEB128 number of at most 5 bytes and 32 bits.
func (r *Reader) U32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.Byte()
		if shift == 28 && c&0x70 != 0 {
			r.Fail(r.Malformed, "LEB128 u32 overflows 32 bits")
			return 0
		}
		v |= uint32(c&0x7F) << shift
		if c < 0x80 {
			return v
		}
	}
	r.Fail(r.Malformed, "LEB128 u32 too long")
	return 0
}

// SkipLEB skips a LEB128 number of at most 10 bytes (any signedness and width up to 64 bits).
func (r *Reader) SkipLEB() {
	for i := 0; i < 10; i++ {
		if r.Byte() < 0x80 {
			return
		}
	}
	r.Fail(r.Malformed, "LEB128 number too long")
}

// Name reads a name: a length and as many bytes (not checked to be UTF-8).
func (r *Reader) Name() []byte { return r.Bytes(r.U32()) }

// ValType skips a value type: one byte, or a reference prefix (0x63, 0x64) and a heap type.
func (r *Reader) ValType() {
	if c := r.Byte(); c == 0x63 || c == 0x64 {
		r.SkipLEB()
	}
}

// Limits skips the limits of a table or memory: flags, a minimum and, with flag 1, a maximum
// (of 32 or 64 bits).
func (r *Reader) Limits() {
	flags := r.Byte()
	r.SkipLEB()
	if flags&1 != 0 {
		r.SkipLEB()
	}
}
