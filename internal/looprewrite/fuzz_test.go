package looprewrite

import (
	"os"
	"testing"

	"github.com/projhost/projhost/internal/testwasm"
)

// fuzzMemPages caps the memory of the modules FuzzRewrite compiles and runs: 16 pages = 1 MiB.
const fuzzMemPages = 16

// FuzzRewrite feeds Rewrite arbitrary bytes and mutations of valid modules and checks its
// contract (checker.check): no panic, determinism, the result compiles if and only if the input
// does, the same sections, imports and exports plus the new ones, and an interrupt flag that
// stops every exported function. Seeds: the modules in testdata/*.wasm, the AssemblyScript
// examples (build/wasm; the Go ones, 2.7 MB each, take seconds to compile and are checked by
// TestRewriteExamples instead), the modules of TestRewriteErrors, and testdata/fuzz/FuzzRewrite.
// Run it with a short minimization time: minimizing an input derived from a 30 KB seed takes
// the default 60 s, during which nothing else runs:
//
//	go test -run '^$' -fuzz=FuzzRewrite -fuzztime=5m -fuzzminimizetime=5s ./internal/looprewrite
func FuzzRewrite(f *testing.F) {
	for _, m := range testdataModules(f) {
		f.Add(m.wasm)
	}
	for _, name := range []string{testwasm.CountAS, testwasm.FlightDelaysAS} {
		w, err := os.ReadFile(testwasm.Path(f, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(w)
	}
	for _, c := range errorCases() {
		f.Add(c.wasm)
	}
	c := newChecker(f, fuzzMemPages, false)
	f.Fuzz(func(t *testing.T, wasm []byte) { c.check(t, wasm) })
}
