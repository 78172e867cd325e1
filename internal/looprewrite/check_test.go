package looprewrite

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/internal/wasmbounds"
)

// callTimeout bounds each call the checker makes into a rewritten module with the interrupt flag
// set; such a call must trap (or return) long before.
const callTimeout = 5 * time.Second

// checker compiles modules before and after Rewrite and checks the rewrite's contract. The
// original is compiled with wazero's interpreter (validation is the same for both engines, and
// the interpreter compiles ~10x faster), the rewrite with the compiler, as the host does, unless
// the checker is interpreted. The
// compiler runtime closes modules when the context of a call is done, so a rewritten module that
// ignored its interrupt flag fails the check instead of hanging it.
type checker struct {
	orig, rewritten wazero.Runtime
}

// newChecker returns a checker whose runtimes cap memory at memPages 64 KiB pages (both, so a
// module over the cap fails to compile before and after the rewrite alike). The cap keeps the
// instances checkInterrupt creates small; modules with imports are compiled only. With
// interpreted, the rewrite too is compiled with the interpreter (for large modules: a Go guest
// takes seconds to compile, minutes with -race).
func newChecker(tb testing.TB, memPages uint32, interpreted bool) *checker {
	ctx := context.Background()
	cfg := wazero.NewRuntimeConfig()
	if interpreted {
		cfg = wazero.NewRuntimeConfigInterpreter()
	}
	c := &checker{
		orig: wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithMemoryLimitPages(memPages)),
		rewritten: wazero.NewRuntimeWithConfig(ctx, cfg.
			WithMemoryLimitPages(memPages).WithCloseOnContextDone(true)),
	}
	tb.Cleanup(func() {
		c.orig.Close(ctx)
		c.rewritten.Close(ctx)
	})
	return c
}

// checked is what checker.check found: Rewrite's results, and whether wazero compiles the input.
type checked struct {
	out      []byte
	hasStart bool
	err      error
	valid    bool
}

// check rewrites wasm and checks, whatever wasm holds: Rewrite neither panics nor modifies its
// input, is deterministic and fails only with ErrInvalid or ErrUnsupported. When wasmbounds
// passes wasm, the rewrite passes it too. Unless compiling could run wazero out of memory
// (wasmbounds refuses the module and testwasm.SmallLEBs does not vouch for it; the host refuses
// such modules first), wazero refuses wasm when Rewrite calls it invalid, and the rewrite
// compiles if and only if wasm does. For a module that compiles
// it checks the result's structure (checkStructure), its imports and exports as wazero sees them,
// and, when it has no imports, that with the interrupt flag set every exported function (and the
// start function) traps or returns.
func (c *checker) check(t *testing.T, wasm []byte) checked {
	t.Helper()
	ctx := context.Background()
	orig := bytes.Clone(wasm)
	out, hasStart, err := Rewrite(wasm)
	res := checked{out: out, hasStart: hasStart, err: err}
	if !bytes.Equal(wasm, orig) {
		t.Fatal("Rewrite modified its input")
	}
	out2, hasStart2, err2 := Rewrite(wasm)
	if !bytes.Equal(out, out2) || hasStart != hasStart2 || fmt.Sprint(err) != fmt.Sprint(err2) {
		t.Fatalf("Rewrite is not deterministic: (%d bytes, %v, %v) then (%d bytes, %v, %v)", len(out), hasStart, err, len(out2), hasStart2, err2)
	}
	inBounds := wasmbounds.Check(wasm) == nil
	if !inBounds && !testwasm.SmallLEBs(wasm) {
		return res // wazero could run out of memory decoding it (the host refuses it first)
	}
	if err == nil && inBounds {
		if berr := wasmbounds.Check(out); berr != nil {
			t.Fatalf("wasmbounds passes the module but not its rewrite: %v", berr)
		}
	}
	inMod, inErr := c.orig.CompileModule(ctx, wasm)
	if inErr == nil {
		defer inMod.Close(ctx)
		res.valid = true
	}
	if err != nil {
		if out != nil || hasStart {
			t.Errorf("Rewrite failed (%v) but returned %d bytes, hasStart %v", err, len(out), hasStart)
		}
		invalid, unsupported := errors.Is(err, ErrInvalid), errors.Is(err, ErrUnsupported)
		if invalid == unsupported {
			t.Fatalf("error %q wraps ErrInvalid: %v, ErrUnsupported: %v; want exactly one", err, invalid, unsupported)
		}
		if invalid && inErr == nil {
			t.Fatalf("Rewrite refused a module wazero compiles as invalid: %v", err)
		}
		return res
	}
	if !inBounds && !testwasm.SmallLEBs(out) {
		return res
	}
	outMod, outErr := c.rewritten.CompileModule(ctx, out)
	if outErr == nil {
		defer outMod.Close(ctx)
	}
	switch {
	case inErr != nil && outErr == nil:
		t.Fatalf("the rewrite made a module wazero refuses (%v) valid", inErr)
	case inErr == nil && outErr != nil:
		t.Fatalf("the rewrite of a valid module does not compile: %v", outErr)
	case inErr != nil:
		return res
	}
	checkStructure(t, wasm, out, hasStart)
	checkMetadata(t, inMod, outMod, hasStart)
	if !importsAny(t, wasm) && smallTables(t, wasm) {
		c.checkInterrupt(t, outMod, hasStart)
	}
	return res
}

// checkMetadata compares what wazero reports of the module before and after the rewrite: the
// same imports, the same exported memories and functions (with their signatures), plus
// StartExport () -> () when the module had a start section.
func checkMetadata(t *testing.T, in, out wazero.CompiledModule, hasStart bool) {
	t.Helper()
	sig := func(d api.FunctionDefinition) string {
		mod, name, _ := d.Import()
		return fmt.Sprintf("%s.%s %v -> %v", mod, name, d.ParamTypes(), d.ResultTypes())
	}
	sigs := func(ds []api.FunctionDefinition) []string {
		s := make([]string, len(ds))
		for i, d := range ds {
			s[i] = sig(d)
		}
		return s
	}
	if a, b := sigs(in.ImportedFunctions()), sigs(out.ImportedFunctions()); !slices.Equal(a, b) {
		t.Errorf("imported functions %v became %v", a, b)
	}
	if a, b := len(in.ImportedMemories()), len(out.ImportedMemories()); a != b {
		t.Errorf("%d imported memories became %d", a, b)
	}
	if a, b := slices.Sorted(maps.Keys(in.ExportedMemories())), slices.Sorted(maps.Keys(out.ExportedMemories())); !slices.Equal(a, b) {
		t.Errorf("exported memories %v became %v", a, b)
	}
	want := map[string]string{}
	for name, d := range in.ExportedFunctions() {
		want[name] = sig(d)
	}
	if hasStart {
		want[StartExport] = ". [] -> []"
	}
	got := map[string]string{}
	for name, d := range out.ExportedFunctions() {
		got[name] = sig(d)
	}
	if !maps.Equal(got, want) {
		t.Errorf("exported functions %v, want %v", got, want)
	}
}

// checkInterrupt instantiates a rewritten module without imports, checks its interrupt flag
// (a mutable i32 global, 0), sets it, and calls the start function and every exported function
// with zero arguments: each must trap or return within callTimeout.
func (c *checker) checkInterrupt(t *testing.T, compiled wazero.CompiledModule, hasStart bool) {
	t.Helper()
	ctx := context.Background()
	inst, err := c.rewritten.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return // e.g. a data segment out of bounds: the same before the rewrite
	}
	defer inst.Close(ctx)
	flag, ok := inst.ExportedGlobal(InterruptExport).(api.MutableGlobal)
	if !ok || flag.Type() != api.ValueTypeI32 || flag.Get() != 0 {
		t.Fatalf("export %s = %v, want a mutable i32 global holding 0", InterruptExport, inst.ExportedGlobal(InterruptExport))
	}
	flag.Set(1)
	names := slices.Sorted(maps.Keys(compiled.ExportedFunctions()))
	if hasStart { // the start function first, as the host calls it
		names = append([]string{StartExport}, slices.DeleteFunc(names, func(s string) bool { return s == StartExport })...)
	}
	for _, name := range names {
		if inst.IsClosed() {
			t.Fatalf("instance closed before calling %s", name)
		}
		fn := inst.ExportedFunction(name)
		d := fn.Definition()
		stack := make([]uint64, 2*max(len(d.ParamTypes()), len(d.ResultTypes()))) // v128 takes 2
		callCtx, cancel := context.WithTimeout(ctx, callTimeout)
		err := fn.CallWithStack(callCtx, stack)
		timedOut := callCtx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("%s ran for %v with the interrupt flag set (err %v)", name, callTimeout, err)
		}
	}
}

// rawSection is a section as checkStructure reads it: independently of the rewriter's decoder,
// with encoding/binary's LEB128 (Uvarint).
type rawSection struct {
	id   byte
	body []byte
}

// sectionsOf splits a module wazero compiled into its sections.
func sectionsOf(t *testing.T, wasm []byte) []rawSection {
	t.Helper()
	var secs []rawSection
	for b := wasm[8:]; len(b) > 0; {
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n > uint64(len(b)-1-k) {
			t.Fatalf("section %d at byte %d: bad size", b[0], len(wasm)-len(b))
		}
		secs = append(secs, rawSection{b[0], b[1+k : 1+k+int(n)]})
		b = b[1+k+int(n):]
	}
	return secs
}

// vec splits the body of a section holding a vector into its length and the rest.
func vec(t *testing.T, s rawSection) (n uint64, rest []byte) {
	t.Helper()
	n, k := binary.Uvarint(s.body)
	if k <= 0 {
		t.Fatalf("section %d: bad vector length", s.id)
	}
	return n, s.body[k:]
}

// importsAny reports whether a module wazero compiled has an import section with any entry.
func importsAny(t *testing.T, wasm []byte) bool {
	for _, s := range sectionsOf(t, wasm) {
		if s.id != secImport {
			continue
		}
		if n, _ := vec(t, s); n > 0 {
			return true
		}
	}
	return false
}

// maxTableSize is the largest table checkInterrupt instantiates: wazero allocates a table's
// minimum size at once (8 bytes an element), and the memory cap does not cover tables.
const maxTableSize = 1 << 16

// smallTables reports whether the table section of a module wazero compiled declares only
// tables of at most maxTableSize elements (false for encodings it does not read).
func smallTables(t *testing.T, wasm []byte) bool {
	for _, s := range sectionsOf(t, wasm) {
		if s.id != 4 {
			continue
		}
		n, b := vec(t, s)
		for ; n > 0; n-- {
			if len(b) == 0 || b[0] == 0x40 { // a table with an initializer: not read here
				return false
			}
			ref := b[0]
			b = b[1:]
			if ref == 0x63 || ref == 0x64 { // (ref null? ht)
				_, k := binary.Uvarint(b)
				b = b[max(k, 0):]
			}
			if len(b) == 0 {
				return false
			}
			flags := b[0]
			min, k := binary.Uvarint(b[1:])
			if k <= 0 || min > maxTableSize {
				return false
			}
			b = b[1+k:]
			if flags&1 != 0 {
				_, k := binary.Uvarint(b)
				b = b[max(k, 0):]
			}
		}
	}
	return true
}

// checkStructure compares the sections of a module wazero compiled with those of its rewrite:
// the same sections in the same order, byte for byte, except that the start section is gone,
// the global section has two more globals and the export section one more export (two with a
// start section) after the original ones (both sections are added when missing), and the code
// section has as many bodies.
func checkStructure(t *testing.T, in, out []byte, hasStart bool) {
	t.Helper()
	if !bytes.Equal(out[:8], in[:8]) {
		t.Fatalf("header %x became %x", in[:8], out[:8])
	}
	var want []rawSection
	start := false
	for _, s := range sectionsOf(t, in) {
		if s.id == secStart {
			start = true
			continue
		}
		want = append(want, s)
	}
	if hasStart != start {
		t.Errorf("hasStart = %v, the module has a start section: %v", hasStart, start)
	}
	newExports := uint64(1)
	if start {
		newExports = 2
	}
	has := func(id byte) bool {
		return slices.ContainsFunc(want, func(s rawSection) bool { return s.id == id })
	}
	hasGlobal, hasExport := has(secGlobal), has(secExport)
	got := sectionsOf(t, out)
	i := 0
	for _, g := range got {
		switch {
		case g.id == secGlobal && !hasGlobal, g.id == secExport && !hasExport:
			n, _ := vec(t, g)
			if want := map[byte]uint64{secGlobal: 2, secExport: newExports}[g.id]; n != want {
				t.Errorf("added section %d has %d entries, want %d", g.id, n, want)
			}
			hasGlobal, hasExport = hasGlobal || g.id == secGlobal, hasExport || g.id == secExport
			continue
		case i == len(want):
			t.Fatalf("extra section %d after the original ones", g.id)
		case g.id != want[i].id:
			t.Fatalf("section %d is %d, want %d", i, g.id, want[i].id)
		}
		w := want[i]
		i++
		switch g.id {
		case secGlobal, secExport, secCode:
			wn, wrest := vec(t, w)
			gn, grest := vec(t, g)
			added := map[byte]uint64{secGlobal: 2, secExport: newExports, secCode: 0}[g.id]
			if gn != wn+added {
				t.Errorf("section %d: %d entries became %d, want %d", g.id, wn, gn, wn+added)
			}
			if g.id != secCode && !bytes.HasPrefix(grest, wrest) {
				t.Errorf("section %d: the original entries changed", g.id)
			}
		case secTable:
			wt, gt := tableLimits(t, w.body), tableLimits(t, g.body)
			if len(wt) != len(gt) {
				t.Fatalf("table section: %d tables became %d", len(wt), len(gt))
			}
			for k := range wt {
				max := uint32(wasmbounds.MaxTableEntries)
				if wt[k].hasMax {
					max = min(max, wt[k].max)
				}
				if want := (limits{wt[k].min, max, true}); gt[k] != want {
					t.Errorf("table %d: limits %+v became %+v, want %+v", k, wt[k], gt[k], want)
				}
			}
		default:
			if !bytes.Equal(g.body, w.body) {
				t.Errorf("section %d (%d bytes) changed (%d bytes)", g.id, len(w.body), len(g.body))
			}
		}
	}
	if i != len(want) {
		t.Errorf("%d of %d sections missing after the rewrite", len(want)-i, len(want))
	}
	if !hasGlobal || !hasExport {
		t.Errorf("global section added: %v, export section added: %v", hasGlobal, hasExport)
	}
}

type limits struct {
	min, max uint32
	hasMax   bool
}

// tableLimits decodes the limits of the tables of a table section body.
func tableLimits(t *testing.T, body []byte) []limits {
	t.Helper()
	r := newReader(body)
	var out []limits
	for n := r.U32(); n > 0 && r.Err == nil; n-- {
		init := r.Peek() == 0x40
		if init {
			r.Byte()
			r.Byte()
		}
		r.ValType()
		var l limits
		flags := r.Byte()
		l.min = r.U32()
		if l.hasMax = flags&1 != 0; l.hasMax {
			l.max = r.U32()
		}
		if init {
			r.constExpr()
		}
		out = append(out, l)
	}
	if r.Err != nil {
		t.Fatalf("table section: %v", r.Err)
	}
	return out
}
