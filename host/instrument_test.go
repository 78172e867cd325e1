package host

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/testwasm"
)

func init() {
	hostileWAT["instr_loops"] = `(module
  (func $f (param i32) (result i32)
    (loop $a (loop $b (br_if $b (i32.const 0))) (br_if $a (i32.const 0)))
    (loop $c (result i32) (local.get 0)))
  (start $f2) (func $f2 (drop (call $f (i32.const 1)))))`
	hostileWAT["instr_min"] = `(module (func (loop (br 0))))`
}

// TestInstrumentModules: every example and hand-written module is instrumented (not run under
// wazero's slower fallback) when untrusted, never when trusted, and the rewrite adds exactly one
// check per loop.
func TestInstrumentModules(t *testing.T) {
	rt, _ := newTestRuntime(t)
	mods := map[string][]byte{"good": wat(t, "good"), "sink": wat(t, "sink"), "loop": wat(t, "loop"), "start_loop": wat(t, "start_loop")}
	for _, name := range []string{testwasm.FlightDelaysAS, testwasm.FlightDelaysGo, testwasm.CountAS, testwasm.CountGo} {
		w, err := os.ReadFile(testwasm.Path(t, name))
		if err != nil {
			t.Fatal(err)
		}
		mods[name] = w
	}
	for name, w := range mods {
		t.Run(name, func(t *testing.T) {
			m := load(t, rt, name, w)
			if !m.interruptible {
				t.Errorf("untrusted module not instrumented")
			}
			wantStart := name == "start_loop" || name == testwasm.FlightDelaysAS || name == testwasm.CountAS // AS top-level code
			if m.hasStart != wantStart {
				t.Errorf("hasStart = %v, want %v", m.hasStart, wantStart)
			}
			if tm := load(t, rt, name, w, WithTrusted(true)); tm.interruptible {
				t.Errorf("trusted module instrumented")
			}
		})
	}
}

// TestInstrumentChecks counts the inserted checks in a module with three loops (one nested, one
// with a block type), no global and no export section.
func TestInstrumentChecks(t *testing.T) {
	w := wat(t, "instr_loops")
	out, hasStart, err := instrument(w)
	if err != nil {
		t.Fatal(err)
	}
	if !hasStart {
		t.Error("hasStart = false")
	}
	check := loopCheck(0, false)
	if n := bytes.Count(out, check); n != 3 {
		t.Errorf("%d checks inserted, want 3", n)
	}
	for _, name := range []string{interruptExport, startExport} {
		if !bytes.Contains(out, []byte(name)) {
			t.Errorf("export %s missing", name)
		}
	}
	rt, _ := newTestRuntime(t)
	if _, err := rt.trusted.CompileModule(context.Background(), out); err != nil {
		t.Fatalf("instrumented module does not compile: %v", err)
	}
}

// TestInstrumentErrors: malformed or unknown encodings are refused (Load then falls back).
func TestInstrumentErrors(t *testing.T) {
	good := wat(t, "instr_min")
	cases := map[string][]byte{
		"truncated section": good[:len(good)-3],
		"unknown section":   append(append([]byte{}, good[:8]...), 99, 0),
		"unknown opcode":    append(append([]byte{}, good[:8]...), 1, 4, 1, 0x60, 0, 0, 3, 2, 1, 0, 10, 5, 1, 3, 0, 0xFF, 0x0B),
		// global.set 0 in a module without globals: invalid, and it must stay invalid (index 0 is
		// where the rewrite puts the interrupt flag).
		"global past the end": globalSetPastEnd(good),
	}
	for name, w := range cases {
		if _, _, err := instrument(w); !errors.Is(err, errInstrument) {
			t.Errorf("%s: err = %v, want errInstrument", name, err)
		}
	}
}

// TestDeadlineResetsAfterLateFire: a call that returns although its deadline fired keeps a usable
// instance whose next call is not interrupted.
func TestDeadlineResetsAfterLateFire(t *testing.T) {
	rt, _ := newTestRuntime(t)
	m := load(t, rt, "good", wat(t, "good"), WithBatchDeadline(time.Minute))
	h := m.NewHandler("s1")
	defer h.Close(context.Background())
	rm := NewMemReadModel()
	if _, err := h.Handle(context.Background(), evs("s1", 1, "k", `{"a":1}`), rm); err != nil {
		t.Fatal(err)
	}
	h.intr.armed = true
	h.intr.fire() // as if the timer fired just after the guest returned
	if !h.intr.disarm() {
		t.Fatal("disarm did not report the fire")
	}
	if _, err := h.Handle(context.Background(), evs("s1", 2, "k", `{"a":2}`), rm); err != nil {
		t.Fatalf("next batch: %v", err)
	}
	if h.Instances() != 1 {
		t.Errorf("instances = %d, want 1", h.Instances())
	}
}

func globalSetPastEnd(good []byte) []byte {
	return append(append([]byte{}, good[:8]...), 1, 4, 1, 0x60, 0, 0, 3, 2, 1, 0, 10, 8, 1, 6, 0, 0x41, 0, 0x24, 0, 0x0B)
}

// TestLoadRejectsInterruptFlagAccess: a module that would reach the interrupt flag after the
// rewrite is rejected at load instead of running with a deadline it could switch off.
func TestLoadRejectsInterruptFlagAccess(t *testing.T) {
	ctx := context.Background()
	rt, err := NewRuntime(ctx, WithCacheDir(""))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	_, err = rt.Load(ctx, "sneaky", globalSetPastEnd(wat(t, "instr_min")))
	if !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), "does not compile") {
		t.Fatalf("err = %v, want ErrInvalidModule: does not compile", err)
	}
}
