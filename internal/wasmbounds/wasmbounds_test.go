package wasmbounds

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/projhost/projhost/internal/testwasm"
)

const header = "\x00asm\x01\x00\x00\x00"

// leb appends v in LEB128.
func leb(dst []byte, v uint32) []byte {
	for ; v >= 0x80; v >>= 7 {
		dst = append(dst, byte(v)|0x80)
	}
	return append(dst, byte(v))
}

// sec returns a section with the given id and body.
func sec(id byte, body ...byte) []byte {
	return append(leb([]byte{id}, uint32(len(body))), body...)
}

// mod returns a module of the given sections.
func mod(sections ...[]byte) []byte {
	m := []byte(header)
	for _, s := range sections {
		m = append(m, s...)
	}
	return m
}

// huge is a count of 2^31 - 1 in LEB128.
var huge = leb(nil, 1<<31-1)

// withHuge returns prefix, huge and suffix.
func withHuge(prefix []byte, suffix ...byte) []byte {
	return append(append(append([]byte{}, prefix...), huge...), suffix...)
}

var (
	oneType = sec(1, 1, 0x60, 0, 0)
	oneFunc = sec(3, 1, 0)
)

// code returns a code section with one function whose body is locals followed by end.
func code(locals ...byte) []byte {
	body := append(append([]byte{}, locals...), 0x0B)
	return sec(10, append(leb([]byte{1}, uint32(len(body))), body...)...)
}

// TestCheckAccepts: the example handlers and small modules using every kind of section pass.
func TestCheckAccepts(t *testing.T) {
	mods := map[string][]byte{
		"header only": []byte(header),
		"sections": mod(oneType, sec(2, 1, 1, 'm', 1, 'f', 0, 0), oneFunc,
			sec(4, 2, 0x70, 0, 1, 0x40, 0, 0x6F, 1, 1, 2, 0xD0, 0x6F, 0x0B), // (table 1 funcref) (table 1 2 externref (ref.null extern))
			sec(5, 1, 1, 1, 2), sec(6, 1, 0x7F, 0, 0x41, 0x7F, 0x41, 1, 0x6A, 0x0B), // (global i32 (i32.add (i32.const -1) (i32.const 1)))
			sec(7, 1, 1, 'f', 0, 1), sec(8, 1),
			sec(9, 3, 0, 0x41, 0, 0x0B, 1, 1, 5, 0x70, 1, 0xD2, 1, 0x0B, 3, 0, 0), // active, passive exprs, declarative
			sec(12, 2), code(1, 3, 0x7F),
			sec(11, 2, 0, 0x41, 0, 0x0B, 2, 'h', 'i', 1, 0),
			sec(0, 4, 'n', 'a', 'm', 'e', 1, 4, 1, 1, 1, 'f', 2, 6, 1, 1, 1, 0, 1, 'x', 9, 1, 0)),
		"rec group":           mod(sec(1, 1, 0x4E, 2, 0x60, 1, 0x64, 1, 0, 0x60, 0, 1, 0x63, 0)),
		"locals at the limit": mod(oneType, oneFunc, code(append(leb([]byte{1}, MaxFunctionLocals), 0x7F)...)),
	}
	for _, name := range append([]string{testwasm.CountAS, testwasm.FlightDelaysAS, testwasm.CountGo, testwasm.FlightDelaysGo}, testwasm.TinyGoModules(t, testwasm.CountTinyGo, testwasm.FlightDelaysTinyGo)...) {
		w, err := os.ReadFile(testwasm.Path(t, name))
		if err != nil {
			t.Fatal(err)
		}
		mods[name] = w
	}
	for name, w := range mods {
		if err := Check(w); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCheckRefuses: a count or length past the bytes left in each place wazero allocates by one,
// too many locals, and malformed framing.
func TestCheckRefuses(t *testing.T) {
	cases := []struct {
		name string
		wasm []byte
		want string // in the error
	}{
		{"short", []byte("\x00asm"), "shorter than the header"},
		{"section past the end", mod([]byte{1, 5, 0}), "5 bytes declared, 1 left"},
		{"unknown section", mod(sec(14)), "unknown section id 14"},
		{"trailing bytes", mod(sec(3, 0, 0)), "1 bytes after the entries"},
		// The fuzzer's 15-byte module: 2^31 function bodies.
		{"code bodies", mod(sec(10, withHuge(nil)...)), "entries declared"},
		{"types", mod(sec(1, withHuge(nil)...)), "entries declared"},
		{"parameters", mod(sec(1, withHuge([]byte{1, 0x60})...)), "entries declared"},
		{"rec group", mod(sec(1, withHuge([]byte{1, 0x4E})...)), "entries declared"},
		{"imports", mod(sec(2, withHuge(nil)...)), "entries declared"},
		{"import name", mod(sec(2, withHuge([]byte{1})...)), "bytes declared"},
		{"functions", mod(sec(3, withHuge(nil)...)), "entries declared"},
		{"tables", mod(sec(4, withHuge(nil)...)), "entries declared"},
		{"memories", mod(sec(5, withHuge(nil)...)), "entries declared"},
		{"globals", mod(sec(6, withHuge(nil)...)), "entries declared"},
		{"exports", mod(sec(7, withHuge(nil)...)), "entries declared"},
		{"export name", mod(sec(7, withHuge([]byte{1})...)), "bytes declared"},
		{"element segments", mod(sec(9, withHuge(nil)...)), "entries declared"},
		{"element functions", mod(sec(9, withHuge([]byte{1, 0, 0x41, 0, 0x0B})...)), "entries declared"},
		{"element expressions", mod(sec(9, withHuge([]byte{1, 5, 0x70})...)), "entries declared"},
		{"body size", mod(sec(10, withHuge([]byte{1})...)), "bytes declared"},
		{"local declarations", mod(sec(10, withHuge([]byte{1, 5})...)), "entries declared"},
		{"data segments", mod(sec(11, withHuge(nil)...)), "entries declared"},
		{"data bytes", mod(sec(11, withHuge([]byte{1, 1})...)), "bytes declared"},
		{"tags", mod(sec(13, withHuge(nil)...)), "entries declared"},
		{"custom section name", mod(sec(0, withHuge(nil)...)), "bytes declared"},
		{"function names", mod(sec(0, withHuge([]byte{4, 'n', 'a', 'm', 'e', 1, 5})...)), "name subsection 1"},
		{"local names", mod(sec(0, withHuge([]byte{4, 'n', 'a', 'm', 'e', 2, 7, 1, 0})...)), "name subsection 2"},
		{"module name", mod(sec(0, withHuge([]byte{4, 'n', 'a', 'm', 'e', 0, 5})...)), "bytes declared"},
		{"name subsection size", mod(sec(0, withHuge([]byte{4, 'n', 'a', 'm', 'e', 0})...)), "bytes declared"},
		{"u32 overflow", mod(sec(3, 0x80, 0x80, 0x80, 0x80, 0x10)), "overflows 32 bits"},
		{"locals of a function", mod(oneType, oneFunc, code(append(leb([]byte{1}, MaxFunctionLocals+1), 0x7F)...)),
			"declares 50001 locals"},
		// Two functions of 50000 locals each, in a module of 50 bytes.
		{"locals in all", mod(oneType, sec(3, 2, 0, 0),
			sec(10, 2, 6, 1, 0xD0, 0x86, 0x03, 0x7F, 0x0B, 6, 1, 0xD0, 0x86, 0x03, 0x7F, 0x0B)),
			"more locals than the module has bytes"},
		{"constant expression", mod(sec(6, 1, 0x7F, 0, 0x20, 0, 0x0B)), "opcode 0x20 in a constant expression"},
	}
	for _, c := range cases {
		err := Check(c.wasm)
		if !errors.Is(err, ErrBounds) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrBounds: ...%s...", c.name, err, c.want)
		}
	}
}

// FuzzCheck: Check never panics and is deterministic; a module it passes compiles (or fails to)
// with wazero allocating at most maxAlloc; and a module it refuses for a reason other than the
// limits on locals does not compile, when compiling it is safe (testwasm.SmallLEBs). Run it
// with a short -fuzzminimizetime (see FuzzRewrite in internal/looprewrite).
func FuzzCheck(f *testing.F) {
	for _, name := range []string{testwasm.CountAS, testwasm.FlightDelaysAS} {
		w, err := os.ReadFile(testwasm.Path(f, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(w)
	}
	f.Add(mod(oneType, oneFunc, code(1, 3, 0x7F)))
	f.Add(mod(sec(10, withHuge(nil)...)))
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	f.Cleanup(func() { rt.Close(ctx) })
	f.Fuzz(func(t *testing.T, wasm []byte) {
		err := Check(wasm)
		if err2 := Check(wasm); (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("Check is not deterministic: %v, then %v", err, err2)
		}
		if err != nil && !errors.Is(err, ErrBounds) {
			t.Fatalf("error %v does not wrap ErrBounds", err)
		}
		if err != nil && (errors.Is(err, errLocals) || !testwasm.SmallLEBs(wasm)) {
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c, cerr := rt.CompileModule(ctx, wasm)
		runtime.ReadMemStats(&after)
		if cerr == nil {
			c.Close(ctx)
			if err != nil {
				t.Fatalf("Check refused a module wazero compiles: %v", err)
			}
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > maxAlloc(len(wasm)) {
			t.Fatalf("compiling %d bytes allocated %d bytes, more than %d", len(wasm), n, maxAlloc(len(wasm)))
		}
	})
}

// maxAlloc is what FuzzCheck lets wazero's interpreter allocate compiling a module of n bytes
// that Check passes (the example handlers take ~40 bytes a byte).
func maxAlloc(n int) uint64 { return 1024*uint64(n) + 64<<20 }
