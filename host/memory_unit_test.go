package host

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

func init() {
	hostileWAT["store_loop"] = hostileModule("", `(loop $l (i32.store (i32.const 100) (i32.const 1)) (br $l)) (i64.const 0)`, "")
}

// fakeSys records what a linearMemory asks of the OS.
type fakeSys struct {
	reserveErr error
	commits    [][2]uint64
	released   int
}

func (f *fakeSys) reserve(b uint64) ([]byte, error) {
	if f.reserveErr != nil {
		return nil, f.reserveErr
	}
	return make([]byte, b), nil
}
func (f *fakeSys) commit(_ []byte, from, to uint64) error {
	f.commits = append(f.commits, [2]uint64{from, to})
	return nil
}
func (f *fakeSys) release([]byte) error { f.released++; return nil }

// TestLinearMemory: growth commits only the new pages and never moves the memory; Free while a
// call pins the memory releases it at the unpin, not before; nothing grows after Free; an
// interrupted call's growth is refused and reported once.
func TestLinearMemory(t *testing.T) {
	sys := &fakeSys{}
	var intr interrupter
	m, err := newLinearMemory(sys, 10*65536, &intr)
	if err != nil {
		t.Fatal(err)
	}
	a := m.Reallocate(2 * 65536)
	b := m.Reallocate(5 * 65536)
	if len(a) != 2*65536 || len(b) != 5*65536 || &a[0] != &b[0] {
		t.Fatalf("lengths %d, %d; same address %v", len(a), len(b), &a[0] == &b[0])
	}
	if want := [][2]uint64{{0, 2 * 65536}, {2 * 65536, 5 * 65536}}; len(sys.commits) != 2 || sys.commits[0] != want[0] || sys.commits[1] != want[1] {
		t.Errorf("commits %v, want %v", sys.commits, want)
	}
	if m.Reallocate(11*65536) != nil {
		t.Error("grew past the reservation")
	}
	intr.armed, intr.fired = true, true // as if the deadline passed during a call
	if m.Reallocate(6*65536) != nil || !m.takeRefused() || m.takeRefused() {
		t.Error("interrupted growth not refused and reported once")
	}
	if m.Reallocate(5*65536) == nil {
		t.Error("no growth refused a non-growing reallocation")
	}
	intr.armed, intr.fired = false, false
	// Pinned by its creation (the instantiating call): Free waits for the unpin.
	m.Free()
	if sys.released != 0 {
		t.Fatal("released while pinned")
	}
	if m.pin() {
		t.Error("pin after Free reported a live memory")
	}
	m.unpin()
	if sys.released != 0 {
		t.Fatal("released while still pinned once")
	}
	m.unpin()
	if sys.released != 1 || m.committed() != 0 {
		t.Fatalf("released %d times, committed %d after the last unpin", sys.released, m.committed())
	}
	if m.Reallocate(65536) != nil {
		t.Error("grew after Free")
	}
	m.Free()
	if sys.released != 1 {
		t.Error("released twice")
	}
}

// TestReserveFailureFallsBack: when the address space cannot be reserved the instance runs on Go
// memory (wazero's default), logged.
func TestReserveFailureFallsBack(t *testing.T) {
	if hostMemory == nil {
		t.Skip("no host allocator on this OS")
	}
	saved := hostMemory
	hostMemory = &fakeSys{reserveErr: errors.New("ENOMEM")}
	defer func() { hostMemory = saved }()
	rt, logs := newTestRuntime(t)
	m := load(t, rt, "bomb", wat(t, "bomb"))
	h := m.NewHandler("s1")
	defer h.Close(context.Background())
	if _, err := h.Handle(context.Background(), evs("s1", 1, "A", "k"), NewMemReadModel()); err != nil {
		t.Fatal(err)
	}
	if h.lm != nil || h.MemorySize() != 242*65536 {
		t.Errorf("host memory %v, size %d", h.lm, h.MemorySize())
	}
	if len(logs.find("cannot reserve the guest's memory")) != 1 {
		t.Error("fallback not logged")
	}
}

// TestRuntimeCloseDuringCall: closing the runtime while a guest writes its memory in a loop does
// not unmap the memory under it (the process would die of SIGSEGV): the call ends with ErrClosed
// when its deadline stops the guest.
func TestRuntimeCloseDuringCall(t *testing.T) {
	ctx := context.Background()
	rt, err := NewRuntime(ctx, WithCacheDir(testCacheDir()), WithMemoryLimitPages(testMemPages), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.Load(ctx, "store_loop", wat(t, "store_loop"), WithBatchDeadline(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	h := m.NewHandler("s1")
	done := make(chan error, 1)
	go func() {
		_, err := h.Handle(ctx, evs("s1", 1, "A", `{}`), NewMemReadModel())
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the loop start (not a measurement)
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
	h.Close(ctx)
}

// TestRuntimeCloseBetweenCalls: a handler whose instance the runtime closed (and whose memory
// it unmapped) refuses the next batch with ErrClosed instead of touching the memory.
func TestRuntimeCloseBetweenCalls(t *testing.T) {
	ctx := context.Background()
	rt, err := NewRuntime(ctx, WithCacheDir(testCacheDir()), WithMemoryLimitPages(testMemPages), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.Load(ctx, "good", wat(t, "good"))
	if err != nil {
		t.Fatal(err)
	}
	h := m.NewHandler("s1")
	defer h.Close(ctx)
	if _, err := h.Handle(ctx, evs("s1", 1, "A", `{}`), NewMemReadModel()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if hostMemory != nil && h.lm.committed() != 0 {
		t.Error("memory not unmapped by the runtime's close")
	}
	if _, err := h.Handle(ctx, evs("s1", 2, "A", `{}`), NewMemReadModel()); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}
