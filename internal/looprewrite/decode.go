package looprewrite

import "github.com/projhost/projhost/internal/wasmbin"

// wreader decodes the parts of the WebAssembly binary format the rewriter needs. Its own errors
// wrap ErrInvalid.
type wreader struct{ wasmbin.Reader }

func newReader(b []byte) wreader { return wreader{wasmbin.Reader{B: b, Malformed: ErrInvalid}} }

// fail records an ErrInvalid error: the bytes are not valid WebAssembly.
func (r *wreader) fail(format string, args ...any) { r.Fail(ErrInvalid, format, args...) }

// unsupported records an ErrUnsupported error: an encoding the reader does not know.
func (r *wreader) unsupported(format string, args ...any) {
	r.Fail(ErrUnsupported, format, args...)
}

// valTypes skips a vector of value types and returns its length.
func (r *wreader) valTypes() uint32 {
	n := r.U32()
	for i := n; i > 0 && r.Err == nil; i-- {
		r.ValType()
	}
	return n
}

// constExpr skips a constant expression: instructions up to end.
func (r *wreader) constExpr() {
	for r.Err == nil {
		op := r.Byte()
		if op == 0x0B {
			return
		}
		r.skipImmediates(op)
	}
}

// blockType skips a block type: 0x40, a value type, or an s33 type index.
func (r *wreader) blockType() {
	if c := r.Peek(); c == 0x63 || c == 0x64 {
		r.ValType()
		return
	}
	r.SkipLEB()
}

func (r *wreader) memarg() {
	align := r.U32()
	if align&0x40 != 0 { // multi-memory: memory index follows
		r.U32()
	}
	r.SkipLEB() // offset (u32, or u64 for memory64)
}

// skipImmediates skips the immediates of the instruction whose opcode op was just read. It knows
// the instructions of WebAssembly 2.0 plus tail calls, exception handling (legacy and
// try_table), typed function references, threads and relaxed SIMD.
func (r *wreader) skipImmediates(op byte) {
	switch {
	case op == 0x02, op == 0x04, op == 0x06: // block, if, try
		r.blockType()
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0A, op == 0x0B, op == 0x0F, op == 0x19,
		op == 0x1A, op == 0x1B, op >= 0x45 && op <= 0xC4, op == 0xD1, op == 0xD3, op == 0xD4:
		// no immediates
	case op == 0x07, op == 0x08, op == 0x09, op == 0x0C, op == 0x0D, op == 0x10, op == 0x12,
		op == 0x14, op == 0x15, op == 0x18, op >= 0x20 && op <= 0x26, op == 0xD2, op == 0xD5,
		op == 0xD6, op == 0x3F, op == 0x40:
		r.U32()
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
		r.U32()
		r.U32()
	case op == 0x0E: // br_table
		for n := r.U32(); n > 0 && r.Err == nil; n-- {
			r.U32()
		}
		r.U32()
	case op == 0x1C: // select t*
		for n := r.U32(); n > 0 && r.Err == nil; n-- {
			r.ValType()
		}
	case op == 0x1F: // try_table
		r.blockType()
		for n := r.U32(); n > 0 && r.Err == nil; n-- {
			switch kind := r.Byte(); kind {
			case 0, 1:
				r.U32()
				r.U32()
			case 2, 3:
				r.U32()
			default:
				r.unsupported("try_table catch kind %d", kind)
			}
		}
	case op >= 0x28 && op <= 0x3E:
		r.memarg()
	case op == 0x41, op == 0x42, op == 0xD0: // i32.const, i64.const, ref.null
		r.SkipLEB()
	case op == 0x43:
		r.Bytes(4)
	case op == 0x44:
		r.Bytes(8)
	case op == 0xFC:
		switch sub := r.U32(); {
		case sub <= 7: // saturating truncations
		case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
			r.U32()
			r.U32()
		case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
			r.U32()
		default:
			r.unsupported("opcode 0xFC %d", sub)
		}
	case op == 0xFD:
		switch sub := r.U32(); {
		case sub <= 11, sub == 92, sub == 93: // loads, store, load_zero
			r.memarg()
		case sub == 12, sub == 13: // v128.const, i8x16.shuffle
			r.Bytes(16)
		case sub >= 21 && sub <= 34: // extract/replace lane
			r.Byte()
		case sub >= 84 && sub <= 91: // load/store lane
			r.memarg()
			r.Byte()
		case sub <= 0x113:
		default:
			r.unsupported("opcode 0xFD %d", sub)
		}
	case op == 0xFE:
		switch sub := r.U32(); {
		case sub == 0x03: // atomic.fence
			r.Byte()
		case sub <= 0x02, sub >= 0x10 && sub <= 0x4E:
			r.memarg()
		default:
			r.unsupported("opcode 0xFE %d", sub)
		}
	default:
		r.unsupported("opcode %#x", op)
	}
}

func appendU32(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

func appendS32(dst []byte, v int32) []byte {
	for {
		b := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(dst, b)
		}
		dst = append(dst, b|0x80)
	}
}

func appendName(dst []byte, s string) []byte {
	return append(appendU32(dst, uint32(len(s))), s...)
}
