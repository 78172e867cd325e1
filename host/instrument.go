package host

import (
	"errors"
	"fmt"
)

// Deadline instrumentation (RATIONALE: "The batch deadline"). wazero's own way of stopping a
// runaway guest, WithCloseOnContextDone, makes every loop iteration leave the guest's machine
// code for a Go function that checks whether the module was closed: a full exit to Go and back
// per iteration (and, in Go guests, per function call: every Go function body is a loop). That
// slowed the example handlers 5-8x. Instead, Load rewrites an untrusted module: two new globals,
// $interrupt (set only by the host; exported as interruptExport) and $fuel (used only by the
// inserted code), and at every loop header
//
//	global.get $fuel  i32.const 1  i32.sub  global.set $fuel   ;; inserted
//	global.get $fuel  i32.eqz
//	if                                                         ;; every fuelPeriod iterations:
//	  i32.const fuelPeriod  global.set $fuel
//	  i32.const 0  memory.grow  drop   ;; a no-op that exits to Go (see below)
//	  global.get $interrupt  if  unreachable  end
//	end
//	...original loop body...
//
// The module is compiled on the runtime without WithCloseOnContextDone. The host sets
// $interrupt from a timer when the deadline passes or the caller's context is done. Every
// unbounded execution passes a loop header infinitely often (recursion without a loop ends in a
// stack overflow trap; host imports return), so the check bounds every call; the cost is a global
// decrement and a branch per iteration.
//
// The periodic memory.grow(0) matters: native guest code cannot be preempted by the Go runtime,
// so a guest that never left it would stall every stop-the-world phase of the Go GC, and with it
// the timer goroutine that is to set $interrupt: a runaway loop would deadlock the process.
// wazero implements memory.grow by returning to Go, where the goroutine can be preempted.
//
// A module's start section, which wazero runs inside InstantiateModule where no deadline could
// stop it, is removed and its function exported as startExport: the host calls it right after
// instantiation, under the deadline, which is what the start section means (it runs after the
// data and element segments are applied, before anything else).

// fuelPeriod is the number of loop iterations between two slow-path checks: at a few ns per
// iteration, a runaway guest sees the interrupt, and lets a GC stop the world, within ~0.1 ms.
const fuelPeriod = 16384

// Names of the exports instrument adds. They contain a '.', so they cannot clash with Go
// //go:wasmexport or AssemblyScript names by accident; a module that already exports them fails
// to compile instrumented and falls back to wazero's own deadline mechanism.
const (
	interruptExport = "projhost.interrupt"
	startExport     = "projhost.start"
)

// errInstrument is wrapped by every error of instrument: the module uses an encoding the
// rewriter does not know (it is then run under wazero's slower deadline mechanism instead).
var errInstrument = errors.New("host: cannot instrument module")

// Section ids and the order they must appear in (custom sections, id 0, may appear anywhere).
const (
	secCustom = 0
	secImport = 2
	secMemory = 5
	secGlobal = 6
	secExport = 7
	secStart  = 8
	secCode   = 10
)

var sectionRank = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// instrument returns a rewritten copy of wasm (see above) and whether it had a start section. wasm
// must start with the magic and version (checked by Load). Errors wrap errInstrument; wazero
// validates the result when it compiles it.
func instrument(wasm []byte) (out []byte, hasStart bool, err error) {
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	r := wreader{b: wasm, off: 8}
	for r.off < len(r.b) {
		id := r.byte()
		n := r.u32()
		body := r.bytes(int(n))
		if r.err != nil {
			return nil, false, r.err
		}
		if id != secCustom && sectionRank[id] == 0 {
			return nil, false, fmt.Errorf("%w: unknown section id %d", errInstrument, id)
		}
		secs = append(secs, section{id, body})
	}

	importedGlobals, globals := uint32(0), uint32(0)
	startFunc, hasStart, hasMemory := uint32(0), false, false
	for _, s := range secs {
		switch s.id {
		case secImport:
			var importedMems uint32
			if importedGlobals, importedMems, err = countImports(s.body); err != nil {
				return nil, false, err
			}
			hasMemory = hasMemory || importedMems > 0
		case secMemory:
			sr := wreader{b: s.body}
			hasMemory = hasMemory || sr.u32() > 0
		case secGlobal:
			sr := wreader{b: s.body}
			globals = sr.u32()
			if sr.err != nil {
				return nil, false, sr.err
			}
		case secStart:
			sr := wreader{b: s.body}
			startFunc, hasStart = sr.u32(), true
			if sr.err != nil {
				return nil, false, sr.err
			}
		}
	}
	g := importedGlobals + globals // index of $interrupt; $fuel is g+1

	// The new globals: $interrupt (mut i32) = 0, $fuel (mut i32) = fuelPeriod.
	newGlobal := []byte{0x7F, 0x01, 0x41, 0x00, 0x0B, 0x7F, 0x01, 0x41}
	newGlobal = appendS32(newGlobal, fuelPeriod)
	newGlobal = append(newGlobal, 0x0B)
	newExports := appendName(nil, interruptExport)
	newExports = append(newExports, 0x03) // global
	newExports = appendU32(newExports, g)
	nExports := uint32(1)
	if hasStart {
		newExports = appendName(newExports, startExport)
		newExports = append(newExports, 0x00) // func
		newExports = appendU32(newExports, startFunc)
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
	for _, s := range secs {
		if s.id != secCustom {
			flush(sectionRank[s.id])
		}
		switch s.id {
		case secGlobal:
			sr := wreader{b: s.body}
			n := sr.u32()
			body := appendU32(nil, n+2)
			body = append(body, s.body[sr.off:]...)
			emit(secGlobal, append(body, newGlobal...))
			doneGlobal = true
		case secExport:
			sr := wreader{b: s.body}
			n := sr.u32()
			if sr.err != nil {
				return nil, false, sr.err
			}
			body := appendU32(nil, n+nExports)
			body = append(body, s.body[sr.off:]...)
			emit(secExport, append(body, newExports...))
			doneExport = true
		case secStart:
			// removed: the host calls the function through startExport
		case secCode:
			body, err := instrumentCode(s.body, loopCheck(g, hasMemory), g)
			if err != nil {
				return nil, false, err
			}
			emit(secCode, body)
		default:
			emit(s.id, s.body)
		}
	}
	flush(1 << 30)
	return out, hasStart, nil
}

// countImports returns the number of imported globals and memories.
func countImports(body []byte) (globals, mems uint32, err error) {
	r := wreader{b: body}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.bytes(int(r.u32())) // module
		r.bytes(int(r.u32())) // name
		switch kind := r.byte(); kind {
		case 0x00: // func: type index
			r.u32()
		case 0x01: // table: reftype, limits
			r.valType()
			r.limits()
		case 0x02: // memory: limits
			r.limits()
			mems++
		case 0x03: // global: valtype, mutability
			r.valType()
			r.byte()
			globals++
		case 0x04: // tag: attribute, type index
			r.byte()
			r.u32()
		default:
			r.fail("import kind %#x", kind)
		}
	}
	return globals, mems, r.err
}

// loopCheck returns the code inserted at loop headers for $interrupt = g, $fuel = g+1 (see
// above); without a memory the memory.grow is left out (such a module is rejected by Load anyway).
func loopCheck(g uint32, hasMemory bool) []byte {
	fuel := appendU32(nil, g+1)
	c := append([]byte{0x23}, fuel...)    // global.get $fuel
	c = append(c, 0x41, 0x01, 0x6B, 0x24) // i32.const 1; i32.sub; global.set
	c = append(c, fuel...)                //   $fuel
	c = append(c, 0x23)                   // global.get
	c = append(c, fuel...)                //   $fuel
	c = append(c, 0x45, 0x04, 0x40, 0x41) // i32.eqz; if; i32.const
	c = appendS32(c, fuelPeriod)          //   fuelPeriod
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

// instrumentCode rewrites the code section body, inserting check after every loop instruction.
func instrumentCode(body, check []byte, g uint32) ([]byte, error) {
	r := wreader{b: body}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(body)+len(body)/8), n)
	var fn []byte
	for i := uint32(0); i < n && r.err == nil; i++ {
		size := r.u32()
		code := r.bytes(int(size))
		if r.err != nil {
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
	if r.err == nil && r.off != len(r.b) {
		r.fail("%d trailing bytes in the code section", len(r.b)-r.off)
	}
	return out, r.err
}

func instrumentFunc(dst, code, check []byte, g uint32) ([]byte, error) {
	r := wreader{b: code}
	for n := r.u32(); n > 0 && r.err == nil; n-- { // local declarations
		r.u32()
		r.valType()
	}
	last := 0
	for r.off < len(r.b) && r.err == nil {
		op := r.byte()
		if op == 0x03 { // loop
			r.blockType()
			dst = append(dst, code[last:r.off]...)
			dst = append(dst, check...)
			last = r.off
			continue
		}
		if op == 0x23 || op == 0x24 { // global.get, global.set
			// The interrupt global gets the first index past the module's own globals. A
			// reference to it (or beyond) is invalid in the original module and must not become
			// valid by the rewrite: a guest able to clear the flag would escape the deadline.
			if idx := r.u32(); r.err == nil && idx >= g {
				r.fail("global index %d out of range (the module has %d globals)", idx, g)
			}
			continue
		}
		r.skipImmediates(op)
	}
	if r.err != nil {
		return nil, r.err
	}
	return append(dst, code[last:]...), nil
}

// wreader decodes the parts of the WebAssembly binary format the rewriter needs. The first error
// sticks; later reads return zero values.
type wreader struct {
	b   []byte
	off int
	err error
}

func (r *wreader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: at byte %d: %s", errInstrument, r.off, fmt.Sprintf(format, args...))
	}
	r.off = len(r.b)
}

func (r *wreader) byte() byte {
	if r.off >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *wreader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.off {
		r.fail("length %d past the end", n)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *wreader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint32(c&0x7F) << shift
		if c < 0x80 {
			return v
		}
	}
	r.fail("LEB128 u32 too long")
	return 0
}

// skipLEB skips a LEB128 number of at most 10 bytes (any signedness and width up to 64 bits).
func (r *wreader) skipLEB() {
	for i := 0; i < 10; i++ {
		if r.byte() < 0x80 {
			return
		}
	}
	r.fail("LEB128 number too long")
}

func (r *wreader) valType() {
	if c := r.byte(); c == 0x63 || c == 0x64 { // (ref null ht), (ref ht)
		r.skipLEB()
	}
}

// blockType skips a block type: 0x40, a value type, or an s33 type index.
func (r *wreader) blockType() {
	if r.off < len(r.b) && (r.b[r.off] == 0x63 || r.b[r.off] == 0x64) {
		r.valType()
		return
	}
	r.skipLEB()
}

func (r *wreader) limits() {
	flags := r.byte()
	r.skipLEB()
	if flags&1 != 0 {
		r.skipLEB()
	}
}

func (r *wreader) memarg() {
	align := r.u32()
	if align&0x40 != 0 { // multi-memory: memory index follows
		r.u32()
	}
	r.skipLEB() // offset (u32, or u64 for memory64)
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
		r.u32()
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x0E: // br_table
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.u32()
		}
		r.u32()
	case op == 0x1C: // select t*
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.valType()
		}
	case op == 0x1F: // try_table
		r.blockType()
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			switch kind := r.byte(); kind {
			case 0, 1:
				r.u32()
				r.u32()
			case 2, 3:
				r.u32()
			default:
				r.fail("try_table catch kind %d", kind)
			}
		}
	case op >= 0x28 && op <= 0x3E:
		r.memarg()
	case op == 0x41, op == 0x42, op == 0xD0: // i32.const, i64.const, ref.null
		r.skipLEB()
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xFC:
		switch sub := r.u32(); {
		case sub <= 7: // saturating truncations
		case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
			r.u32()
			r.u32()
		case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
			r.u32()
		default:
			r.fail("opcode 0xFC %d", sub)
		}
	case op == 0xFD:
		switch sub := r.u32(); {
		case sub <= 11, sub == 92, sub == 93: // loads, store, load_zero
			r.memarg()
		case sub == 12, sub == 13: // v128.const, i8x16.shuffle
			r.bytes(16)
		case sub >= 21 && sub <= 34: // extract/replace lane
			r.byte()
		case sub >= 84 && sub <= 91: // load/store lane
			r.memarg()
			r.byte()
		case sub <= 0x113:
		default:
			r.fail("opcode 0xFD %d", sub)
		}
	case op == 0xFE:
		switch sub := r.u32(); {
		case sub == 0x03: // atomic.fence
			r.byte()
		case sub <= 0x02, sub >= 0x10 && sub <= 0x4E:
			r.memarg()
		default:
			r.fail("opcode 0xFE %d", sub)
		}
	default:
		r.fail("opcode %#x", op)
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
