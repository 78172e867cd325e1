package as_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/wasmabi"
)

// The library's side of the field index (ABI.md §2.1): testdata/indexprobe.ts (built as
// build/wasm/as-indexprobe.wasm) reads fixed fields of every event with every getter of
// Event.json(). indexHost runs it in wazero with its own projhost imports, whose field import
// registers names like the host's, and hands it batches encoded here by the spec, with an
// index (indexedBatch) or without.

// indexHost is one instance of a handler with the projhost imports the library uses.
type indexHost struct {
	mod      api.Module
	names    []string        // registered names; the slot is the index
	calls    map[string]int  // field calls per name
	refuse   map[string]bool // names the field import refuses (-1)
	inHandle bool
	outside  []string // names registered outside projhost_handle
	failMsg  string
}

func newIndexHost(tb testing.TB, module string, refuse ...string) *indexHost {
	tb.Helper()
	ctx := context.Background()
	bin, err := os.ReadFile(testwasm.Path(tb, module))
	if err != nil {
		tb.Fatal(err)
	}
	rt := wazero.NewRuntime(ctx)
	tb.Cleanup(func() { rt.Close(ctx) })
	h := &indexHost{calls: map[string]int{}, refuse: map[string]bool{}}
	for _, n := range refuse {
		h.refuse[n] = true
	}
	_, err = rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func(msg, file, line, col uint32) { panic("AssemblyScript abort") }).Export("abort").Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	read := func(m api.Module, ptr, n uint32) string {
		b, ok := m.Memory().Read(ptr, n)
		if !ok {
			panic("guest range out of bounds")
		}
		return string(b)
	}
	i32 := api.ValueTypeI32
	fn := func(f func(m api.Module, s []uint64)) api.GoModuleFunction {
		return api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) { f(m, s) })
	}
	types := func(n int) []api.ValueType { return slices.Repeat([]api.ValueType{i32}, n) }
	field := func(m api.Module, s []uint64) {
		name := read(m, uint32(s[0]), uint32(s[1]))
		h.calls[name]++
		if !h.inHandle {
			h.outside = append(h.outside, name)
		}
		s[0] = api.EncodeI32(-1)
		if h.refuse[name] || len(name) == 0 || len(name) > 255 || len(h.names) == wasmabi.MaxIndexedFields {
			return
		}
		for i, r := range h.names {
			if r == name {
				s[0] = api.EncodeI32(int32(i))
				return
			}
		}
		h.names = append(h.names, name)
		s[0] = api.EncodeI32(int32(len(h.names) - 1))
	}
	_, err = rt.NewHostModuleBuilder("projhost").
		NewFunctionBuilder().WithGoModuleFunction(fn(func(api.Module, []uint64) {}), types(3), nil).Export("log").
		NewFunctionBuilder().WithGoModuleFunction(fn(func(m api.Module, s []uint64) {
		h.failMsg = read(m, uint32(s[0]), uint32(s[1]))
	}), types(2), nil).Export("fail").
		NewFunctionBuilder().WithGoModuleFunction(fn(func(_ api.Module, s []uint64) { s[0] = api.EncodeI32(-1) }), types(6), types(1)).Export("read").
		NewFunctionBuilder().WithGoModuleFunction(fn(field), types(2), types(1)).Export("field").
		Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	h.mod, err = rt.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig())
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// handle runs one batch and returns the puts' documents by key, or the fail message.
func (h *indexHost) handle(tb testing.TB, batch []byte) (map[string]string, string) {
	tb.Helper()
	ctx := context.Background()
	res, err := h.mod.ExportedFunction("projhost_alloc").Call(ctx, uint64(len(batch)))
	if err != nil {
		tb.Fatal(err)
	}
	ptr := uint32(res[0])
	if !h.mod.Memory().Write(ptr, batch) {
		tb.Fatal("batch out of bounds")
	}
	h.failMsg = ""
	h.inHandle = true
	res, err = h.mod.ExportedFunction("projhost_handle").Call(ctx, uint64(ptr), uint64(len(batch)))
	h.inHandle = false
	if err != nil {
		tb.Fatalf("projhost_handle: %v", err)
	}
	if h.failMsg != "" {
		return nil, h.failMsg
	}
	out, ok := h.mod.Memory().Read(uint32(res[0]>>32), uint32(res[0]))
	if !ok {
		tb.Fatal("output out of bounds")
	}
	docs := map[string]string{}
	err = wasmabi.DecodeOutput(out, nil, func(m wasmabi.Mutation) error {
		docs[string(m.Key)] = string(m.Doc)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return docs, ""
}

// span is one index entry: the value's offset in the data and its length, bit 31 set for a
// string holding an escape (ABI.md §2); absent is offset 0xFFFFFFFF, length 0.
type span struct{ off, n uint32 }

var absent = span{0xFFFFFFFF, 0}

// spansOf returns the field index of data for names, as ABI.md §2.1 defines it, or false when
// the host would not index data (it breaks the document rule).
func spansOf(tb testing.TB, data []byte, names []string) ([]span, bool) {
	tb.Helper()
	if event.CheckDoc(data) != nil {
		return nil, false
	}
	at := map[string]span{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		tb.Fatalf("%q: a document that is no object", data)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			tb.Fatal(err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			tb.Fatal(err)
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		if !bytes.Equal(data[start:end], raw) {
			tb.Fatalf("%q: value %q not at %d..%d", data, raw, start, end)
		}
		n := uint32(len(raw))
		if raw[0] == '"' && bytes.IndexByte(raw, '\\') >= 0 {
			n |= 1 << 31
		}
		at[tok.(string)] = span{uint32(start), n}
	}
	out := make([]span, len(names))
	for i, name := range names {
		s, ok := at[name]
		if !ok {
			s = absent
		}
		out[i] = s
	}
	// The host's index of data (event.IndexFields) is this one.
	host := make([]event.FieldSpan, len(names))
	if !event.IndexFields(data, names, host) {
		tb.Fatalf("%q: event.IndexFields refuses a document", data)
	}
	for i, h := range host {
		want := span{uint32(h.Start), uint32(h.End - h.Start)}
		if h.Start < 0 {
			want = absent
		} else if h.Escaped {
			want.n |= 1 << 31
		}
		if want != out[i] {
			tb.Fatalf("%q, field %q: event.IndexFields %+v, want %+v", data, names[i], h, out[i])
		}
	}
	return out, true
}

// indexedBatch encodes events as a batch of shard "shard-1" with a field index of f fields
// (ABI.md §2, wasmabi.AppendIndexedBatch): index[i] is event i's entries (nil: not indexed). f =
// 0 encodes no index.
func indexedBatch(tb testing.TB, events []wasmabi.Event, f int, index [][]span) []byte {
	tb.Helper()
	evs := slices.Clone(events)
	for i := range evs {
		evs[i].Index = nil
		if f > 0 && index[i] != nil {
			for _, s := range index[i] {
				evs[i].Index = binary.LittleEndian.AppendUint32(evs[i].Index, s.off)
				evs[i].Index = binary.LittleEndian.AppendUint32(evs[i].Index, s.n)
			}
		}
	}
	b, err := wasmabi.AppendIndexedBatch(nil, "shard-1", evs, f)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// indexAll is the index the host would send for events: spansOf each event's data for the
// registered names, nil where the data breaks the document rule.
func indexAll(tb testing.TB, events []wasmabi.Event, names []string) [][]span {
	idx := make([][]span, len(events))
	for i, e := range events {
		if s, ok := spansOf(tb, e.Data, names); ok {
			idx[i] = s
		}
	}
	return idx
}

func indexEvents(key string, datas ...string) []wasmabi.Event {
	evs := make([]wasmabi.Event, len(datas))
	for i, d := range datas {
		evs[i] = wasmabi.Event{Seq: []byte(strconv.Itoa(i + 1)), PartitionKey: []byte(key), Data: []byte(d)}
	}
	return evs
}

// probeNames are the names testdata/indexprobe.ts reads, in its order.
var probeNames = []string{"delay", "distance", "origin", "destination", "s", "esc", "t", "f", "nul", "obj", "arr",
	"neg", "flt", "é", "\"q", "missing", ""}

// wantProbe is what indexprobe.ts answers for name in data by the Go SDK, without getFloat's
// bits (its last part; the probe's parseFloat is AssemblyScript's, compared between runs only).
func wantProbe(data []byte, name string) []string {
	var parts []string
	raw, ok := guest.JSONRaw(data, name)
	parts = append(parts, map[bool]string{true: "1", false: "-"}[ok])
	if i, ok := guest.JSONInt(data, name); ok {
		parts = append(parts, strconv.FormatInt(i, 10))
	} else {
		parts = append(parts, "--7")
	}
	if b, ok := guest.JSONBool(data, name); ok {
		parts = append(parts, strconv.FormatBool(b))
	} else {
		parts = append(parts, "-")
	}
	if s, ok := guest.JSONString(data, name); ok {
		parts = append(parts, "="+string(s), "="+string(s))
	} else {
		parts = append(parts, "-0", "-")
	}
	if ok && !utf8.Valid(raw) {
		parts = append(parts, "?") // AssemblyScript's getRaw is a string: U+FFFD for invalid bytes
	} else if ok {
		parts = append(parts, "="+string(raw))
	} else {
		parts = append(parts, "-")
	}
	return parts
}

// checkProbe checks the probe's answers r for data against the Go SDK.
func checkProbe(tb testing.TB, data []byte, r string) {
	tb.Helper()
	groups := strings.Split(r, "\x1d")
	for i, name := range probeNames {
		got := strings.Split(groups[i], "\x1e")
		want := wantProbe(data, name)
		if want[5] == "?" {
			want[5] = got[5]
		}
		if strings.Join(got[:len(want)], "|") != strings.Join(want, "|") {
			tb.Errorf("data %s, name %q: AS %q, Go SDK %q", data, name, got[:len(want)], want)
		}
	}
}

// answers decodes the probe's documents into their "r" strings, by sequence number.
func answers(tb testing.TB, docs map[string]string) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for k, d := range docs {
		var v struct{ R string }
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			tb.Fatalf("document %s: %v", d, err)
		}
		out[k] = v.R
	}
	return out
}

var indexDocs = []string{
	// plain strings, numbers
	`{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`,
	// white space everywhere, the fields in another order, numbers of every form
	` { "destination" : "SFO" , "origin":"JFK", "delay" : -5 ,"distance":0, "flt":1.5e3, "neg":-9223372036854775808 } `,
	// escaped strings and keys, non-ASCII
	`{"esc":"a\"b\\c\n\u00e9\ud83d\ude00\ud800x","s":"plain é","\"q":"quoted key","\u00e9":12,"origin":"\u0044TW"}`,
	// bools, null, nested values, integers that are not i64
	`{"t":true,"f":false,"nul":null,"obj":{"delay":1,"s":"}"},"arr":[1,"x",{"y":[]}],"delay":1.0,"distance":9223372036854775808}`,
	// absent fields and an empty object
	`{}`,
	`{"unrelated":1}`,
	// strings where numbers are read and the other way round
	`{"delay":"66","origin":66,"destination":"","s":"","esc":"\\"}`,
	// a duplicate key (the host does not index it): the first wins
	`{"delay":1,"delay":2,"origin":"A","origin":"B"}`,
	// not JSON, not an object, invalid UTF-8, an empty key (the document rule wants 1 byte or more)
	`{"delay":1,"origin":"x"`,
	`[1,2]`,
	"{\"s\":\"a\xffb\",\"delay\":3}",
	`{"":5,"delay":4}`,
	// a name built at run time (the value of "dyn": scanned) reads a member the index gives too
	`{"dyn":"esc","esc":"x\ty\u00e9","origin":"O"}`,
}

// TestFieldIndexSameAnswers: every getter of Event.json() answers the same with the host's
// field index as without it (first batch: the names are registered; then indexed and
// unindexed batches of the same events), and what the Go SDK answers.
func TestFieldIndexSameAnswers(t *testing.T) {
	h := newIndexHost(t, "as-indexprobe")
	evs := indexEvents("p", indexDocs...)
	first, msg := h.handle(t, indexedBatch(t, evs, 0, nil))
	if msg != "" {
		t.Fatal(msg)
	}
	// Every static name the probe read is registered once, in the order of its first lookup, during
	// projhost_handle; the empty name is never asked for (the host would refuse it).
	want := []string{"delay", "distance", "origin", "destination", "s", "esc", "t", "f", "nul", "obj", "arr", "neg",
		"flt", "é", "\"q", "missing", "dyn"}
	if strings.Join(h.names, ",") != strings.Join(want, ",") {
		t.Fatalf("registered %q, want %q", h.names, want)
	}
	if len(h.outside) > 0 {
		t.Errorf("registered outside projhost_handle: %q", h.outside)
	}
	base := answers(t, first)
	for _, e := range evs {
		checkProbe(t, e.Data, base[string(e.Seq)])
	}
	indexed := 0
	for _, b := range []struct {
		name  string
		batch []byte
	}{
		{"indexed", indexedBatch(t, evs, len(h.names), indexAll(t, evs, h.names))},
		{"unindexed", indexedBatch(t, evs, 0, nil)},
		{"indexed by the first 3 names", indexedBatch(t, evs, 3, indexAll(t, evs, h.names[:3]))},
	} {
		docs, msg := h.handle(t, b.batch)
		if msg != "" {
			t.Fatalf("%s: %s", b.name, msg)
		}
		for seq, r := range answers(t, docs) {
			if r != base[seq] {
				t.Errorf("%s, event %s (%s):\n got %q\nwant %q", b.name, seq, evs[mustAtoi(seq)-1].Data, r, base[seq])
			}
		}
	}
	for _, s := range indexAll(t, evs, h.names) {
		if s != nil {
			indexed++
		}
	}
	if indexed != 8 {
		t.Errorf("%d of the events indexed, want 8 (the others break the document rule: a duplicate key, not an object, invalid UTF-8, an empty key)", indexed)
	}
	for name, n := range h.calls {
		if n != 1 {
			t.Errorf("%q registered %d times, want once", name, n)
		}
	}
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// TestFieldIndexIsUsed proves the library reads the index rather than scanning: hand-built
// indexes that lie about the data (which the host never sends) change the answers, and only for
// the slots and events they lie about.
func TestFieldIndexIsUsed(t *testing.T) {
	data := `{"delay":66,"distance":1750,"origin":"DTW","destination":"LAS","esc":"a\nb","s":"x"}`
	off := func(v string) uint32 { return uint32(strings.Index(data, v)) }
	tests := []struct {
		name  string
		edit  func(idx []span, slot map[string]int)
		field string // the probe's name whose answers change
		want  string // its has, getInt, getBool, getText, getString, getRaw
	}{
		{"delay at distance's value", func(idx []span, slot map[string]int) {
			idx[slot["delay"]] = span{off("1750"), 4}
		}, "delay", "1|1750|-|-0|-|=1750"},
		{"origin absent", func(idx []span, slot map[string]int) {
			idx[slot["origin"]] = absent
		}, "origin", "-|--7|-|-0|-|-"},
		{"destination at origin's value", func(idx []span, slot map[string]int) {
			idx[slot["destination"]] = span{off(`"DTW"`), 5}
		}, "destination", `1|--7|-|=DTW|=DTW|="DTW"`},
		{"esc said to have no escape: its text is the raw bytes", func(idx []span, slot map[string]int) {
			idx[slot["esc"]].n &^= 1 << 31
		}, "esc", `1|--7|-|=a\nb|=a\nb|="a\nb"`},
		{"s said to have an escape: unescaped, the same text", func(idx []span, slot map[string]int) {
			idx[slot["s"]].n |= 1 << 31
		}, "s", `1|--7|-|=x|=x|="x"`},
		{"missing present, at delay's value", func(idx []span, slot map[string]int) {
			idx[slot["missing"]] = span{off("66"), 2}
		}, "missing", "1|66|-|-0|-|=66"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newIndexHost(t, "as-indexprobe")
			evs := indexEvents("p", data, data)
			if _, msg := h.handle(t, indexedBatch(t, evs, 0, nil)); msg != "" {
				t.Fatal(msg)
			}
			slot := map[string]int{}
			for i, n := range h.names {
				slot[n] = i
			}
			idx := indexAll(t, evs, h.names)
			tt.edit(idx[1], slot) // event 2 lies, event 1 does not
			docs, msg := h.handle(t, indexedBatch(t, evs, len(h.names), idx))
			if msg != "" {
				t.Fatal(msg)
			}
			r := answers(t, docs)
			checkProbe(t, []byte(data), r["1"])
			g1, g2 := strings.Split(r["1"], "\x1d"), strings.Split(r["2"], "\x1d")
			for i, name := range probeNames {
				got := strings.Split(g2[i], "\x1e")
				if name != tt.field {
					if g2[i] != g1[i] {
						t.Errorf("%q: %q, want the truth %q", name, g2[i], g1[i])
					}
					continue
				}
				if s := strings.Join(got[:6], "|"); s != tt.want {
					t.Errorf("%q read through the lying index: %q, want %q", name, s, tt.want)
				}
			}
		})
	}
}

// TestFieldIndexRegistration: a name the host refuses (-1) is asked for once and scanned ever
// after; a name first read in the middle of a batch is registered then, scanned in that batch
// (the batch indexes the names registered before it), and read through the index from the next
// batch on (a lying entry for it changes its answer there).
func TestFieldIndexRegistration(t *testing.T) {
	h := newIndexHost(t, "as-indexprobe", "distance")
	data := `{"delay":66,"distance":1750,"origin":"DTW","late":"yes","other":"no"}`
	evs := indexEvents("p", data)
	for range 3 {
		if _, msg := h.handle(t, indexedBatch(t, evs, len(h.names), indexAll(t, evs, h.names))); msg != "" {
			t.Fatal(msg)
		}
	}
	if h.calls["distance"] != 1 {
		t.Errorf("refused name asked for %d times, want once", h.calls["distance"])
	}
	for _, n := range h.names {
		if n == "distance" {
			t.Errorf("refused name registered")
		}
	}
	docs, _ := h.handle(t, indexedBatch(t, evs, len(h.names), indexAll(t, evs, h.names)))
	checkProbe(t, []byte(data), answers(t, docs)["1"])

	// "late" is read at the second event only (its partition key is "late").
	f := len(h.names)
	mid := append(indexEvents("p", data), indexEvents("late", data)...)
	mid[1].Seq = []byte("2")
	idx := indexAll(t, mid, h.names)
	docs, msg := h.handle(t, indexedBatch(t, mid, f, idx))
	if msg != "" {
		t.Fatal(msg)
	}
	if len(h.names) != f+1 || h.names[f] != "late" {
		t.Fatalf("registered %q, want \"late\" last", h.names)
	}
	lateWant := `1|--7|-|=yes|=yes|="yes"`
	lateOf := func(r string) string {
		g := strings.Split(r, "\x1d")
		return strings.Join(strings.Split(g[len(probeNames)], "\x1e")[:6], "|")
	}
	if got := lateOf(answers(t, docs)["2"]); got != lateWant {
		t.Errorf("late in its first batch (scanned): %q, want %q", got, lateWant)
	}
	idx = indexAll(t, mid, h.names)
	idx[1][f] = span{uint32(strings.Index(data, `"no"`)), 4} // a lie: "late" at other's value
	docs, msg = h.handle(t, indexedBatch(t, mid, f+1, idx))
	if msg != "" {
		t.Fatal(msg)
	}
	if got := lateOf(answers(t, docs)["2"]); got != `1|--7|-|=no|=no|="no"` {
		t.Errorf("late in the next batch, its entry pointing at other's value: %q, want other's value (read through the index)", got)
	}
	if h.calls["late"] != 1 {
		t.Errorf("late registered %d times, want once", h.calls["late"])
	}
}

// TestFieldIndexManyNames: a handler reading more names than the host indexes (64) registers
// each once; the host refuses those past its limit, which are scanned ever after; and the
// library's table of names grows past its first size without losing a slot (a lying entry for
// the first name registered still changes its answer).
func TestFieldIndexManyNames(t *testing.T) {
	h := newIndexHost(t, "as-indexprobe")
	o := guest.NewObject(nil)
	o.Int("delay", 66).Int("distance", 1750).Str("origin", "DTW")
	for i := range 70 {
		o.Int(fmt.Sprintf("m%02d", i), int64(i*3))
	}
	data := string(o.Bytes())
	evs := append(indexEvents("p", data), indexEvents("many", data)...)
	evs[1].Seq = []byte("2")
	if _, msg := h.handle(t, indexedBatch(t, evs, 0, nil)); msg != "" {
		t.Fatal(msg)
	}
	if len(h.names) != wasmabi.MaxIndexedFields {
		t.Fatalf("%d names registered, want the host's limit %d", len(h.names), wasmabi.MaxIndexedFields)
	}
	var want strings.Builder
	for i := range 70 {
		fmt.Fprintf(&want, "%d,", i*3)
	}
	for run := range 2 {
		idx := indexAll(t, evs, h.names)
		if run == 1 {
			idx[1][0] = span{uint32(strings.Index(data, "1750")), 4} // a lie: slot 0 ("delay") at distance's value
		}
		docs, msg := h.handle(t, indexedBatch(t, evs, len(h.names), idx))
		if msg != "" {
			t.Fatal(msg)
		}
		r := answers(t, docs)
		checkProbe(t, []byte(data), r["1"])
		g := strings.Split(r["2"], "\x1d")
		if got := g[len(probeNames)]; got != want.String() {
			t.Errorf("run %d: m00..m69 = %q, want %q", run, got, want.String())
		}
		delay := strings.Split(g[0], "\x1e")[1]
		if wantDelay := map[int]string{0: "66", 1: "1750"}[run]; delay != wantDelay {
			t.Errorf("run %d: getInt(delay) = %s, want %s", run, delay, wantDelay)
		}
	}
	for name, n := range h.calls {
		if n != 1 {
			t.Errorf("%q asked for %d times, want once", name, n)
		}
	}
	if len(h.calls) != len(probeNames)-1+1+70 { // the probe's names but "", "dyn", m00..m69
		t.Errorf("%d names asked for, want %d", len(h.calls), len(probeNames)-1+1+70)
	}
}

// TestFieldIndexMalformed: an index that breaks ABI.md §2 fails the batch as other corruption
// does ("cannot decode batch"), and the instance goes on with the next good batch.
func TestFieldIndexMalformed(t *testing.T) {
	data := `{"delay":66,"origin":"DTW"}`
	h := newIndexHost(t, "as-indexprobe")
	evs := indexEvents("p", data)
	if _, msg := h.handle(t, indexedBatch(t, evs, 0, nil)); msg != "" {
		t.Fatal(msg)
	}
	f := len(h.names)
	good := indexedBatch(t, evs, f, indexAll(t, evs, h.names))
	shardEnd := 14 + len("shard-1")
	flagAt := shardEnd + 2 + 2 + 1 + 2 + 1 + 8 + 4 + len(data) // the event's indexed byte
	edit := func(fn func(b []byte) []byte) []byte { return fn(bytes.Clone(good)) }
	entry := func(b []byte, slot int, off, n uint32) []byte {
		p := flagAt + 1 + 8*slot
		binary.LittleEndian.PutUint32(b[p:], off)
		binary.LittleEndian.PutUint32(b[p+4:], n)
		return b
	}
	tests := []struct {
		name, batch, want string
	}{
		{"f = 0", string(edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[shardEnd:], 0); return b })),
			"field count 0 out of range (want 1..64)"},
		{"f = 65", string(edit(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[shardEnd:], 65); return b })),
			"field count 65 out of range (want 1..64)"},
		{"no room for f", string(edit(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[8:], 0)
			return b[:shardEnd+1]
		})), "field count truncated"},
		{"indexed flag 2", string(edit(func(b []byte) []byte { b[flagAt] = 2; return b })), "event 0: field index flag 2, want 0 or 1"},
		{"no indexed flag", string(good[:flagAt]), "event 0: field index truncated or too long"},
		{"index truncated", string(good[:len(good)-1]), "event 0: field index truncated or too long"},
		{"offset past the data", string(edit(func(b []byte) []byte { return entry(b, 0, uint32(len(data)), 1) })),
			"event 0: field index out of the data's bounds"},
		{"length past the data", string(edit(func(b []byte) []byte { return entry(b, 0, 1, uint32(len(data))) })),
			"event 0: field index out of the data's bounds"},
		{"offset + length wraps", string(edit(func(b []byte) []byte { return entry(b, 0, 0xFFFFFFF0, 0x20) })),
			"event 0: field index out of the data's bounds"},
		{"empty value", string(edit(func(b []byte) []byte { return entry(b, 0, 1, 0) })),
			"event 0: field index out of the data's bounds"},
		{"empty value with the escape bit", string(edit(func(b []byte) []byte { return entry(b, 0, 1, 1<<31) })),
			"event 0: field index out of the data's bounds"},
		{"a lone quote", string(edit(func(b []byte) []byte { return entry(b, 0, uint32(strings.Index(data, `"DTW`)), 1) })),
			"event 0: field index out of the data's bounds"},
		{"absent with a length", string(edit(func(b []byte) []byte { return entry(b, 0, 0xFFFFFFFF, 1) })),
			"event 0: field index out of the data's bounds"},
		{"trailing byte", string(append(bytes.Clone(good), 0)), "trailing bytes after the last event"},
	}
	for _, tt := range tests {
		_, msg := h.handle(t, []byte(tt.batch))
		if want := "guest: cannot decode batch: " + tt.want; msg != want {
			t.Errorf("%s: fail message %q, want %q", tt.name, msg, want)
		}
		docs, msg := h.handle(t, good)
		if msg != "" {
			t.Fatalf("after %s: %s", tt.name, msg)
		}
		checkProbe(t, []byte(data), answers(t, docs)["1"])
	}
}

// FuzzFieldIndex: for any data, the index the host would send gives the answers of the scan;
// and any index bytes at all either fail the batch as corrupt or give answers, never a trap.
func FuzzFieldIndex(f *testing.F) {
	for _, d := range indexDocs {
		f.Add([]byte(d), []byte{})
	}
	f.Add([]byte(indexDocs[0]), []byte{1, 0, 0, 0, 5, 0, 0, 0})
	f.Add([]byte(indexDocs[2]), []byte{6, 0, 0, 0, 9, 0, 0, 0x80, 0xFF, 0xFF, 0xFF, 0xFF})
	h := newIndexHost(f, "as-indexprobe")
	if _, msg := h.handle(f, indexedBatch(f, indexEvents("p", `{}`), 0, nil)); msg != "" {
		f.Fatal(msg)
	}
	f.Fuzz(func(t *testing.T, data, raw []byte) {
		if len(data) > 1<<16 {
			t.Skip()
		}
		evs := indexEvents("p", string(data))
		docs, msg := h.handle(t, indexedBatch(t, evs, 0, nil))
		if msg != "" {
			t.Fatal(msg)
		}
		want := answers(t, docs)["1"]
		if s, ok := spansOf(t, data, h.names); ok {
			docs, msg := h.handle(t, indexedBatch(t, evs, len(h.names), [][]span{s}))
			if msg != "" {
				t.Fatal(msg)
			}
			if got := answers(t, docs)["1"]; got != want {
				t.Fatalf("data %q: indexed %q, scanned %q", data, got, want)
			}
		}
		// Any index bytes: the batch's last f entries (its only event's) overwritten with raw.
		lie := make([]span, len(h.names))
		for i := range lie {
			lie[i] = absent
		}
		batch := indexedBatch(t, evs, len(h.names), [][]span{lie})
		entries := batch[len(batch)-8*len(lie):]
		clear(entries)
		copy(entries, raw)
		docs, msg = h.handle(t, batch)
		if msg != "" && !strings.HasPrefix(msg, "guest: cannot decode batch: event 0: field index") {
			t.Fatalf("data %q, index %x: %s", data, raw, msg)
		}
		if msg == "" && len(docs) != 1 {
			t.Fatalf("data %q, index %x: %d documents", data, raw, len(docs))
		}
	})
}
