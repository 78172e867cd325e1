package host

import (
	"context"
	"strings"
	"testing"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/wasmabi"
)

// readKnownCalls calls read_known five times and puts c/k = {"r":"RRRRR","d":{"a":0}}, R a
// letter per call (its result + 66: @ unchanged, A no document, I seven bytes) and the
// object after "d" the buffer of the fourth call: with c/k = {"a":1} stored,
//  1. known {"a":1}: unchanged, nothing copied;
//  2. key m: no document;
//  3. known {"a":2}, buffer of 3 bytes: 7, nothing copied;
//  4. known {"a":2}, buffer at "d": 7, the document copied there;
//  5. an empty known: 7.
var readKnownCalls = hostileModule(`(import "projhost" "read_known" (func $rk (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))`, `
    (i32.store8 (i32.const 537) (i32.add (i32.const 66) (call $rk (i32.const 300) (i32.const 1) (i32.const 301) (i32.const 1) (i32.const 310) (i32.const 7) (i32.const 548) (i32.const 100))))
    (i32.store8 (i32.const 538) (i32.add (i32.const 66) (call $rk (i32.const 300) (i32.const 1) (i32.const 302) (i32.const 1) (i32.const 310) (i32.const 7) (i32.const 548) (i32.const 100))))
    (i32.store8 (i32.const 539) (i32.add (i32.const 66) (call $rk (i32.const 300) (i32.const 1) (i32.const 301) (i32.const 1) (i32.const 320) (i32.const 7) (i32.const 548) (i32.const 3))))
    (i32.store8 (i32.const 540) (i32.add (i32.const 66) (call $rk (i32.const 300) (i32.const 1) (i32.const 301) (i32.const 1) (i32.const 320) (i32.const 7) (i32.const 548) (i32.const 7))))
    (i32.store8 (i32.const 541) (i32.add (i32.const 66) (call $rk (i32.const 300) (i32.const 1) (i32.const 301) (i32.const 1) (i32.const 320) (i32.const 0) (i32.const 600) (i32.const 100))))
    (i64.const 0x000002000000002c)`,
	`(data (i32.const 300) "ckm") (data (i32.const 310) "{\22a\22:1}") (data (i32.const 320) "{\22a\22:2}")
  (data (i32.const 512) "\01\00\00\00\01\00\00\00\01\01\00c\01\00k\19\00\00\00{\22r\22:\22.....\22,\22d\22:{\22a\22:0}}")`)

// readKnownOOB passes a known document past the end of memory; readKnownStart calls read_known
// from the start section.
var readKnownOOB = hostileModule(`(import "projhost" "read_known" (func $rk (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))`,
	`(drop (call $rk (i32.const 300) (i32.const 1) (i32.const 301) (i32.const 1) (i32.const 65530) (i32.const 100) (i32.const 700) (i32.const 100))) (i64.const 0)`,
	`(data (i32.const 300) "ck")`)
var readKnownStart = hostileModule(`(import "projhost" "read_known" (func $rk (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))`,
	`(i64.const 0)`, `(func $s (drop (call $rk (i32.const 0) (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))) (start $s)`)

func init() {
	hostileWAT["rk_calls"] = readKnownCalls
	hostileWAT["rk_oob"] = readKnownOOB
	hostileWAT["rk_start"] = readKnownStart
}

func TestReadKnown(t *testing.T) {
	rt, _ := newTestRuntime(t)
	m := load(t, rt, "rk_calls", wat(t, "rk_calls"))
	h := m.NewHandler("s1")
	defer h.Close(context.Background())
	rm := NewMemReadModel()
	rm.Apply([]event.Mutation{{Collection: "c", Key: "k", Doc: []byte(`{"a":1}`)}})
	muts, err := h.Handle(context.Background(), evs("s1", 1, "A", `{"a":1}`), rm)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(muts[0].Doc), `{"r":"@AIII","d":{"a":1}}`; got != want {
		t.Errorf("read_known results %s, want %s", got, want)
	}
	if wasmabi.ReadUnchanged != '@'-66 {
		t.Errorf("ReadUnchanged = %d, the letters above assume -2", wasmabi.ReadUnchanged)
	}
}

func TestReadKnownBadCalls(t *testing.T) {
	rt, _ := newTestRuntime(t)
	for _, c := range []struct{ mod, want string }{
		{"rk_oob", "known document"},
		{"rk_start", "called outside projhost_handle"},
	} {
		m := load(t, rt, c.mod, wat(t, c.mod))
		h := m.NewHandler("s1")
		rm := NewMemReadModel()
		rm.Apply([]event.Mutation{{Collection: "c", Key: "k", Doc: []byte(`{"a":1}`)}})
		_, err := h.Handle(context.Background(), evs("s1", 1, "A", `{"a":1}`), rm)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.mod, err, c.want)
		}
		h.Close(context.Background())
	}
}
