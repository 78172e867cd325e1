package looprewrite

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/projhost/projhost/internal/testwasm"
)

// testdataWant describes the hand-written modules testdata/<name>.wasm (assembled from
// <name>.wat): their loops, their functions that call and do not start with a loop, the index of
// the interrupt flag after the rewrite (their own and imported globals), whether they have a
// memory and a start section.
var testdataWant = map[string]struct {
	loops, entries int
	flag           uint32
	memory, start  bool
}{
	"min":   {loops: 1},
	"loops": {loops: 3, entries: 1, start: true},
	"full":  {loops: 6, entries: 1, flag: 5, memory: true, start: true},
	"spin":  {loops: 1, entries: 1, memory: true},
}

type testdataModule struct {
	name string
	wasm []byte
}

// testdataModules reads testdata/*.wasm; each must be described in testdataWant.
func testdataModules(tb testing.TB) []testdataModule {
	tb.Helper()
	paths, err := filepath.Glob("testdata/*.wasm")
	if err != nil {
		tb.Fatal(err)
	}
	var mods []testdataModule
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".wasm")
		if _, ok := testdataWant[name]; !ok {
			tb.Fatalf("%s is not described in testdataWant", p)
		}
		w, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		mods = append(mods, testdataModule{name, w})
	}
	if len(mods) != len(testdataWant) {
		tb.Fatalf("testdata has %d modules, testdataWant describes %d", len(mods), len(testdataWant))
	}
	return mods
}

// TestRewriteTestdata: each hand-written module is rewritten with one check per loop (the byte
// 0x03 in immediates is not taken for a loop) and per function entry that needs one, and passes
// the checker.
func TestRewriteTestdata(t *testing.T) {
	c := newChecker(t, fuzzMemPages, false)
	for _, m := range testdataModules(t) {
		t.Run(m.name, func(t *testing.T) {
			want := testdataWant[m.name]
			res := c.check(t, m.wasm)
			if res.err != nil || !res.valid {
				t.Fatalf("Rewrite: %v; wazero compiles the module: %v", res.err, res.valid)
			}
			if res.hasStart != want.start {
				t.Errorf("hasStart = %v, want %v", res.hasStart, want.start)
			}
			if n := bytes.Count(res.out, loopCheck(want.flag, want.memory)); n != want.loops+want.entries {
				t.Errorf("%d checks inserted, want %d + %d", n, want.loops, want.entries)
			}
		})
	}
}

// TestRewriteExamples: the example handlers (Go and AssemblyScript; the Go ones not with -short)
// pass the checker, interpreted; the AssemblyScript ones have a start section (their top-level
// code).
func TestRewriteExamples(t *testing.T) {
	// A Go guest needs more than fuzzMemPages; the host tests compile these rewritten with the
	// compiler.
	c := newChecker(t, 65536, true)
	for _, name := range append([]string{testwasm.CountAS, testwasm.FlightDelaysAS, testwasm.CountGo, testwasm.FlightDelaysGo}, testwasm.TinyGoModules(t, testwasm.CountTinyGo, testwasm.FlightDelaysTinyGo)...) {
		t.Run(name, func(t *testing.T) {
			if testing.Short() && strings.HasSuffix(name, "-go") {
				t.Skip("a Go guest takes seconds to compile")
			}
			w, err := os.ReadFile(testwasm.Path(t, name))
			if err != nil {
				t.Fatal(err)
			}
			res := c.check(t, w)
			if res.err != nil || !res.valid {
				t.Fatalf("Rewrite: %v; wazero compiles the module: %v", res.err, res.valid)
			}
			if want := strings.HasSuffix(name, "-as"); res.hasStart != want {
				t.Errorf("hasStart = %v, want %v", res.hasStart, want)
			}
		})
	}
}

// TestLoopCheck: the inserted code, byte by byte, with and without a memory, and with global
// indexes of one and two LEB128 bytes.
func TestLoopCheck(t *testing.T) {
	cases := []struct {
		name   string
		flag   uint32
		memory bool
		want   []byte
	}{
		{"memory", 5, true, []byte{
			0x23, 6, 0x41, 1, 0x6B, 0x24, 6, // $fuel = $fuel - 1
			0x23, 6, 0x45, 0x04, 0x40, // if $fuel == 0
			0x41, 0x80, 0x80, 0x01, 0x24, 6, // $fuel = 16384
			0x41, 0, 0x40, 0, 0x1A, // drop(memory.grow(0))
			0x23, 5, 0x04, 0x40, 0x00, 0x0B, // if $interrupt { unreachable }
			0x0B,
		}},
		{"no memory, long indexes", 200, false, []byte{
			0x23, 0xC9, 1, 0x41, 1, 0x6B, 0x24, 0xC9, 1,
			0x23, 0xC9, 1, 0x45, 0x04, 0x40,
			0x41, 0x80, 0x80, 0x01, 0x24, 0xC9, 1,
			0x23, 0xC8, 1, 0x04, 0x40, 0x00, 0x0B,
			0x0B,
		}},
	}
	for _, c := range cases {
		if got := loopCheck(c.flag, c.memory); !bytes.Equal(got, c.want) {
			t.Errorf("%s: loopCheck = % x, want % x", c.name, got, c.want)
		}
	}
}

// TestRewriteInterrupt runs testdata/spin.wasm rewritten: with the interrupt flag set the guest
// traps exactly at the Period-th loop header after the last check, and with it cleared it runs
// on; the fuel carries over from call to call.
func TestRewriteInterrupt(t *testing.T) {
	ctx := context.Background()
	w, err := os.ReadFile("testdata/spin.wasm")
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := Rewrite(w)
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	inst, err := rt.Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	flag := inst.ExportedGlobal(InterruptExport).(api.MutableGlobal)
	spin := inst.ExportedFunction("spin")
	steps := []struct {
		flag     uint64
		headers  uint64 // loop headers spin runs
		wantTrap bool
	}{
		{flag: 1, headers: Period - 1},
		{flag: 1, headers: 1, wantTrap: true},      // the Period-th header
		{flag: 0, headers: 3 * Period},             // three checks, the fuel is full again
		{flag: 1, headers: Period - 1},             //
		{flag: 1, headers: 1, wantTrap: true},      //
		{flag: 1, headers: Period, wantTrap: true}, // a full period: the last header traps
	}
	for i, s := range steps {
		flag.Set(s.flag)
		_, err := spin.Call(ctx, s.headers)
		if trapped := err != nil; trapped != s.wantTrap || (trapped && !strings.Contains(err.Error(), "unreachable")) {
			t.Fatalf("step %d (flag %d, %d headers): err = %v, want a trap: %v", i, s.flag, s.headers, err, s.wantTrap)
		}
	}
	// fork(24) makes 2^25 calls (~0.1 s), without a loop: the checks at its entry stop it
	// within Period calls.
	if _, err := inst.ExportedFunction("fork").Call(ctx, 24); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("fork(24) with the interrupt flag set: err = %v, want a trap", err)
	}
}

// TestEntryCheck: where instrumentFunc puts the checks of a function body (locals, then
// instructions).
func TestEntryCheck(t *testing.T) {
	check := []byte{0xEE} // a marker: instrumentFunc copies it verbatim
	locals := []byte{1, 2, 0x7F}
	cases := []struct {
		name       string
		body, want []byte
	}{
		{"no call", []byte{0x41, 0, 0x1A, 0x0B}, []byte{0x41, 0, 0x1A, 0x0B}},
		{"call", []byte{0x10, 0, 0x0B}, []byte{0xEE, 0x10, 0, 0x0B}},
		{"call_indirect after a block", []byte{0x02, 0x40, 0x41, 0, 0x11, 0, 0, 0x0B, 0x0B},
			[]byte{0xEE, 0x02, 0x40, 0x41, 0, 0x11, 0, 0, 0x0B, 0x0B}},
		{"return_call", []byte{0x12, 0, 0x0B}, []byte{0xEE, 0x12, 0, 0x0B}},
		{"call_ref", []byte{0xD0, 0x70, 0x14, 0, 0x0B}, []byte{0xEE, 0xD0, 0x70, 0x14, 0, 0x0B}},
		{"starting with a loop", []byte{0x03, 0x40, 0x10, 0, 0x0B, 0x0B}, []byte{0x03, 0x40, 0xEE, 0x10, 0, 0x0B, 0x0B}},
		{"a loop after a call", []byte{0x10, 0, 0x03, 0x40, 0x0B, 0x0B}, []byte{0xEE, 0x10, 0, 0x03, 0x40, 0xEE, 0x0B, 0x0B}},
		// The byte 0x10 as an immediate is no call.
		{"0x10 in an immediate", []byte{0x41, 0x10, 0x1A, 0x0B}, []byte{0x41, 0x10, 0x1A, 0x0B}},
	}
	for _, c := range cases {
		got, err := instrumentFunc(nil, slices.Concat(locals, c.body), check, 1)
		if want := slices.Concat(locals, c.want); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: % x, %v; want % x", c.name, got, err, want)
		}
	}
}

// Builders of small modules for TestRewriteErrors.

func mod(sections ...[]byte) []byte {
	return slices.Concat(append([][]byte{[]byte(header)}, sections...)...)
}

func sec(id byte, body ...byte) []byte {
	return slices.Concat([]byte{id}, appendU32(nil, uint32(len(body))), body)
}

// codeSection returns a code section with one body per function, each given as its
// instructions after a declaration of no locals and before the final end.
func codeSection(funcs ...[]byte) []byte {
	body := appendU32(nil, uint32(len(funcs)))
	for _, f := range funcs {
		body = appendU32(body, uint32(len(f)+2))
		body = append(append(append(body, 0), f...), 0x0B)
	}
	return sec(secCode, body...)
}

func name(s string) []byte { return appendName(nil, s) }

// exportSection returns an export section with one export.
func exportSection(n string, kind byte, index uint32) []byte {
	return sec(secExport, slices.Concat([]byte{1}, name(n), []byte{kind}, appendU32(nil, index))...)
}

var (
	typeVoid = sec(1, 1, 0x60, 0, 0)                                     // type 0: () -> ()
	types3   = sec(1, 3, 0x60, 0, 0, 0x60, 1, 0x7F, 0, 0x60, 0, 1, 0x7F) // () -> (), (i32) -> (), () -> i32
	oneFunc  = sec(3, 1, 0)                                              // one function of type 0
	oneI32   = sec(secGlobal, 1, 0x7F, 0, 0x41, 0, 0x0B)                 // (global i32 (i32.const 0))
	// (import "env" "g" (global i32))
	importGlobal = sec(secImport, slices.Concat([]byte{1}, name("env"), name("g"), []byte{0x03, 0x7F, 0})...)
)

type errorCase struct {
	name string
	wasm []byte
	want error
}

// errorCases are modules Rewrite refuses, as ErrInvalid (wazero refuses them too, which the
// checker verifies) or ErrUnsupported.
func errorCases() []errorCase {
	loop := codeSection([]byte{0x03, 0x40, 0x0C, 0, 0x0B})
	return []errorCase{
		{"empty", nil, ErrInvalid},
		{"no magic", []byte("\x00asx\x01\x00\x00\x00"), ErrInvalid},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), ErrUnsupported},
		{"truncated", mod(typeVoid, oneFunc, loop)[:30], ErrInvalid},
		{"section past the end", mod([]byte{1, 5, 1}), ErrInvalid},
		{"unknown section", mod(sec(99)), ErrUnsupported},
		{"unknown opcode", mod(typeVoid, oneFunc, codeSection([]byte{0xFF})), ErrUnsupported},
		{"unknown 0xFC opcode", mod(typeVoid, oneFunc, codeSection([]byte{0xFC, 99})), ErrUnsupported},
		{"trailing bytes in the code section", mod(typeVoid, oneFunc, append(loop[:len(loop):len(loop)], 0)), ErrInvalid},
		// Code naming the first global past the module's own: after the rewrite, $interrupt.
		{"global.set past the end", mod(typeVoid, oneFunc, codeSection([]byte{0x41, 0, 0x24, 0})), ErrInvalid},
		{"global.get past the own globals", mod(typeVoid, oneFunc, oneI32, codeSection([]byte{0x23, 1, 0x1A})), ErrInvalid},
		{"global.get past the imported globals", mod(typeVoid, importGlobal, oneFunc, codeSection([]byte{0x23, 1, 0x1A})), ErrInvalid},
		{"global.get past the end in dead code", mod(typeVoid, oneFunc, codeSection([]byte{0x00, 0x23, 0, 0x1A})), ErrInvalid},
		// An export of the first global past the module's own would export $interrupt.
		{"export of a global past the end", mod(typeVoid, oneFunc, exportSection("g", 0x03, 0), codeSection(nil)), ErrInvalid},
		{"export kind 5", mod(typeVoid, oneFunc, exportSection("f", 0x05, 0), codeSection(nil)), ErrInvalid},
		// The start section requires () -> (); the export replacing it would not.
		{"start function with a parameter", mod(types3, sec(secFunction, 1, 1), sec(secStart, 0), codeSection(nil)), ErrInvalid},
		{"start function with a result", mod(types3, sec(secFunction, 1, 2), sec(secStart, 0), codeSection([]byte{0x41, 0})), ErrInvalid},
		{"start function out of range", mod(typeVoid, oneFunc, sec(secStart, 1), codeSection(nil)), ErrInvalid},
		{"start function of a missing type", mod(typeVoid, sec(secFunction, 1, 1), sec(secStart, 0), codeSection(nil)), ErrInvalid},
		// Removing the start section must not make these valid.
		{"two start sections", mod(typeVoid, oneFunc, sec(secStart, 0), sec(secStart, 0), codeSection(nil)), ErrInvalid},
		{"start section after the code", mod(typeVoid, oneFunc, codeSection(nil), sec(secStart, 0)), ErrInvalid},
		{"trailing bytes in the start section", mod(typeVoid, oneFunc, sec(secStart, 0, 0), codeSection(nil)), ErrInvalid},
		// Entries are appended to these sections: bytes after the declared ones must not become
		// entries.
		{"trailing bytes in the global section", mod(sec(secGlobal, 0, 0x7F, 0, 0x41, 0, 0x0B)), ErrInvalid},
		{"trailing bytes in the export section", mod(typeVoid, oneFunc, sec(secExport, 0, 0), codeSection(nil)), ErrInvalid},
		// A count of 2^32 read as 0 (bits past 32 dropped) would be re-encoded as 2.
		{"global count past 32 bits", mod(sec(secGlobal, 0x80, 0x80, 0x80, 0x80, 0x10)), ErrInvalid},
		{"exports projhost.interrupt", mod(typeVoid, oneFunc, exportSection(InterruptExport, 0, 0), codeSection(nil)), ErrUnsupported},
		{"exports projhost.start and has a start section",
			mod(typeVoid, oneFunc, exportSection(StartExport, 0, 0), sec(secStart, 0), codeSection(nil)), ErrUnsupported},
		{"rec group type", mod(sec(1, 1, 0x4E, 1, 0x60, 0, 0)), ErrUnsupported},
	}
}

// TestRewriteErrors: malformed modules and encodings Rewrite does not know are refused with the
// right error (the host then runs the module under wazero's own deadline, or refuses it).
func TestRewriteErrors(t *testing.T) {
	c := newChecker(t, fuzzMemPages, false)
	for _, tc := range errorCases() {
		t.Run(tc.name, func(t *testing.T) {
			if res := c.check(t, tc.wasm); !errors.Is(res.err, tc.want) {
				t.Errorf("err = %v, want %v", res.err, tc.want)
			}
		})
	}
}

// TestTestdataUpToDate: testdata/*.wasm are testdata/*.wat assembled by host/testdata/wat2wasm.js
// (node and the wabt npm package; regenerate with
// `node host/testdata/wat2wasm.js internal/looprewrite/testdata internal/looprewrite/testdata/*.wat`).
// Without node or wabt it fails when CI=true and skips otherwise.
func TestTestdataUpToDate(t *testing.T) {
	skip := func(format string, args ...any) {
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node not found: %v", err)
	}
	srcs, err := filepath.Glob("testdata/*.wat")
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no testdata/*.wat (%v)", err)
	}
	dir := t.TempDir()
	script := filepath.Join(testwasm.RepoRoot(t), "host", "testdata", "wat2wasm.js")
	if b, err := exec.Command(node, append([]string{script, dir}, srcs...)...).CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 {
			skip("wabt missing: %s", b)
		}
		t.Fatalf("wat2wasm.js: %v: %s", err, b)
	}
	for _, src := range srcs {
		name := strings.TrimSuffix(filepath.Base(src), ".wat") + ".wasm"
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join("testdata", name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("testdata/%s is not testdata/%s assembled (read: %v); regenerate it", name, filepath.Base(src), err)
		}
	}
}
