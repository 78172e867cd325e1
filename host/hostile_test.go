package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/event"
)

// hostileModule assembles a module with the ABI v1 exports (alloc returning a fixed buffer at
// 1024 in one page of memory) around the given imports, handle body and extra fields.
func hostileModule(imports, handleBody, extra string) string {
	return `(module ` + imports + `
  (memory (export "memory") 1)
  (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "projhost_handle") (param $p i32) (param $len i32) (result i64) ` + handleBody + `)
  ` + extra + `)`
}

// hostileWAT holds the WAT sources of the hostile modules; buildWAT assembles them.
var hostileWAT = map[string]string{
	"loop":    hostileModule("", `(loop $l (br $l)) (i64.const 0)`, ""),
	"membomb": hostileModule("", `(loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) unreachable`, ""),
	// out_ptr = 0x7fff0000, out_len = 100
	"oob_output": hostileModule("", `(i64.const 0x7fff000000000064)`, ""),
	// out_ptr = 65530, out_len = 100: starts inside memory, ends outside
	"straddle_output": hostileModule("", `(i64.const 0x0000fffa00000064)`, ""),
	"garbage_output":  hostileModule("", `(i64.const 0x0000020000000009)`, `(data (i32.const 512) "garbage!!")`),
	// version 1, 1 mutation: put c/k = [1]
	"array_doc": hostileModule("", `(i64.const 0x0000020000000016)`,
		`(data (i32.const 512) "\01\00\00\00\01\00\00\00\01\01\00c\01\00k\03\00\00\00[1]")`),
	"abort": hostileModule(`(import "env" "abort" (func $abort (param i32 i32 i32 i32)))`,
		`(call $abort (i32.const 100) (i32.const 200) (i32.const 3) (i32.const 5)) (i64.const 0)`,
		`(data (i32.const 96) "\08\00\00\00b\00o\00o\00m\00") (data (i32.const 196) "\08\00\00\00x\00.\00t\00s\00")`),
	"fail": hostileModule(`(import "projhost" "fail" (func $fail (param i32 i32)))`,
		`(call $fail (i32.const 300) (i32.const 9)) (i64.const 0x7fff000000000064)`,
		`(data (i32.const 300) "bad event")`),
	"oob_log": hostileModule(`(import "projhost" "log" (func $log (param i32 i32 i32)))`,
		`(call $log (i32.const 1) (i32.const 0xffffff00) (i32.const 100)) (i64.const 0)`, ""),
	"oob_read_buf": hostileModule(`(import "projhost" "read" (func $read (param i32 i32 i32 i32 i32 i32) (result i32)))`,
		`(drop (call $read (i32.const 300) (i32.const 1) (i32.const 300) (i32.const 1) (i32.const 65530) (i32.const 4096))) (i64.const 0)`,
		`(data (i32.const 300) "c")`),
	"oob_field": hostileModule(`(import "projhost" "field" (func $field (param i32 i32) (result i32)))`,
		`(drop (call $field (i32.const 65530) (i32.const 10))) (i64.const 0)`, ""),
	"field_in_init": hostileModule(`(import "projhost" "field" (func $field (param i32 i32) (result i32)))`,
		`(i64.const 0)`, `(func (export "_initialize") (drop (call $field (i32.const 0) (i32.const 1))))`),
	"stack_overflow": hostileModule("", `(call $rec) (i64.const 0)`, `(func $rec (call $rec))`),
	// fork(32) makes 2^33 calls without a loop (tens of seconds) within a stack of depth 32.
	"fork": hostileModule("", `(call $fork (i32.const 32)) (i64.const 0)`,
		`(func $fork (param i32) (if (local.get 0) (then (call $fork (i32.sub (local.get 0) (i32.const 1))) (call $fork (i32.sub (local.get 0) (i32.const 1))))))`),
	"proc_exit": hostileModule(`(import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))`,
		`(call $exit (i32.const 3)) (i64.const 0)`, ""),
	"init_trap": hostileModule("", `(i64.const 0)`, `(func (export "_initialize") unreachable)`),
	"read_in_init": hostileModule(`(import "projhost" "read" (func $read (param i32 i32 i32 i32 i32 i32) (result i32)))`,
		`(i64.const 0)`, `(func (export "_initialize") (drop (call $read (i32.const 0) (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 0) (i32.const 0))))`),
	"start_loop": hostileModule("", `(i64.const 0)`, `(func $spin (loop $l (br $l))) (start $spin)`),
	"alloc_zero": `(module (memory (export "memory") 1) (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "projhost_handle") (param i32 i32) (result i64) (i64.const 0)))`,
	"alloc_oob": `(module (memory (export "memory") 1) (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 65530))
  (func (export "projhost_handle") (param i32 i32) (result i64) (i64.const 0)))`,

	// Rejected by Load.
	"missing_handle": `(module (memory (export "memory") 1) (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 0)))`,
	"abi_v2": `(module (memory (export "memory") 1) (func (export "projhost_abi_v2"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "projhost_handle") (param i32 i32) (result i64) (i64.const 0)))`,
	"no_marker": `(module (memory (export "memory") 1)
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "projhost_handle") (param i32 i32) (result i64) (i64.const 0)))`,
	"unknown_import": hostileModule(`(import "foo" "bar" (func))`, `(i64.const 0)`, ""),
	"unknown_wasi":   hostileModule(`(import "wasi_snapshot_preview1" "no_such_call" (func))`, `(i64.const 0)`, ""),
	"unknown_env":    hostileModule(`(import "env" "seed" (func (result f64)))`, `(i64.const 0)`, ""),
	"bad_import_sig": hostileModule(`(import "projhost" "log" (func (param i32)))`, `(i64.const 0)`, ""),
	"imported_memory": `(module (import "env" "memory" (memory 1)) (export "memory" (memory 0)) (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "projhost_handle") (param i32 i32) (result i64) (i64.const 0)))`,
	"wrong_handle_sig": `(module (memory (export "memory") 1) (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "projhost_handle") (param i32 i32) (result i32) (i32.const 0)))`,
	"no_memory": `(module (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "projhost_handle") (param i32 i32) (result i64) (i64.const 0)))`,
	"big_memory": `(module (memory (export "memory") 300) (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "projhost_handle") (param i32 i32) (result i64) (i64.const 0)))`,
	"has_start": hostileModule("", `(i64.const 0)`, `(func (export "_start"))`),
}

// goodBatch runs one batch of the good module on rt and checks its output, proving the runtime
// still works after a hostile module misbehaved.
func goodBatch(t *testing.T, rt *Runtime) {
	t.Helper()
	m, err := rt.Load(context.Background(), "good", wat(t, "good"))
	if err != nil {
		t.Fatalf("loading the good module after a hostile one: %v", err)
	}
	defer m.Close(context.Background())
	h := m.NewHandler("s1")
	defer h.Close(context.Background())
	muts, err := h.Handle(context.Background(), evs("s1", 1, "A", `{"a":1}`), NewMemReadModel())
	if err != nil {
		t.Fatalf("good batch after a hostile one: %v", err)
	}
	if len(muts) != 1 || muts[0].Collection != "events" || muts[0].Key != "A" || string(muts[0].Doc) != `{"a":1}` {
		t.Fatalf("good batch after a hostile one: got %+v", muts)
	}
}

func TestHostileLoad(t *testing.T) {
	rt, _ := newTestRuntime(t)
	cases := []struct {
		name string
		wasm func(t *testing.T) []byte
		want []string // substrings of the error message
	}{
		{"garbage bytes", func(*testing.T) []byte { return []byte("hello, this is not wasm") }, []string{"not a WebAssembly module"}},
		{"empty", func(*testing.T) []byte { return nil }, []string{"not a WebAssembly module"}},
		{"binary version 2", func(*testing.T) []byte { return []byte("\x00asm\x02\x00\x00\x00") }, []string{"binary format version 2 not supported"}},
		{"truncated", func(*testing.T) []byte { return []byte("\x00asm\x01\x00\x00\x00\x01\x05") }, []string{"does not compile"}},
		// A code section claiming 2^31 bodies in 15 bytes: wazero would allocate ~200 GB for
		// them, and the process die of "fatal error: runtime: out of memory".
		{"counts past the end", func(*testing.T) []byte { return []byte("\x00asm\x01\x00\x00\x00\n\x05\xe0\xe0\xe0\xe0\n") },
			[]string{"does not compile", "entries declared"}},
		{"missing export", func(t *testing.T) []byte { return wat(t, "missing_handle") }, []string{"missing export projhost_handle (i32,i32) -> (i64)"}},
		{"wrong ABI version", func(t *testing.T) []byte { return wat(t, "abi_v2") }, []string{"ABI version 2 not supported (host speaks v1)"}},
		{"no ABI marker", func(t *testing.T) []byte { return wat(t, "no_marker") }, []string{"missing export projhost_abi_v1"}},
		{"unknown import", func(t *testing.T) []byte { return wat(t, "unknown_import") }, []string{"unknown import foo.bar"}},
		{"unknown WASI import", func(t *testing.T) []byte { return wat(t, "unknown_wasi") }, []string{"unknown import wasi_snapshot_preview1.no_such_call"}},
		{"unknown env import", func(t *testing.T) []byte { return wat(t, "unknown_env") }, []string{"unknown import env.seed"}},
		{"import signature", func(t *testing.T) []byte { return wat(t, "bad_import_sig") }, []string{"import projhost.log has signature (i32) -> (), the host provides (i32,i32,i32) -> ()"}},
		{"imported memory", func(t *testing.T) []byte { return wat(t, "imported_memory") }, []string{"unknown import env.memory"}},
		{"export signature", func(t *testing.T) []byte { return wat(t, "wrong_handle_sig") }, []string{"export projhost_handle has signature (i32,i32) -> (i32), want (i32,i32) -> (i64)"}},
		{"no memory", func(t *testing.T) []byte { return wat(t, "no_memory") }, []string{"missing export memory"}},
		{"min memory above cap", func(t *testing.T) []byte { return wat(t, "big_memory") }, []string{"memory exceeds the host's cap", "min 300 pages", "limit of 256 pages"}},
		{"table above the cap", func(t *testing.T) []byte { return wat(t, "hugetable") }, []string{"a table of 2000000 entries (at most 1048576)"}},
		{"command module", func(t *testing.T) []byte { return wat(t, "has_start") }, []string{"exports _start", "-buildmode=c-shared"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := rt.Load(context.Background(), "bad", c.wasm(t))
			if !errors.Is(err, ErrInvalidModule) {
				t.Fatalf("err = %v, want ErrInvalidModule", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), `"bad"`) {
				t.Errorf("error %q does not name the module", err)
			}
			goodBatch(t, rt)
		})
	}
}

func TestHostileRun(t *testing.T) {
	rt, logs := newTestRuntime(t)
	cases := []struct {
		name     string
		module   string
		kind     error
		want     []string
		poisoned bool
	}{
		{"infinite loop", "loop", ErrDeadline, []string{"projhost_handle did not return within the 300ms batch deadline"}, true},
		{"loop in start section", "start_loop", ErrDeadline, []string{"instantiating (start section) did not return within the 300ms"}, true},
		{"memory bomb", "membomb", ErrTrap, []string{"unreachable", "guest memory is at 241 of at most 256 pages (16MiB)"}, true},
		{"output pointer out of bounds", "oob_output", ErrBadOutput, []string{"output range 2147418112..2147418212 is outside guest memory (65536 bytes)"}, true},
		{"output straddles the end", "straddle_output", ErrBadOutput, []string{"output range 65530..65630 is outside guest memory"}, true},
		{"garbage output", "garbage_output", ErrBadOutput, []string{"output ABI version", "nothing was applied"}, true},
		{"document not an object", "array_doc", ErrBadOutput, []string{"mutation 0 (c/k)", "bad document: not a JSON object"}, true},
		{"AssemblyScript abort", "abort", ErrTrap, []string{"abort: boom at x.ts:3:5"}, true},
		{"domain failure", "fail", ErrHandlerFailed, []string{"bad event", "instance kept"}, false},
		{"log range out of bounds", "oob_log", ErrTrap, []string{"projhost.log: message range 4294967040..4294967140 is outside guest memory"}, true},
		{"read buffer out of bounds", "oob_read_buf", ErrTrap, []string{"projhost.read: buffer range 65530.."}, true},
		{"field name out of bounds", "oob_field", ErrTrap, []string{"projhost.field: name range 65530..65540 is outside guest memory"}, true},
		{"field in _initialize", "field_in_init", ErrTrap, []string{"projhost.field called outside projhost_handle"}, true},
		{"stack overflow", "stack_overflow", ErrTrap, []string{"stack overflow"}, true},
		{"exponential recursion", "fork", ErrDeadline, []string{"projhost_handle did not return within the 300ms batch deadline"}, true},
		{"proc_exit", "proc_exit", ErrExit, []string{"proc_exit(3)"}, true},
		{"trap in _initialize", "init_trap", ErrTrap, []string{"_initialize: wasm error: unreachable"}, true},
		{"read in _initialize", "read_in_init", ErrTrap, []string{"projhost.read called outside projhost_handle"}, true},
		{"alloc returns 0", "alloc_zero", ErrTrap, []string{"projhost_alloc(", "returned 0 (out of memory"}, true},
		{"alloc out of bounds", "alloc_oob", ErrBadOutput, []string{"returned 65530, a buffer outside guest memory"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			deadline := 10 * time.Second // generous: the machine is shared, and the first memory growth is slow
			if c.kind == ErrDeadline {
				deadline = 300 * time.Millisecond
			}
			m := load(t, rt, c.module, wat(t, c.module), WithBatchDeadline(deadline))
			h := m.NewHandler("s1")
			defer h.Close(context.Background())
			rm := NewMemReadModel()
			rm.Apply([]event.Mutation{{Collection: "c", Key: "c", Doc: []byte(`{"x":1}`)}})
			batch := evs("s1", 7, "A", `{"a":1}`, "B", `{"b":2}`)
			for attempt := 1; attempt <= 2; attempt++ {
				start := time.Now()
				muts, err := h.Handle(context.Background(), batch, rm)
				if muts != nil {
					t.Errorf("attempt %d: mutations %v returned with an error", attempt, muts)
				}
				if !errors.Is(err, c.kind) {
					t.Fatalf("attempt %d: err = %v, want %v", attempt, err, c.kind)
				}
				var he *HandlerError
				if !errors.As(err, &he) {
					t.Fatalf("attempt %d: err %T is not a *HandlerError", attempt, err)
				}
				if he.Shard != "s1" || he.FirstSeq != "7" || he.LastSeq != "8" || he.Module != c.module || he.Poisoned != c.poisoned {
					t.Errorf("attempt %d: details %+v", attempt, he)
				}
				for _, w := range c.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("attempt %d: error %q does not contain %q", attempt, err, w)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("attempt %d: error is not one line: %q", attempt, err)
				}
				if c.kind == ErrDeadline && time.Since(start) > 5*time.Second { // not a timing assertion: a hang guard
					t.Errorf("attempt %d: deadline of 300ms took %v to fire", attempt, time.Since(start))
				}
			}
			// Poisoned instances are replaced: two failing batches, two instances.
			wantInstances := 1
			switch {
			case c.module == "start_loop":
				wantInstances = 0 // instantiation never completes
			case c.poisoned:
				wantInstances = 2
			}
			if got := h.Instances(); got != wantInstances {
				t.Errorf("instances = %d, want %d", got, wantInstances)
			}
			goodBatch(t, rt)
		})
	}
	if len(logs.find("guest trapped")) == 0 {
		t.Error("no 'guest trapped' warning with the full stack trace was logged")
	}
}

// TestGoGuestPanic: a Go reactor (-buildmode=c-shared) that panics prints the panic to stderr
// and aborts (runtime.abort: unreachable; Go treats a panic in a library as a crash, unlike a
// command, which exits with code 2); the error is ErrTrap carrying the panic message; the next
// batch runs on a fresh instance and succeeds; stdout becomes info log lines.
func TestGoGuestPanic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and compiles a Go guest")
	}
	for _, toolchain := range []string{"go", "tinygo"} {
		t.Run(toolchain, func(t *testing.T) { testGoGuestPanic(t, toolchain) })
	}
}

func testGoGuestPanic(t *testing.T, toolchain string) {
	rt, logs := newTestRuntime(t)
	m := load(t, rt, "gopanic", buildGoGuest(t, toolchain))
	h := m.NewHandler("s1")
	defer h.Close(context.Background())
	ctx := context.Background()
	rm := NewMemReadModel()

	muts, err := h.Handle(ctx, evs("s1", 1, "A", `{"a":1}`, "B", `{"print":true}`), rm)
	if err != nil {
		t.Fatal(err)
	}
	if len(muts) != 2 || muts[0].Key != "A" || string(muts[1].Doc) != `{"print":true}` {
		t.Fatalf("muts = %+v", muts)
	}
	out := logs.find("hello from seq 2")
	if len(out) != 1 || out[0].Attrs["source"] != "stdout" || out[0].Attrs["shard"] != "s1" || out[0].Attrs["module"] != "gopanic" {
		t.Errorf("stdout log records = %+v", out)
	}

	_, err = h.Handle(ctx, evs("s1", 3, "A", `{"a":2}`, "C", `{"panic":true}`), rm)
	var he *HandlerError
	if !errors.Is(err, ErrTrap) || !errors.As(err, &he) {
		t.Fatalf("err = %v, want ErrTrap", err)
	}
	if !he.Poisoned || he.FirstSeq != "3" || he.LastSeq != "4" {
		t.Errorf("details = %+v", he)
	}
	// The standard toolchain prints the panic and its goroutine's trace to stderr, TinyGo prints
	// the panic's line to stdout.
	wantMsg, wantSource := "the Go guest panicked: panic: boom at seq 4 | goroutine 1 [running]: | main.handle(", "stderr"
	if toolchain == "tinygo" {
		wantMsg, wantSource = "the Go guest panicked: panic: boom at seq 4; the instance was discarded", "stdout"
	}
	if !strings.Contains(err.Error(), wantMsg) {
		t.Errorf("error lacks the panic message %q: %v", wantMsg, err)
	}
	if recs := logs.find("panic: boom at seq 4"); len(recs) != 1 || recs[0].Attrs["source"] != wantSource {
		t.Errorf("log records of the panic = %+v, want one from %s", recs, wantSource)
	}

	muts, err = h.Handle(ctx, evs("s1", 5, "D", `{"d":1}`), rm)
	if err != nil {
		t.Fatalf("batch after the panic: %v", err)
	}
	if len(muts) != 1 || muts[0].Key != "D" {
		t.Fatalf("muts = %+v", muts)
	}
	if h.Instances() != 2 {
		t.Errorf("instances = %d, want 2", h.Instances())
	}
	goodBatch(t, rt)
}

// TestCallerCancel: canceling the caller's context interrupts a runaway guest, trusted or not;
// the error is the context's (infrastructure), not a HandlerError, and the instance is replaced.
func TestCallerCancel(t *testing.T) {
	rt, _ := newTestRuntime(t)
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			m := load(t, rt, "loop", wat(t, "loop"), WithBatchDeadline(time.Minute), WithTrusted(trusted))
			h := m.NewHandler("s1")
			defer h.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err := h.Handle(ctx, evs("s1", 1, "A", `{}`), NewMemReadModel())
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want context.DeadlineExceeded", err)
			}
			var he *HandlerError
			if errors.As(err, &he) {
				t.Fatalf("caller cancellation reported as a handler error: %v", err)
			}
			goodBatch(t, rt)
		})
	}
}

// TestTableCapped: a table declared without a maximum grows to wasmbounds.MaxTableEntries and
// no further, trusted or not (a table is host memory outside the memory limit: unbounded, one
// table.grow could ask for 32 GiB).
func TestTableCapped(t *testing.T) {
	rt, _ := newTestRuntime(t)
	for _, trusted := range []bool{false, true} {
		h := load(t, rt, "tablebomb", wat(t, "tablebomb"), WithTrusted(trusted)).NewHandler("s1")
		if _, err := h.Handle(context.Background(), evs("s1", 1, "k", `{}`), NewMemReadModel()); err != nil {
			t.Fatalf("trusted %v: %v (a trap: the table grew past the cap)", trusted, err)
		}
		h.Close(context.Background())
	}
}

// TestGoGuestHostile: the hostile behaviours of testdata/gopanic, built with each Go toolchain,
// each fail their batch with the right error and the message a user can act on; the next batch
// runs on a fresh instance and succeeds.
func TestGoGuestHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and compiles Go guests")
	}
	for _, toolchain := range []string{"go", "tinygo"} {
		t.Run(toolchain, func(t *testing.T) {
			rt, _ := newTestRuntime(t)
			m := load(t, rt, "gohostile", buildGoGuest(t, toolchain), WithBatchDeadline(time.Second))
			h := m.NewHandler("s1")
			defer h.Close(context.Background())
			ctx := context.Background()
			rm := NewMemReadModel()
			for _, c := range []struct {
				data    string
				wantErr error
				wantMsg string
			}{
				{`{"index":7}`, ErrTrap, "the Go guest panicked: panic: runtime error: index out of range"},
				{`{"loop":true}`, ErrDeadline, "did not return within the 1s batch deadline"},
				{`{"grow":true}`, ErrTrap, "of at most 256 pages (16MiB): fix the handler's memory use or raise the memory limit"},
				{`{"panic":true}`, ErrTrap, "the Go guest panicked: panic: boom at seq 2"},
			} {
				_, err := h.Handle(ctx, evs("s1", 1, "A", `{"index":1}`, "B", c.data), rm)
				var he *HandlerError
				if !errors.Is(err, c.wantErr) || !errors.As(err, &he) || !he.Poisoned || he.FirstSeq != "1" || he.LastSeq != "2" {
					t.Errorf("%s: err = %v (%+v), want %v for events 1..2", c.data, err, he, c.wantErr)
				} else if !strings.Contains(err.Error(), c.wantMsg) {
					t.Errorf("%s: error %q lacks %q", c.data, err, c.wantMsg)
				}
				muts, err := h.Handle(ctx, evs("s1", 3, "C", `{"index":2}`), rm)
				if err != nil || len(muts) != 1 || muts[0].Key != "C" {
					t.Fatalf("%s: the batch after it: %v, %+v", c.data, err, muts)
				}
			}
		})
	}
}
