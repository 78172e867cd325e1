// Package as_test checks the AssemblyScript library (the npm package @projhost/sdk in this
// folder) against the Go SDK: the JSON reader must find the same fields and values as
// guest.JSONInt/JSONString/JSONBool/JSONRaw, in any order of reads on one reader, and the writer
// must produce the same bytes as guest.Object. It drives testdata/jsonprobe.ts, built by make as
// build/wasm/as-jsonprobe.wasm, in wazero. state_test.go checks State and the batch cache through
// the real host. (Batch decoding and the examples are covered by plugins/examples/wasm_test.go.)
package as_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/sdk/go/guest"
)

type probe struct {
	mod api.Module
	fn  map[string]api.Function
}

func newProbe(tb testing.TB) *probe {
	tb.Helper()
	ctx := context.Background()
	bin, err := os.ReadFile(testwasm.Path(tb, "as-jsonprobe"))
	if err != nil {
		tb.Fatal(err)
	}
	rt := wazero.NewRuntime(ctx)
	tb.Cleanup(func() { rt.Close(ctx) })
	_, err = rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func(msg, file, line, col uint32) { panic("AssemblyScript abort") }).Export("abort").Instantiate(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	mod, err := rt.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig())
	if err != nil {
		tb.Fatal(err)
	}
	p := &probe{mod: mod, fn: map[string]api.Function{}}
	for _, n := range []string{"alloc", "lastFound", "resultPtr", "resultLen", "probeInt", "probeBool", "probeString", "probeText", "probeRaw", "probeSeq", "write", "writeLiterals", "readLiterals", "keyInts"} {
		if p.fn[n] = mod.ExportedFunction(n); p.fn[n] == nil {
			tb.Fatalf("probe module lacks %s", n)
		}
	}
	return p
}

func (p *probe) call(tb testing.TB, name string, args ...uint64) uint64 {
	tb.Helper()
	res, err := p.fn[name].Call(context.Background(), args...)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	if len(res) == 0 {
		return 0
	}
	return res[0]
}

func (p *probe) input(tb testing.TB, parts ...[]byte) {
	tb.Helper()
	n := 0
	for _, b := range parts {
		n += len(b)
	}
	ptr := uint32(p.call(tb, "alloc", uint64(n)))
	for _, b := range parts {
		if !p.mod.Memory().Write(ptr, b) {
			tb.Fatal("probe input out of bounds")
		}
		ptr += uint32(len(b))
	}
}

func (p *probe) result(tb testing.TB) ([]byte, bool) {
	found := p.call(tb, "lastFound") == 1
	ptr, n := uint32(p.call(tb, "resultPtr")), uint32(p.call(tb, "resultLen"))
	b, ok := p.mod.Memory().Read(ptr, n)
	if !ok {
		tb.Fatal("probe result out of bounds")
	}
	return append([]byte(nil), b...), found
}

// compareGet checks every reader of the AssemblyScript library against the Go SDK.
func (p *probe) compareGet(tb testing.TB, data []byte, key string) {
	tb.Helper()
	p.input(tb, data, []byte(key))
	dl, kl := uint64(len(data)), uint64(len(key))

	i := int64(p.call(tb, "probeInt", dl, kl))
	iok := p.call(tb, "lastFound") == 1
	if gi, gok := guest.JSONInt(data, key); gok != iok || (gok && gi != i) {
		tb.Fatalf("data %q key %q: AS getInt = %d, %v; Go JSONInt = %d, %v", data, key, i, iok, gi, gok)
	}
	b := p.call(tb, "probeBool", dl, kl) == 1
	bok := p.call(tb, "lastFound") == 1
	if gb, gok := guest.JSONBool(data, key); gok != bok || (gok && gb != b) {
		tb.Fatalf("data %q key %q: AS getBool = %v, %v; Go JSONBool = %v, %v", data, key, b, bok, gb, gok)
	}
	p.call(tb, "probeString", dl, kl)
	s, sok := p.result(tb)
	if gs, gok := guest.JSONString(data, key); gok != sok || (gok && string(gs) != string(s)) {
		tb.Fatalf("data %q key %q: AS getString = %q, %v; Go JSONString = %q, %v", data, key, s, sok, gs, gok)
	}
	p.call(tb, "probeText", dl, kl)
	if txt, tok := p.result(tb); tok != sok || string(txt) != string(s) {
		tb.Fatalf("data %q key %q: AS getText = %q, %v; getString = %q, %v", data, key, txt, tok, s, sok)
	}
	p.call(tb, "probeRaw", dl, kl)
	r, rok := p.result(tb)
	gr, gok := guest.JSONRaw(data, key)
	if gok != rok || (gok && utf8.Valid(gr) && string(gr) != string(r)) {
		tb.Fatalf("data %q key %q: AS getRaw = %q, %v; Go JSONRaw = %q, %v", data, key, r, rok, gr, gok)
	}
}

// compareSeq reads every key of keys in turn on one AssemblyScript reader (which reuses the
// members it scanned for earlier keys) and checks each against the Go SDK's independent reads,
// and the reader's ok against all of them.
func (p *probe) compareSeq(tb testing.TB, data []byte, keys []string) {
	tb.Helper()
	joined := strings.Join(keys, "\x00")
	p.input(tb, data, []byte(joined))
	p.call(tb, "probeSeq", uint64(len(data)), uint64(len(joined)))
	out, ok := p.result(tb)
	got := strings.Split(string(out), "\x00")
	if len(got) != len(keys)+1 {
		tb.Fatalf("data %q keys %q: %d results, want %d", data, keys, len(got)-1, len(keys))
	}
	all := true
	for i, k := range keys {
		gr, gok := guest.JSONRaw(data, k)
		all = all && gok
		want := "0"
		if gok {
			want = "1" + string(gr)
		}
		if got[i] != want && (!gok || utf8.Valid(gr)) {
			tb.Fatalf("data %q keys %q: read %d (%q) = %q, Go JSONRaw = %q", data, keys, i, k, got[i], want)
		}
	}
	if ok != all {
		tb.Fatalf("data %q keys %q: ok = %v, want %v", data, keys, ok, all)
	}
}

var seeds = []struct{ data, key string }{
	{`{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`, "delay"},
	{`{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`, "destination"},
	{`{"d":-9223372036854775808,"e":9223372036854775808}`, "d"},
	{`{"d":-9223372036854775808,"e":9223372036854775808}`, "e"},
	{`{"d\u0065lay":7}`, "delay"},
	{`{"s":"a\"b\\c\n\u00e9\ud83d\ude00\ud800x"}`, "s"},
	{"{\"s\":\"a\xffb\"}", "s"},
	{`{"é":true,"f":false}`, "é"},
	{`{"a":{"b":[1,2,{"c":"}"}]},"b":null}`, "b"},
	{` { "x" : 1.5e3 , "y" : [ ] } `, "y"},
	{`{"d":012}`, "d"},
	{`{"d":1`, "d"},
	{`{"a":1,"a":2}`, "a"},
	{`not json`, "a"},
	{``, "a"},
}

func TestReaderAgreesWithGo(t *testing.T) {
	p := newProbe(t)
	for _, s := range seeds {
		p.compareGet(t, []byte(s.data), s.key)
	}
	// Nesting: 10000 levels are accepted (the encoding/json limit), more are not, and neither
	// overflows the AssemblyScript stack.
	for _, depth := range []int{9999, 10000, 10001, 100000} {
		data := `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `,"b":1}`
		p.compareGet(t, []byte(data), "b")
		_, ok := guest.JSONInt([]byte(data), "b")
		if ok != json.Valid([]byte(data)) || ok != (depth <= 10000) {
			t.Errorf("depth %d: found = %v, encoding/json valid = %v", depth, ok, json.Valid([]byte(data)))
		}
	}
}

func TestReaderSequenceAgreesWithGo(t *testing.T) {
	p := newProbe(t)
	flight := `{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`
	tests := []struct {
		data string
		keys []string
	}{
		{flight, []string{"delay", "distance", "origin", "destination"}},
		{flight, []string{"destination", "origin", "delay", "date", "destination"}},
		{flight, []string{"delay", "nope", "origin"}},
		{`{"a":1,"b":2,"a":3}`, []string{"b", "a", "a"}},
		{`{"d\u0065lay":7,"delay":8}`, []string{"delay", "d\u0065lay"}},
		{`{"a":1,"b":[,"c":3}`, []string{"c", "a", "b"}},
		{`{"é":1,"e":2}`, []string{"e", "é"}},
		{`{}`, []string{"a", "b"}},
		{`{"":1,"a":2,"":3}`, []string{"a", "", ""}},
		{`{"a\u0062":1,"ab":2}`, []string{"x", "ab", "a\u0062"}},
		{`{"ab":1,"a\u0062":2,"ba":3}`, []string{"ba", "ab"}},
		{`{"éa":1,"ea":2}`, []string{"ea", "éa", "x"}},
		{`{"a":1`, []string{"a"}},
	}
	for _, tt := range tests {
		p.compareSeq(t, []byte(tt.data), tt.keys)
	}
}

func FuzzReaderSequenceAgreesWithGo(f *testing.F) {
	f.Add([]byte(`{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`), "destination,delay,origin,x")
	f.Add([]byte(`{"a":1,"b":2,"a":3}`), "b,a,a")
	p := newProbe(f)
	f.Fuzz(func(t *testing.T, data []byte, keys string) {
		if !utf8.ValidString(keys) || strings.ContainsRune(keys, 0) || len(data) > 1<<16 {
			t.Skip("keys are AssemblyScript strings: valid UTF-8 only, and NUL separates them in the probe")
		}
		p.compareSeq(t, data, strings.Split(keys, ","))
	})
}

func FuzzReaderAgreesWithGo(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s.data), s.key)
	}
	p := newProbe(f)
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		if !utf8.ValidString(key) || len(data) > 1<<16 {
			t.Skip("keys are AssemblyScript strings: valid UTF-8 only")
		}
		p.compareGet(t, data, key)
	})
}

func (p *probe) compareWrite(tb testing.TB, k, v string, i int64, b bool) {
	tb.Helper()
	p.input(tb, []byte(k), []byte(v))
	var bi uint64
	if b {
		bi = 1
	}
	p.call(tb, "write", uint64(len(k)), uint64(len(v)), uint64(i), bi)
	got, _ := p.result(tb)
	o := guest.NewObject(nil)
	o.Str(k, v).Int("i", i).Bool("b", b)
	if want := o.Bytes(); string(got) != string(want) {
		tb.Fatalf("AS writer %q, Go writer %q", got, want)
	}
}

func TestWriterAgreesWithGo(t *testing.T) {
	p := newProbe(t)
	tests := []struct {
		k, v string
		i    int64
		b    bool
	}{
		{"flights", "DTW", 0, false},
		{"k\"\\", "a\"b\\c\n\r\t\b\f\x01\x1f/é😀\u2028\x7f", math.MinInt64, true},
		{"", "", math.MaxInt64, false},
		{"max_delay", "x", -1, true},
		{"n", "1000000000000000000", 1000000000000000000, false},
	}
	// The writer's integer paths: two digits per step below 2^32, division above.
	for _, i := range []int64{1, 9, 10, 11, 99, 100, 101, 999, 1000, 9999, 10000, 99999, 100000,
		999999, 1000000, 9999999, 10000000, 99999999, 100000000, 999999999, 1000000000,
		math.MaxUint32 - 1, math.MaxUint32, math.MaxUint32 + 1, 1<<40 + 7, math.MaxInt64 - 1} {
		tests = append(tests, struct {
			k, v string
			i    int64
			b    bool
		}{"i", "", i, false}, struct {
			k, v string
			i    int64
			b    bool
		}{"i", "", -i, true})
	}
	for _, tt := range tests {
		p.compareWrite(t, tt.k, tt.v, tt.i, tt.b)
	}
}

// TestReaderLiteralNamesAgreeWithGo: names that are string literals, which the reader encodes
// once (testdata/jsonprobe.ts readLiterals: more names than its first table holds, non-ASCII
// names, names of 0 to 19 bytes), find what the Go SDK finds: in objects that hold all of them,
// some, names that differ in one byte, and members at the very end of the object.
func TestReaderLiteralNamesAgreeWithGo(t *testing.T) {
	p := newProbe(t)
	names := []string{"\"q\\u", "ключ", "tab\t", "😀", "", "a", "abcdefg", "abcdefgh", "abcdefghi", "destination_airport"}
	for i := range 70 {
		names = append(names, fmt.Sprintf("k%02d", i))
	}
	objects := []string{`{}`, `{"k00":1}`, `{"abcdefgh":8,"abcdefghi":9,"abcdefg":7}`,
		`{"abcdefgX":1,"abcdefgX":2,"abcdefghX":3,"Xbcdefgh":4,"destination_airporT":5,"k40":6}`,
		`{"a":1}`, `{"a" : 1 , "":2}`, `{"destination_airport":19}`, `{"k39":39,"k00":0}`, `{"k69":69,"k64":64}`}
	all := guest.NewObject(nil)
	for i, n := range names {
		all.Int(n, int64(i*7-3))
	}
	objects = append(objects, string(all.Bytes()))
	for _, obj := range objects {
		var want strings.Builder
		for range 2 {
			for _, n := range names {
				if v, ok := guest.JSONInt([]byte(obj), n); ok {
					fmt.Fprintf(&want, "%d,", v)
				} else {
					want.WriteString("x,")
				}
			}
		}
		p.input(t, []byte(obj))
		p.call(t, "readLiterals", uint64(len(obj)))
		if got, _ := p.result(t); string(got) != want.String() {
			t.Errorf("object %s:\nAS reader %s\nGo reader %s", obj, got, want.String())
		}
	}
}

// TestWriterLiteralKeysAgreeWithGo: keys that are string literals, whose encoding the writer
// makes once and copies after (testdata/jsonprobe.ts writeLiterals), give the Go writer's bytes,
// the first time and again, first in an object and after other fields.
func TestWriterLiteralKeysAgreeWithGo(t *testing.T) {
	p := newProbe(t)
	o := guest.NewObject(nil)
	for i, k := range []string{"\"q\\u", "ключ", "tab\t", "😀"} {
		o.Int(k, int64(i))
	}
	for i := range 40 {
		o.Int(fmt.Sprintf("k%02d", i), int64(4+i))
	}
	o2 := guest.NewObject(nil)
	o2.Int("k05", 5).Str("", "dyn").Int("k00", 0).Int("\"q\\u", 1)
	want := string(o.Bytes()) + "\x00" + string(o2.Bytes())
	for run := range 3 {
		p.call(t, "writeLiterals")
		got, _ := p.result(t)
		if string(got) != want {
			t.Fatalf("run %d: AS writer\n%q\nGo writer\n%q", run, got, want)
		}
	}
}

// TestKeyAppendIntegers: Key.append of an integer writes it in decimal at every width's limits
// (testdata/jsonprobe.ts keyInts), an unsigned 64-bit one above 2^63 too.
func TestKeyAppendIntegers(t *testing.T) {
	p := newProbe(t)
	p.call(t, "keyInts")
	got, _ := p.result(t)
	want := strings.Join([]string{
		strconv.FormatInt(math.MinInt64, 10), strconv.FormatInt(math.MaxInt64, 10), "-4294967296", "-4294967295",
		strconv.FormatUint(math.MaxUint64, 10), "9223372036854775808", "4294967296", "4294967295",
		"-2147483648", "65535", "-128", "255", "0",
	}, ",")
	if string(got) != want {
		t.Errorf("Key of integers %q, want %q", got, want)
	}
}

func FuzzWriterAgreesWithGo(f *testing.F) {
	f.Add("origin", "DTW", int64(66), true)
	f.Add("k\"", "\x00\u00e9😀", int64(math.MinInt64), false)
	p := newProbe(f)
	f.Fuzz(func(t *testing.T, k, v string, i int64, b bool) {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			t.Skip("AssemblyScript strings are UTF-16: valid UTF-8 only")
		}
		p.compareWrite(t, k, v, i, b)
	})
}
