package host

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/testwasm"
)

func init() {
	hostileWAT["instr_min"] = `(module (func (loop (br 0))))`
}

// TestInstrumentModules: every example and hand-written module is instrumented (not run under
// wazero's slower fallback), trusted or not: a trusted module keeps the GC-safe points and the
// context check, only the deadline timer is gone. The rewrite itself is tested in
// internal/looprewrite.
func TestInstrumentModules(t *testing.T) {
	rt, _ := newTestRuntime(t)
	mods := map[string][]byte{"good": wat(t, "good"), "sink": wat(t, "sink"), "loop": wat(t, "loop"), "start_loop": wat(t, "start_loop")}
	for _, name := range append([]string{testwasm.FlightDelaysAS, testwasm.FlightDelaysGo, testwasm.CountAS, testwasm.CountGo}, testwasm.TinyGoModules(t, testwasm.FlightDelaysTinyGo, testwasm.CountTinyGo)...) {
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
			if tm := load(t, rt, name, w, WithTrusted(true)); !tm.interruptible || !tm.Trusted() {
				t.Errorf("trusted module: interruptible %v, trusted %v; want both", tm.interruptible, tm.Trusted())
			}
		})
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
