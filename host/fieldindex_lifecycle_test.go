package host

import (
	"context"
	"errors"
	"fmt"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/testwasm"
	"strings"
	"testing"
	"time"
)

// flagsModule reports, as its output c/k = {"f":F,"n":N}, the batch's flags word and (for shard
// "s1") the u16 after the shard id (the indexed field count when flag bit 0 is set, else the
// first event's seq length), after registering the field "a". By the batch's event count it then
// misbehaves: 2 traps, 3 loops past the deadline, 4 fails (instance kept), 5 registers 70 names
// (the results of the 64th and 65th at 700 and 704 go nowhere), 6 returns a bad output.
const flagsModule = `(module
  (import "projhost" "field" (func $field (param i32 i32) (result i32)))
  (import "projhost" "fail" (func $fail (param i32 i32)))
  (memory (export "memory") 1)
  (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "projhost_handle") (param $p i32) (param $len i32) (result i64) (local $n i32) (local $i i32)
    (i32.store8 (i32.const 536) (i32.add (i32.const 48) (i32.load8_u (i32.add (local.get $p) (i32.const 4)))))
    (i32.store8 (i32.const 543) (i32.add (i32.const 48) (i32.load16_u (i32.add (local.get $p) (i32.const 16)))))
    (drop (call $field (i32.const 300) (i32.const 1)))
    (local.set $n (i32.load (i32.add (local.get $p) (i32.const 8))))
    (if (i32.eq (local.get $n) (i32.const 2)) (then unreachable))
    (if (i32.eq (local.get $n) (i32.const 3)) (then (loop $l (br $l))))
    (if (i32.eq (local.get $n) (i32.const 4)) (then (call $fail (i32.const 300) (i32.const 1)) (return (i64.const 0))))
    (if (i32.eq (local.get $n) (i32.const 5)) (then
      (loop $l
        (i32.store8 (i32.const 401) (i32.add (i32.const 48) (local.get $i)))
        (i32.store (i32.const 600) (call $field (i32.const 400) (i32.const 2)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $l (i32.lt_u (local.get $i) (i32.const 70))))))
    (if (i32.eq (local.get $n) (i32.const 6)) (then (return (i64.const 0x0000020000000009))))
    (i64.const 0x0000020000000022))
  (data (i32.const 300) "a")
  (data (i32.const 400) "m0")
  (data (i32.const 512) "\01\00\00\00\01\00\00\00\01\01\00c\01\00k\0f\00\00\00{\22f\22:0,\22n\22:\220\22}"))`

// fieldStart calls field from the start section; fieldAlloc from projhost_alloc.
var fieldStart = hostileModule(`(import "projhost" "field" (func $field (param i32 i32) (result i32)))`,
	`(i64.const 0)`, `(func $s (drop (call $field (i32.const 0) (i32.const 1)))) (start $s)`)
var fieldAlloc = `(module (import "projhost" "field" (func $field (param i32 i32) (result i32)))
  (memory (export "memory") 1) (func (export "projhost_abi_v1"))
  (func (export "projhost_alloc") (param i32) (result i32) (drop (call $field (i32.const 0) (i32.const 1))) (i32.const 1024))
  (func (export "projhost_handle") (param i32 i32) (result i64) (i64.const 0)))`

// fieldOdd calls field with odd arguments and puts c/k = {"r":R}, R a letter per call: its
// result + 66 (A: -1, B: slot 0, ...).
var fieldOdd = hostileModule(`(import "projhost" "field" (func $field (param i32 i32) (result i32)))`, `
    (i32.store8 (i32.const 537) (i32.add (i32.const 66) (call $field (i32.const 0xfffffff0) (i32.const 0))))
    (i32.store8 (i32.const 538) (i32.add (i32.const 66) (call $field (i32.const 0xfffffff0) (i32.const 0xffffffff))))
    (i32.store8 (i32.const 539) (i32.add (i32.const 66) (call $field (i32.const 0xfffffff0) (i32.const 256))))
    (i32.store8 (i32.const 540) (i32.add (i32.const 66) (call $field (i32.const 300) (i32.const 2))))
    (i32.store8 (i32.const 541) (i32.add (i32.const 66) (call $field (i32.const 2000) (i32.const 255))))
    (i32.store8 (i32.const 542) (i32.add (i32.const 66) (call $field (i32.const 2000) (i32.const 255))))
    (i32.store8 (i32.const 543) (i32.add (i32.const 66) (call $field (i32.const 65535) (i32.const 1))))
    (i64.const 0x0000020000000022)`,
	`(data (i32.const 300) "\ff\fe") (data (i32.const 512) "\01\00\00\00\01\00\00\00\01\01\00c\01\00k\0f\00\00\00{\22r\22:\22.......\22}")`)

func init() {
	hostileWAT["fi_flags"] = flagsModule
	hostileWAT["fi_field_start"] = fieldStart
	hostileWAT["fi_field_alloc"] = fieldAlloc
	hostileWAT["fi_field_odd"] = fieldOdd
}

func TestFieldIndexLifecycle(t *testing.T) {
	rt, _ := newTestRuntime(t)
	m := load(t, rt, "fi_flags", wat(t, "fi_flags"), WithBatchDeadline(300*time.Millisecond))
	h := m.NewHandler("s1")
	defer h.Close(context.Background())
	rm := NewMemReadModel()
	run := func(n int) (string, error) {
		kv := []string{}
		for i := 0; i < n; i++ {
			kv = append(kv, "A", `{"a":1}`)
		}
		muts, err := h.Handle(context.Background(), evs("s1", 7, kv...), rm)
		if err != nil {
			return "", err
		}
		if len(muts) != 1 {
			return "", errors.New("no output")
		}
		return string(muts[0].Doc), nil
	}
	steps := []struct {
		n    int
		want string
		err  error
	}{
		{1, `{"f":0,"n":"1"}`, nil}, // seq "7": length 1
		{1, `{"f":1,"n":"1"}`, nil},
		{2, "", ErrTrap},
		{1, `{"f":0,"n":"1"}`, nil}, // new instance: no index
		{1, `{"f":1,"n":"1"}`, nil},
		{3, "", ErrDeadline},
		{1, `{"f":0,"n":"1"}`, nil},
		{4, "", ErrHandlerFailed},
		{1, `{"f":1,"n":"1"}`, nil}, // kept
		{5, `{"f":1,"n":"1"}`, nil},
		{1, `{"f":1,"n":"p"}`, nil},
		{6, "", ErrBadOutput},
		{1, `{"f":0,"n":"1"}`, nil},
	}
	for i, s := range steps {
		got, err := run(s.n)
		if s.err != nil {
			if !errors.Is(err, s.err) {
				t.Fatalf("step %d: err %v, want %v", i, err, s.err)
			}
			continue
		}
		if err != nil || got != s.want {
			t.Fatalf("step %d: %s %v, want %s", i, got, err, s.want)
		}
	}
}

func TestFieldImportOddCalls(t *testing.T) {
	rt, _ := newTestRuntime(t)
	for _, c := range []struct{ mod, want string }{
		{"fi_field_start", "called outside projhost_handle"},
		{"fi_field_alloc", "called outside projhost_handle"},
	} {
		m := load(t, rt, c.mod, wat(t, c.mod))
		h := m.NewHandler("s1")
		_, err := h.Handle(context.Background(), evs("s1", 1, "A", `{"a":1}`), NewMemReadModel())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.mod, err, c.want)
		}
		h.Close(context.Background())
	}
	m := load(t, rt, "fi_field_odd", wat(t, "fi_field_odd"))
	h := m.NewHandler("s1")
	defer h.Close(context.Background())
	muts, err := h.Handle(context.Background(), evs("s1", 1, "A", `{"a":1}`), NewMemReadModel())
	if err != nil {
		t.Fatal(err)
	}
	// Refused: an empty name (whatever its pointer), lengths past 255 (not even bounds-checked),
	// invalid UTF-8; 255 NUL bytes twice (slot 0 both times); one NUL byte at the end of memory.
	if got, want := string(muts[0].Doc), `{"r":"AAAABBC"}`; got != want {
		t.Errorf("field results %s, want %s", got, want)
	}
}

// indexVsScanDatas are crafted event datas for the index-vs-scan comparison.
func indexVsScanDatas() []string {
	base := `"distance":10,"origin":"A","destination":"B"`
	many := func(n int, extra string) string {
		s := "{"
		for i := 0; i < n; i++ {
			s += fmt.Sprintf(`"k%02d":%d,`, i, i)
		}
		return s + extra + "}"
	}
	return []string{
		`{"delay":5,` + base + `}`,
		`{"\u0064elay":5,` + base + `}`,
		`{"del\u0061y":5,"distance":10,"\u006frigin":"A","destination":"B"}`,
		`{"delay":5,"distance":10,"origin":"\ud800","destination":"B"}`,
		`{"delay":5,"distance":10,"origin":"\ud800\u0041","destination":"B"}`,
		`{"delay":5,"distance":10,"origin":"\ud83d\ude00","destination":"B"}`,
		`{"delay":5,"distance":10,"origin":"A\"B","destination":"B\\"}`,
		`{"delay":5,"distance":10,"origin":"é","destination":"\u00e9"}`,
		`{"delay":-0,` + base + `}`,
		`{"delay":0,` + base + `}`,
		`{"delay":1e5,` + base + `}`,
		`{"delay":1.0,` + base + `}`,
		`{"delay":-1,` + base + `}`,
		`{"delay":9223372036854775807,` + base + `}`,
		`{"delay":9223372036854775808,` + base + `}`,
		`{"delay":-9223372036854775808,` + base + `}`,
		`{"delay":12345678901234567890123456789012345678,` + base + `}`,
		`{"delay":123456789012345678901234567890123456789,` + base + `}`,
		`{"delay":100000000000000000000000000000000000000,` + base + `}`,
		`{"delay":"5",` + base + `}`,
		`{"delay":null,` + base + `}`,
		`{"delay":true,` + base + `}`,
		`{"delay":{"delay":1},` + base + `}`,
		`{"x":{"delay":1},"delay":2,` + base + `}`,
		`{"delay":[1],` + base + `}`,
		` { "delay" : 5 , "distance" : 10 , "origin" : "A" , "destination" : "B" } `,
		"{\n\t\"delay\":5,\r\n" + base + "}\n",
		`{"delay":5,"delay":6,` + base + `}`,
		`{"delay":5,"\u0064elay":6,` + base + `}`,
		`{"delay":5,` + base + `,"x":{"a":1,"a":2}}`,
		`{"delay":5,` + base + `,"x":"` + "\xff" + `"}`,
		`{"delay":5,` + base + `,"` + "\xff" + `":1}`,
		`{"delay":5,` + base + `,"":1}`,
		`[{"delay":5,` + base + `}]`,
		`"delay"`,
		``,
		` `,
		`{}`,
		`{"delay":5,` + base + `}x`,
		`{"delay":5,` + base + `,}`,
		`{"delay":5,` + base + `,"long":"` + strings.Repeat("x", 300000) + `"}`,
		`{"origin":"` + strings.Repeat("Y", 1000) + `","delay":5,"distance":10,"destination":"B"}`,
		many(12, `"delay":5,`+base),
		many(13, `"delay":5,`+base),
		many(40, `"delay":5,`+base),
		`{"delay":5,` + base + `,"deep":` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `}`,
		`{"delay":5,` + base + `,"deep":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}`,
		`{"delay":5,` + base + `,"n":1e126}`,
		`{"delay":5,` + base + `,"n":1e-131}`,
		`{"delay":5,` + base + `,"` + strings.Repeat("k", 65536) + `":1}`,
		`{"delay":5,"distance":10,"origin":"A","destination":"B","\u0000":1}`,
		`{"delay":5,"distance":10,"origin":"A\u0000","destination":"B"}`,
		`{"delay":5,"distance":10,"origin":"` + "\x7f" + `","destination":"B"}`,
		`{"delay":5,"distance":10,"origin":"A","destination":"B","s":"\/"}`,
		`{"delay":05,` + base + `}`,
		`{"\u00e9":"x","\u0022q":"y","esc":"a\u0000b","s":"\ud800"}`,
		`{"é":"x","\"q":"y","esc":"\ud800\udc00","s":"\udc00\ud800"}`,
		`{"\u00e9":1,"é":2}`,
		`{"flt":-0.0,"neg":-0,"t":true,"f":false,"nul":null,"obj":{},"arr":[],"dyn":"delay","delay":7}`,
		`{"dyn":"é","é":"1","s":"` + "\x7f\x01" + `"}`,
		`{"dyn":"\u00e9","\u00e9":"2","flt":1E400,"neg":-1e-400}`,
		`{"flt":1e38,"neg":-123456789012345678901234567890123456789e-10,"s":"\/\b\f\n\r\t"}`,
		`{"esc":"` + strings.Repeat("\\u00e9", 5000) + `"}`,
		`{"esc":"` + strings.Repeat("\\ud800", 4000) + `","s":"` + strings.Repeat("é", 10000) + `"}`,
		`{"obj":{"s":1},"s":2,"arr":[{"s":3}]}`,
		`{"t":tru}`,
		`{"t":true,"f":fals}`,
	}
}

// TestFieldIndexSameAnswersAsScan: every crafted data handled by a fresh handler (its first batch carries no
// index) and by a warmed one (which registered its names) gives the same mutations and errors.
func TestFieldIndexSameAnswersAsScan(t *testing.T) {
	rt, _ := newTestRuntime(t)
	mods := append([]string{testwasm.FlightDelaysGo, testwasm.FlightDelaysAS, "as-indexprobe", testwasm.FlightDelaysGoLenient}, testwasm.TinyGoModules(t, testwasm.FlightDelaysTinyGo)...)
	warmData := `{"delay":5,"distance":10,"origin":"W","destination":"B"}`
	for _, name := range mods {
		m := load(t, rt, name, fixture(t, name), WithBatchDeadline(time.Minute))
		warm := m.NewHandler("s1")
		if _, err := warm.Handle(context.Background(), evs("s1", 1, "p", warmData), NewMemReadModel()); err != nil {
			t.Fatalf("%s warm-up: %v", name, err)
		}
		if len(warm.fields) < 4 {
			t.Fatalf("%s registered %q, want its names", name, warm.fields)
		}
		for i, d := range indexVsScanDatas() {
			e := evs("s1", 100+i, "p", d)
			fresh := m.NewHandler("s1")
			m1, err1 := fresh.Handle(context.Background(), e, NewMemReadModel())
			fresh.Close(context.Background())
			m2, err2 := warm.Handle(context.Background(), e, NewMemReadModel())
			s1, s2 := fmt.Sprint(mutsText(m1), err1), fmt.Sprint(mutsText(m2), err2)
			idx := event.IndexFields([]byte(d), warm.fields, make([]event.FieldSpan, len(warm.fields)))
			if s1 != s2 {
				t.Errorf("%s data %d (%.80q, indexed %v):\n scan  %.600s\n index %.600s", name, i, d, idx, s1, s2)
			}
			if errors.Is(err2, ErrTrap) || warm.instances > 1 {
				t.Fatalf("%s: the warmed handler lost its instance: %v", name, err2)
			}
		}
	}
}

func mutsText(ms []event.Mutation) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%s/%s=%s;", m.Collection, m.Key, m.Doc)
	}
	return b.String()
}
