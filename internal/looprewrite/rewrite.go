// Package looprewrite rewrites a WebAssembly module so that a host can stop it at any time at
// the cost of a global decrement and a branch per loop iteration and call, and so that the
// module's code leaves native code regularly (see host/RATIONALE.md, "The batch deadline").
//
// wazero's own way of stopping a runaway guest, WithCloseOnContextDone, makes every loop
// iteration leave the guest's machine code for a Go function that checks whether the module was
// closed: a full exit to Go and back per iteration (and, in Go guests, per function call: every Go
// function body is a loop). That slowed the projhost example handlers 5-8x. Rewrite instead adds
// two globals, $interrupt (set only by the host, exported as InterruptExport) and $fuel (used only
// by the inserted code), and at every loop header, and at the entry of every function that calls
// another (unless it starts with a loop), inserts
//
//	global.get $fuel  i32.const 1  i32.sub  global.set $fuel
//	global.get $fuel  i32.eqz
//	if                                             ;; every Period checks:
//	  i32.const Period  global.set $fuel
//	  i32.const 0  memory.grow  drop               ;; a no-op that exits to Go (see below)
//	  global.get $interrupt  if  unreachable  end
//	end
//	...original loop or function body...
//
// The host compiles the result on a wazero runtime without WithCloseOnContextDone and sets
// $interrupt (from a timer, say) to stop the guest: it traps at one of its next Period checks.
// Between two checks a guest runs for a time bounded by the size of its code: a loop iteration
// meets one, and so does a call but to a function that calls no other (host imports return).
// Checking loops alone would not do: f(n) calling f(n-1) twice runs for 2^n calls within a
// stack of depth n.
//
// The periodic memory.grow(0) matters: native guest code cannot be preempted by the Go runtime,
// so a guest that never left it would stall every stop-the-world phase of the Go GC, and with it
// the timer goroutine that is to set $interrupt: a runaway loop would deadlock the process.
// wazero implements memory.grow by returning to Go, where the goroutine can be preempted. A
// module without a memory gets the check without it.
//
// A module's start section, which wazero runs inside InstantiateModule where no deadline could
// stop it, is removed and its function exported as StartExport: the host is to call it right
// after instantiation, which is what the start section means (it runs after the data and element
// segments are applied, before anything else).
//
// Rewrite is meant for untrusted input: it never panics, and a module it rewrites is valid
// after the rewrite only if it was before. In particular it refuses code that names a global
// past the module's own, which would reach $interrupt after the rewrite and let the guest clear
// it.
package looprewrite

import (
	"errors"
	"fmt"
	"slices"

	"github.com/projhost/projhost/internal/wasmbounds"
)

// Period is the number of checks (loop iterations and calls) between two slow paths
// (memory.grow(0) and the test of $interrupt): at a few ns per iteration, a runaway guest sees
// the interrupt, and lets a Go GC stop the world, within ~0.1 ms.
const Period = 16384

// Names of the exports Rewrite adds. They contain a '.', so they cannot clash with Go
// //go:wasmexport or AssemblyScript names by accident.
const (
	// InterruptExport is the mutable i32 global, initially 0, that stops the guest when set to a
	// value other than 0: it traps (unreachable) at one of the next Period checks it reaches. Setting it back to 0 lets an instance that is not running be called again.
	InterruptExport = "projhost.interrupt"
	// StartExport is the module's start function, () -> (), exported when the module had a start
	// section (which Rewrite removes).
	StartExport = "projhost.start"
)

// Errors of Rewrite. Every error wraps exactly one of them.
var (
	// ErrInvalid: the module is not valid WebAssembly (truncated, malformed, or referencing a
	// global past its own); wazero refuses it too.
	ErrInvalid = errors.New("looprewrite: invalid module")
	// ErrUnsupported: the module uses an encoding or feature Rewrite does not know (an unknown
	// opcode, section or binary version).
	ErrUnsupported = errors.New("looprewrite: unsupported module")
)

// Section ids and the order they must appear in (custom sections, id 0, may appear anywhere).
const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunction = 3
	secTable    = 4
	secMemory   = 5
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secCode     = 10
)

var sectionRank = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// header is the magic and version 1 every module starts with.
const header = "\x00asm\x01\x00\x00\x00"

// Rewrite returns a rewritten copy of the binary module wasm (see the package documentation) and
// whether it had a start section, now exported as StartExport. wasm is not modified, and the
// result depends on wasm alone. The result has the same imports and functions, the exports of
// wasm plus InterruptExport (and StartExport), two more globals and no start section; custom
// sections are kept. Errors wrap ErrInvalid or ErrUnsupported (also for a module that already
// exports InterruptExport, or StartExport and has a start section). A module Rewrite accepts may
// still be invalid, which compiling the result reports: Rewrite checks only what the rewrite
// depends on (the module's structure, global references, the start function's type).
func Rewrite(wasm []byte) (out []byte, hasStart bool, err error) {
	m, err := parse(wasm)
	if err != nil {
		return nil, false, err
	}
	g := m.globals // index of $interrupt; $fuel is g+1

	// The new globals: $interrupt (mut i32) = 0, $fuel (mut i32) = Period.
	newGlobal := []byte{0x7F, 0x01, 0x41, 0x00, 0x0B, 0x7F, 0x01, 0x41}
	newGlobal = appendS32(newGlobal, Period)
	newGlobal = append(newGlobal, 0x0B)
	newExports := appendName(nil, InterruptExport)
	newExports = append(newExports, 0x03) // global
	newExports = appendU32(newExports, g)
	nExports := uint32(1)
	if m.hasStart {
		newExports = appendName(newExports, StartExport)
		newExports = append(newExports, 0x00) // func
		newExports = appendU32(newExports, m.start)
		nExports++
	}

	out = make([]byte, 0, len(wasm)+len(wasm)/16+64)
	out = append(out, wasm[:8]...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	doneGlobal, doneExport := false, false
	// flush emits the global and export sections if they are due before a section of rank rank
	// and were not in the module.
	flush := func(rank int) {
		if !doneGlobal && rank > sectionRank[secGlobal] {
			emit(secGlobal, append([]byte{2}, newGlobal...))
			doneGlobal = true
		}
		if !doneExport && rank > sectionRank[secExport] {
			emit(secExport, append(appendU32(nil, nExports), newExports...))
			doneExport = true
		}
	}
	// Custom sections after the last other section stay at the end (wazero refuses a module
	// ending in a custom section without payload, and must then refuse the rewrite too).
	last := -1
	for i, s := range m.secs {
		if s.id != secCustom {
			last = i
		}
	}
	if last < 0 {
		flush(1 << 30)
	}
	for i, s := range m.secs {
		if s.id != secCustom {
			flush(sectionRank[s.id])
		}
		switch s.id {
		case secGlobal: // the original globals, then the new ones
			emit(secGlobal, slices.Concat(appendU32(nil, m.ownGlobals+2), s.body[s.entries:], newGlobal))
			doneGlobal = true
		case secExport:
			emit(secExport, slices.Concat(appendU32(nil, m.exports+nExports), s.body[s.entries:], newExports))
			doneExport = true
		case secTable:
			body, err := clampTables(s.body)
			if err != nil {
				return nil, false, err
			}
			emit(secTable, body)
		case secStart:
			// removed: the host calls the function through StartExport
		case secCode:
			body, err := instrumentCode(s.body, loopCheck(g, m.hasMemory), g)
			if err != nil {
				return nil, false, err
			}
			emit(secCode, body)
		default:
			emit(s.id, s.body)
		}
		if i == last {
			flush(1 << 30)
		}
	}
	return out, m.hasStart, nil
}

// section is a section of a module; for the global and export sections, entries is the offset
// in body of the first entry, after the count.
type section struct {
	id      byte
	body    []byte
	entries int
}

// module is what Rewrite needs to know of a module besides its code.
type module struct {
	secs       []section
	globals    uint32 // imported and own
	ownGlobals uint32
	exports    uint32
	hasMemory  bool   // imported or own
	hasStart   bool   // a start section, naming start
	start      uint32 // function index
}

// funcType is the number of parameters and results of a function type.
type funcType struct{ params, results uint32 }

// parse splits wasm into sections and reads those Rewrite depends on in full: the types,
// imports, functions, globals, exports and start; it checks that the sections are in order, that
// exports name only existing globals, that none clashes with the names Rewrite adds, and that
// the start function exists and has type () -> ().
func parse(wasm []byte) (*module, error) {
	if len(wasm) < 8 || string(wasm[:4]) != header[:4] {
		return nil, fmt.Errorf("%w: no \\0asm magic", ErrInvalid)
	}
	if string(wasm[4:8]) != header[4:] {
		return nil, fmt.Errorf("%w: binary format version %x (want 1)", ErrUnsupported, wasm[4:8])
	}
	m := &module{}
	r := newReader(wasm)
	r.Off = 8
	for rank := 0; r.Off < len(r.B); {
		id := r.Byte()
		n := r.U32()
		body := r.Bytes(n)
		if r.Err != nil {
			return nil, r.Err
		}
		if id != secCustom {
			switch next := sectionRank[id]; {
			case next == 0:
				return nil, fmt.Errorf("%w: unknown section id %d", ErrUnsupported, id)
			case next <= rank:
				return nil, fmt.Errorf("%w: section %d out of order or repeated", ErrInvalid, id)
			default:
				rank = next
			}
		}
		m.secs = append(m.secs, section{id: id, body: body})
	}

	var types []funcType
	var funcs []uint32 // type index of every function, imported ones first
	var exports []export
	for i := range m.secs {
		s := &m.secs[i]
		r := newReader(s.body)
		switch s.id {
		case secType:
			for n := r.U32(); n > 0 && r.Err == nil; n-- {
				if form := r.Byte(); form != 0x60 && r.Err == nil {
					r.unsupported("type form %#x", form)
				}
				t := funcType{params: r.valTypes()}
				t.results = r.valTypes()
				types = append(types, t)
			}
		case secImport:
			for n := r.U32(); n > 0 && r.Err == nil; n-- {
				r.Name() // module
				r.Name()
				switch kind := r.Byte(); kind {
				case 0x00: // func: type index
					funcs = append(funcs, r.U32())
				case 0x01: // table: reftype, limits
					r.ValType()
					r.Limits()
				case 0x02: // memory: limits
					r.Limits()
					m.hasMemory = true
				case 0x03: // global: valtype, mutability
					r.ValType()
					r.Byte()
					m.globals++
				case 0x04: // tag: attribute, type index
					r.Byte()
					r.U32()
				default:
					r.unsupported("import kind %#x", kind)
				}
			}
		case secFunction:
			for n := r.U32(); n > 0 && r.Err == nil; n-- {
				funcs = append(funcs, r.U32())
			}
		case secMemory:
			m.hasMemory = m.hasMemory || r.U32() > 0
			r.Off = len(r.B) // the memories are copied, not read
		case secGlobal:
			m.ownGlobals = r.U32()
			s.entries = r.Off
			for n := m.ownGlobals; n > 0 && r.Err == nil; n-- {
				r.ValType()
				r.Byte() // mutability
				r.constExpr()
			}
		case secExport:
			m.exports = r.U32()
			s.entries = r.Off
			for n := m.exports; n > 0 && r.Err == nil; n-- {
				e := export{name: string(r.Name())}
				e.kind, e.index = r.Byte(), r.U32()
				exports = append(exports, e)
			}
		case secStart:
			m.start, m.hasStart = r.U32(), true
		default:
			r.Off = len(r.B) // copied, not read
		}
		r.End("the entries")
		if r.Err != nil {
			return nil, fmt.Errorf("section %d: %w", s.id, r.Err)
		}
	}
	m.globals += m.ownGlobals

	for _, e := range exports {
		switch {
		case e.kind > 4:
			return nil, fmt.Errorf("%w: export %q: kind %#x", ErrInvalid, e.name, e.kind)
		case e.kind == 3 && e.index >= m.globals:
			// It would export $interrupt or $fuel after the rewrite.
			return nil, fmt.Errorf("%w: export %q: global %d out of range (the module has %d globals)", ErrInvalid, e.name, e.index, m.globals)
		case e.name == InterruptExport, e.name == StartExport && m.hasStart:
			return nil, fmt.Errorf("%w: the module exports %s itself", ErrUnsupported, e.name)
		}
	}
	if m.hasStart {
		// The start section guarantees the type () -> (); the export that replaces it does not.
		if m.start >= uint32(len(funcs)) || funcs[m.start] >= uint32(len(types)) {
			return nil, fmt.Errorf("%w: start function %d does not exist or has no type", ErrInvalid, m.start)
		}
		if t := types[funcs[m.start]]; t != (funcType{}) {
			return nil, fmt.Errorf("%w: start function %d has %d parameters and %d results, want none", ErrInvalid, m.start, t.params, t.results)
		}
	}
	return m, nil
}

// export is an entry of the export section.
type export struct {
	name  string
	kind  byte
	index uint32
}

// loopCheck returns the code inserted at loop headers for $interrupt = g, $fuel = g+1 (see
// above); without a memory the memory.grow is left out.
func loopCheck(g uint32, hasMemory bool) []byte {
	fuel := appendU32(nil, g+1)
	c := append([]byte{0x23}, fuel...)    // global.get $fuel
	c = append(c, 0x41, 0x01, 0x6B, 0x24) // i32.const 1; i32.sub; global.set
	c = append(c, fuel...)                //   $fuel
	c = append(c, 0x23)                   // global.get
	c = append(c, fuel...)                //   $fuel
	c = append(c, 0x45, 0x04, 0x40, 0x41) // i32.eqz; if; i32.const
	c = appendS32(c, Period)              //   Period
	c = append(c, 0x24)                   // global.set
	c = append(c, fuel...)                //   $fuel
	if hasMemory {
		c = append(c, 0x41, 0x00, 0x40, 0x00, 0x1A) // i32.const 0; memory.grow 0; drop
	}
	c = append(c, 0x23)                   // global.get
	c = appendU32(c, g)                   //   $interrupt
	c = append(c, 0x04, 0x40, 0x00, 0x0B) // if; unreachable; end
	return append(c, 0x0B)                // end
}

// instrumentCode rewrites the code section body, inserting check after every loop instruction
// and at the entry of every function that calls (see instrumentFunc).
func instrumentCode(body, check []byte, g uint32) ([]byte, error) {
	r := newReader(body)
	n := r.U32()
	out := appendU32(make([]byte, 0, len(body)+len(body)/8), n)
	var fn []byte
	for i := uint32(0); i < n && r.Err == nil; i++ {
		size := r.U32()
		code := r.Bytes(size)
		if r.Err != nil {
			break
		}
		var err error
		fn, err = instrumentFunc(fn[:0], code, check, g)
		if err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		out = appendU32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	r.End("the function bodies")
	return out, r.Err
}

// instrumentFunc appends the body code, rewritten, to dst: check after every loop instruction
// and, if the body calls a function (call, call_indirect, call_ref and their return_ forms),
// check at its entry too, unless its first instruction is a loop (whose check then runs at
// entry anyway). Without the entry check, recursion without loops could run for an
// exponential time within a bounded stack depth (f(n) calls f(n-1) twice) and never meet a
// check. Functions that do not call need none: their running time between two checks is
// bounded by their size.
func instrumentFunc(dst, code, check []byte, g uint32) ([]byte, error) {
	r := newReader(code)
	for n := r.U32(); n > 0 && r.Err == nil; n-- { // local declarations
		r.U32()
		r.ValType()
	}
	dst = append(dst, code[:r.Off]...)
	entry, last := len(dst), r.Off
	firstIsLoop, calls := r.Peek() == 0x03, false
	for r.Off < len(r.B) && r.Err == nil {
		op := r.Byte()
		switch {
		case op == 0x03: // loop
			r.blockType()
			dst = append(dst, code[last:r.Off]...)
			dst = append(dst, check...)
			last = r.Off
		case op == 0x23 || op == 0x24: // global.get, global.set
			// The interrupt global gets the first index past the module's own globals. A
			// reference to it (or beyond) is invalid in the original module and must not become
			// valid by the rewrite: a guest able to clear the flag would escape the deadline.
			if idx := r.U32(); r.Err == nil && idx >= g {
				r.fail("global index %d out of range (the module has %d globals)", idx, g)
			}
		default:
			calls = calls || op >= 0x10 && op <= 0x15
			r.skipImmediates(op)
		}
	}
	if r.Err != nil {
		return nil, r.Err
	}
	dst = append(dst, code[last:]...)
	if calls && !firstIsLoop {
		dst = slices.Insert(dst, entry, check...)
	}
	return dst, nil
}

// clampTables returns a table section whose tables' maximum is at most
// wasmbounds.MaxTableEntries (table.grow past it fails, returning -1, which the spec allows at
// any size), so a guest cannot make the host allocate a table without bound: an unbounded
// table could grow to 2^32-1 entries (32 GiB of Go heap) in one instruction. A table declaring
// more as its minimum is ErrUnsupported (the host refuses it before: wasmbounds.Check); a
// maximum below the minimum is kept, so an invalid module stays invalid.
func clampTables(body []byte) ([]byte, error) {
	r := newReader(body)
	n := r.U32()
	out := appendU32(make([]byte, 0, len(body)+8), n)
	for ; n > 0 && r.Err == nil; n-- {
		start := r.Off
		init := r.Peek() == 0x40
		if init {
			r.Byte()
			r.Byte()
		}
		r.ValType()
		out = append(out, body[start:r.Off]...)
		flags := r.Byte()
		if flags > 1 && r.Err == nil {
			r.unsupported("table limits flags %#x", flags)
		}
		lo := r.U32()
		hi := uint32(wasmbounds.MaxTableEntries)
		if flags == 1 {
			if m := r.U32(); m < hi {
				hi = m
			}
		}
		if lo > wasmbounds.MaxTableEntries && r.Err == nil {
			r.unsupported("a table of %d entries (at most %d)", lo, wasmbounds.MaxTableEntries)
		}
		out = append(out, 0x01)
		out = appendU32(out, lo)
		out = appendU32(out, hi)
		if init {
			e := r.Off
			r.constExpr()
			out = append(out, body[e:r.Off]...)
		}
	}
	r.End("the tables")
	if r.Err != nil {
		return nil, fmt.Errorf("section %d: %w", secTable, r.Err)
	}
	return out, nil
}
