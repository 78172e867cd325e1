// Package wasmbounds checks, before a WebAssembly binary module is handed to wazero, that no
// count or length it declares can make wazero's decoder allocate memory out of proportion to the
// module's size.
//
// wazero (v1.12) sizes its slices by the counts a module declares before reading the entries:
// a 15-byte module whose code section claims 2^31 function bodies makes it allocate ~200 GB, and
// the Go runtime dies with "fatal error: runtime: out of memory", which no recover catches; the
// same holds for the vectors of every other section, names, data segments and the name section.
// A function may also declare 2^32 locals in 6 bytes, which wazero writes out one byte each.
// Check walks the module's structure (not its instructions) and refuses a module in which any
// vector declares more entries, or any name, body or data segment more bytes, than are left in
// the enclosing section, or whose functions declare more than MaxFunctionLocals locals each, or
// more than one per byte of the module (at least MinLocals) in all. Such a module is invalid, or
// beyond the limits of common engines (V8, for one, allows 50000 locals per function); the
// example handlers declare one local per ~370 bytes.
package wasmbounds

import (
	"errors"
	"fmt"

	"github.com/projhost/projhost/internal/wasmbin"
)

// Limits on declared locals (parameters not included).
const (
	// MaxFunctionLocals is the most locals one function may declare.
	MaxFunctionLocals = 50000
	// MinLocals is the most locals all functions of a module may declare together when the
	// module is smaller than MinLocals bytes; a larger module may declare one per byte. wazero
	// stores one byte per local, and compiles each function with all of them.
	MinLocals = 1 << 16
)

// MaxTableEntries is the most entries a table may declare as its minimum (and, through
// internal/looprewrite, grow to): wazero keeps a table as a Go slice of 8-byte references, so a
// table costs the host up to 8 MiB, outside the guest's linear-memory limit. A Go guest's function
// table has a few thousand entries (flightdelays-go: 5,933).
const MaxTableEntries = 1 << 20

// ErrBounds is wrapped by every error of Check: the module declares a count or length past the
// bytes that follow, too many locals, or is malformed or uses an encoding Check does not know
// (so that its counts cannot be checked).
var ErrBounds = errors.New("wasmbounds: module refused")

// errLocals is also wrapped by the errors for the limits on locals (which valid modules may
// exceed).
var errLocals = errors.New("too many locals")

// Check returns nil if wasm, a binary module (magic and version included), declares no count or
// length larger than the bytes left for it and keeps to the limits on locals; else an error
// wrapping ErrBounds that says where. It reads each byte at most a few times and allocates
// nothing in proportion to wasm. It does not validate the module: wazero does, once Check passed.
func Check(wasm []byte) error {
	if len(wasm) < 8 {
		return fmt.Errorf("%w: %d bytes, shorter than the header", ErrBounds, len(wasm))
	}
	r := newReader(wasm)
	r.Off = 8
	locals := localBudget{left: max(MinLocals, uint64(len(wasm)))}
	for r.Off < len(r.B) && r.Err == nil {
		start := r.Off
		id := r.Byte()
		body := r.Bytes(r.U32())
		if r.Err != nil {
			break
		}
		s := newReader(body)
		s.section(id, &locals)
		s.End("the entries")
		if s.Err != nil {
			return fmt.Errorf("section %d at byte %d: %w", id, start, s.Err)
		}
	}
	return r.Err
}

// localBudget is the number of locals the functions not yet read may declare.
type localBudget struct{ left uint64 }

// section checks the body of a section with id id (the reader holds the body alone), taking the
// locals declared by a code section from locals.
func (r *reader) section(id byte, locals *localBudget) {
	switch id {
	case 0: // custom
		if name := r.Name(); string(name) == "name" && r.Err == nil {
			r.nameSection()
		}
		r.Off = len(r.B)
	case 1: // type
		r.vec(func() {
			if r.Peek() == 0x4E { // rec group
				r.Byte()
				r.vec(r.funcType)
				return
			}
			r.funcType()
		})
	case 2: // import
		r.vec(func() {
			r.Name()
			r.Name()
			switch kind := r.Byte(); kind {
			case 0: // func
				r.U32()
			case 1:
				r.table()
			case 2:
				r.Limits()
			case 3: // global
				r.ValType()
				r.Byte()
			case 4: // tag
				r.Byte()
				r.U32()
			default:
				r.fail("import kind %#x", kind)
			}
		})
	case 3: // function
		r.vec(func() { r.U32() })
	case 4: // table
		r.vec(r.table)
	case 5: // memory
		r.vec(r.Limits)
	case 6: // global
		r.vec(func() {
			r.ValType()
			r.Byte()
			r.constExpr()
		})
	case 7: // export
		r.vec(func() {
			r.Name()
			r.Byte()
			r.U32()
		})
	case 8: // start
		r.U32()
	case 9: // element
		r.vec(r.elementSegment)
	case 10: // code
		r.vec(func() {
			body := newReader(r.Bytes(r.U32()))
			if r.Err != nil {
				return
			}
			n := uint64(0)
			body.vec(func() {
				n += uint64(body.U32())
				body.ValType()
			})
			switch {
			case body.Err != nil:
				r.Err = body.Err
			case n > MaxFunctionLocals:
				r.failLocals("a function declares %d locals, more than %d", n, MaxFunctionLocals)
			case n > locals.left:
				r.failLocals("the functions declare more locals than the module has bytes (or %d)", MinLocals)
			default:
				locals.left -= n
			}
		})
	case 11: // data
		r.vec(func() {
			switch flags := r.U32(); flags {
			case 0:
				r.constExpr()
			case 1:
			case 2:
				r.U32() // memory
				r.constExpr()
			default:
				r.fail("data segment flags %d", flags)
			}
			r.Bytes(r.U32())
		})
	case 12: // data count
		r.Off = len(r.B) // wazero accepts it empty
	case 13: // tag
		r.vec(func() {
			r.Byte()
			r.U32()
		})
	default:
		r.fail("unknown section id %d", id)
	}
}

// nameSection checks the subsections of the name section that wazero decodes: 0 (module name),
// 1 (function names) and 2 (local names), each within its size.
func (r *reader) nameSection() {
	for r.Off < len(r.B) && r.Err == nil {
		id := r.Byte()
		s := newReader(r.Bytes(r.U32()))
		if r.Err != nil {
			return
		}
		nameMap := func() {
			s.vec(func() {
				s.U32()
				s.Name()
			})
		}
		switch id {
		case 0:
			s.Name()
		case 1:
			nameMap()
		case 2:
			s.vec(func() {
				s.U32()
				nameMap()
			})
		default:
			s.Off = len(s.B)
		}
		s.End("the names")
		if s.Err != nil {
			r.Err = fmt.Errorf("name subsection %d: %w", id, s.Err)
		}
	}
}

func (r *reader) funcType() {
	if form := r.Byte(); form != 0x60 && r.Err == nil {
		r.fail("type form %#x", form)
	}
	r.vec(r.ValType) // parameters
	r.vec(r.ValType) // results
}

// table reads a table type, with an initializer when it starts with 0x40 0x00.
func (r *reader) table() {
	init := r.Peek() == 0x40
	if init {
		r.Byte()
		if b := r.Byte(); b != 0 {
			r.fail("table prefix 0x40 %#x", b)
		}
	}
	r.ValType()
	flags := r.Byte()
	if min := r.U32(); min > MaxTableEntries && r.Err == nil {
		r.fail("a table of %d entries (at most %d)", min, MaxTableEntries)
	}
	if flags&1 != 0 {
		r.SkipLEB()
	}
	if init {
		r.constExpr()
	}
}

func (r *reader) elementSegment() {
	funcIndexes := func() {
		r.vec(func() { r.U32() })
	}
	exprs := func() { r.vec(r.constExpr) }
	switch flags := r.U32(); flags {
	case 0: // active, table 0: offset, function indexes
		r.constExpr()
		funcIndexes()
	case 1, 3: // passive, declarative: element kind, function indexes
		r.Byte()
		funcIndexes()
	case 2: // active: table, offset, element kind, function indexes
		r.U32()
		r.constExpr()
		r.Byte()
		funcIndexes()
	case 4: // active, table 0: offset, expressions
		r.constExpr()
		exprs()
	case 5, 7: // passive, declarative: reference type, expressions
		r.ValType()
		exprs()
	case 6: // active: table, offset, reference type, expressions
		r.U32()
		r.constExpr()
		r.ValType()
		exprs()
	default:
		r.fail("element segment flags %d", flags)
	}
}

// constExpr reads a constant expression, up to its end, with the instructions wazero accepts in
// one.
func (r *reader) constExpr() {
	for r.Err == nil {
		switch op := r.Byte(); op {
		case 0x0B: // end
			return
		case 0x41, 0x42, 0x23, 0xD0, 0xD2: // i32.const, i64.const, global.get, ref.null, ref.func
			r.SkipLEB()
		case 0x43: // f32.const
			r.Bytes(4)
		case 0x44: // f64.const
			r.Bytes(8)
		case 0x6A, 0x6B, 0x6C, 0x7C, 0x7D, 0x7E: // extended-const add, sub, mul
		case 0xFD: // v128.const
			if sub := r.Byte(); sub != 12 && r.Err == nil {
				r.fail("opcode 0xFD %d in a constant expression", sub)
			}
			r.Bytes(16)
		default:
			r.fail("opcode %#x in a constant expression", op)
		}
	}
}

// reader reads a module or a part of it; its errors wrap ErrBounds.
type reader struct{ wasmbin.Reader }

func newReader(b []byte) reader { return reader{wasmbin.Reader{B: b, Malformed: ErrBounds}} }

func (r *reader) fail(format string, args ...any) { r.Fail(ErrBounds, format, args...) }

func (r *reader) failLocals(format string, args ...any) {
	if r.Err == nil {
		r.fail(format, args...)
		r.Err = fmt.Errorf("%w (%w)", r.Err, errLocals)
	}
}

// vec reads a vector: a count, checked against the bytes left (every entry takes at least one),
// and as many entries read by entry.
func (r *reader) vec(entry func()) {
	n := r.U32()
	if uint64(n) > uint64(r.Left()) {
		r.fail("%d entries declared, %d bytes left", n, r.Left())
	}
	for ; n > 0 && r.Err == nil; n-- {
		entry()
	}
}
