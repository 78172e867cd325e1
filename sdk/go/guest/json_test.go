package guest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/projhost/projhost/sdk/go/guest"
)

const flight = `{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`

func TestJSONAccessors(t *testing.T) {
	tests := []struct {
		name, data, key string
		raw             string // "" = not found
		i               int64
		iok             bool
		s               string
		sok             bool
	}{
		{name: "int field", data: flight, key: "delay", raw: "66", i: 66, iok: true},
		{name: "string field", data: flight, key: "origin", raw: `"DTW"`, s: "DTW", sok: true},
		{name: "last field", data: flight, key: "destination", raw: `"LAS"`, s: "LAS", sok: true},
		{name: "missing field", data: flight, key: "dest"},
		{name: "key is case sensitive", data: flight, key: "Delay"},
		{name: "negative", data: `{"d":-17}`, key: "d", raw: "-17", i: -17, iok: true},
		{name: "whitespace everywhere", data: " \n{ \"a\" :\t[1, {\"x\":2}] , \"b\" : \r\n 5 } ", key: "b", raw: "5", i: 5, iok: true},
		{name: "nested values are skipped, not searched", data: `{"a":{"b":1},"c":[{"b":2}],"b":3}`, key: "b", raw: "3", i: 3, iok: true},
		{name: "nested value returned raw", data: `{"a":{"b":[1,2]}}`, key: "a", raw: `{"b":[1,2]}`},
		{name: "escaped key", data: `{"d\u0065lay":7}`, key: "delay", raw: "7", i: 7, iok: true},
		{name: "escaped string value", data: `{"s":"a\"b\\c\n\u00e9\ud83d\ude00"}`, key: "s", raw: `"a\"b\\c\n\u00e9\ud83d\ude00"`, s: "a\"b\\c\né😀", sok: true},
		{name: "lone surrogate becomes U+FFFD", data: `{"s":"x\ud800y"}`, key: "s", raw: `"x\ud800y"`, s: "x\ufffdy", sok: true},
		{name: "invalid UTF-8 becomes U+FFFD", data: "{\"s\":\"a\xffb\"}", key: "s", raw: "\"a\xffb\"", s: "a\ufffdb", sok: true},
		{name: "strings skipped contain braces and quotes", data: `{"x":"}\",{","y":1}`, key: "y", raw: "1", i: 1, iok: true},
		{name: "float is not an int", data: `{"d":1.5}`, key: "d", raw: "1.5"},
		{name: "exponent is not an int", data: `{"d":1e3}`, key: "d", raw: "1e3"},
		{name: "int64 max", data: `{"d":9223372036854775807}`, key: "d", raw: "9223372036854775807", i: math.MaxInt64, iok: true},
		{name: "int64 min", data: `{"d":-9223372036854775808}`, key: "d", raw: "-9223372036854775808", i: math.MinInt64, iok: true},
		{name: "int64 overflow", data: `{"d":9223372036854775808}`, key: "d", raw: "9223372036854775808"},
		{name: "string is not an int", data: `{"d":"5"}`, key: "d", raw: `"5"`, s: "5", sok: true},
		{name: "int is not a string", data: `{"d":5}`, key: "d", raw: "5", i: 5, iok: true},
		{name: "first duplicate wins", data: `{"d":1,"d":2}`, key: "d", raw: "1", i: 1, iok: true},
		{name: "field before a syntax error", data: `{"d":1,"x":}`, key: "d", raw: "1", i: 1, iok: true},
		{name: "field at a truncation", data: `{"d":1`, key: "d"},
		{name: "field after a syntax error", data: `{"x":01,"d":1}`, key: "d"},
		{name: "leading zero", data: `{"d":012}`, key: "d"},
		{name: "bad literal", data: `{"x":tru,"d":1}`, key: "d"},
		{name: "unterminated string", data: `{"d":"abc`, key: "d"},
		{name: "control character in string", data: "{\"d\":\"a\nb\"}", key: "d"},
		{name: "bad escape", data: `{"d":"\x"}`, key: "d"},
		{name: "array top level", data: `[{"d":1}]`, key: "d"},
		{name: "not JSON", data: `delay=5`, key: "delay"},
		{name: "empty", data: ``, key: "d"},
		{name: "empty object", data: `{}`, key: "d"},
		{name: "truncated after colon", data: `{"d":`, key: "d"},
		{name: "missing comma", data: `{"a":1 "d":2}`, key: "d"},
		{name: "trailing comma", data: `{"a":1,}`, key: "d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := []byte(tt.data)
			raw, ok := guest.JSONRaw(d, tt.key)
			if ok != (tt.raw != "") || string(raw) != tt.raw {
				t.Errorf("JSONRaw = %q, %v; want %q", raw, ok, tt.raw)
			}
			i, ok := guest.JSONInt(d, tt.key)
			if i != tt.i || ok != tt.iok {
				t.Errorf("JSONInt = %d, %v; want %d, %v", i, ok, tt.i, tt.iok)
			}
			s, ok := guest.JSONString(d, tt.key)
			if string(s) != tt.s || ok != tt.sok {
				t.Errorf("JSONString = %q, %v; want %q, %v", s, ok, tt.s, tt.sok)
			}
		})
	}
}

func TestJSONFloatBool(t *testing.T) {
	d := []byte(`{"f":-1.25e2,"i":3,"t":true,"n":null,"s":"1","b":false}`)
	if f, ok := guest.JSONFloat(d, "f"); !ok || f != -125 {
		t.Errorf("JSONFloat f = %v, %v", f, ok)
	}
	if f, ok := guest.JSONFloat(d, "i"); !ok || f != 3 {
		t.Errorf("JSONFloat i = %v, %v", f, ok)
	}
	if _, ok := guest.JSONFloat(d, "s"); ok {
		t.Error("JSONFloat of a string succeeded")
	}
	if v, ok := guest.JSONBool(d, "t"); !ok || !v {
		t.Errorf("JSONBool t = %v, %v", v, ok)
	}
	if v, ok := guest.JSONBool(d, "b"); !ok || v {
		t.Errorf("JSONBool b = %v, %v", v, ok)
	}
	if _, ok := guest.JSONBool(d, "n"); ok {
		t.Error("JSONBool of null succeeded")
	}
}

func TestJSONZeroAlloc(t *testing.T) {
	d := []byte(flight)
	allocs := testing.AllocsPerRun(100, func() {
		guest.JSONInt(d, "delay")
		guest.JSONInt(d, "distance")
		guest.JSONString(d, "origin")
		guest.JSONString(d, "destination")
		guest.JSONFloat(d, "delay")
		guest.JSONInt([]byte(`{"d\u0065lay":7}`), "delay")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per lookup round, want 0", allocs)
	}
	buf := make([]byte, 0, 256)
	allocs = testing.AllocsPerRun(100, func() {
		o := guest.NewObject(buf[:0])
		o.Int("flights", 12).Int("max_delay", -3).Str("s", "a\"b").StrBytes("o", d[:5]).Float("f", 1.5).Bool("b", true)
		o.Bytes()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per object, want 0", allocs)
	}
}

func TestObject(t *testing.T) {
	tests := []struct {
		name  string
		build func(o *guest.Object)
		want  string
	}{
		{"empty", func(o *guest.Object) {}, `{}`},
		{"ints in order", func(o *guest.Object) {
			o.Int("flights", 3).Int("delayed", 0).Int("total_delay", -12).Int("max_delay", math.MinInt64)
		}, `{"flights":3,"delayed":0,"total_delay":-12,"max_delay":-9223372036854775808}`},
		{"escapes", func(o *guest.Object) {
			o.Str("k\"", "a\"b\\c\n\r\t\b\f\x01\x1f/é😀\x7f")
		}, `{"k\"":"a\"b\\c\n\r\t\b\f\u0001\u001f/é😀` + "\x7f" + `"}`},
		{"invalid UTF-8", func(o *guest.Object) { o.StrBytes("s", []byte("a\xff\xc3")) }, "{\"s\":\"a\ufffd\ufffd\"}"},
		{"floats", func(o *guest.Object) {
			o.Float("a", 1.5).Float("b", 1e21).Float("c", math.NaN()).Float("d", math.Inf(-1)).Float("e", 0.1)
		}, `{"a":1.5,"b":1e+21,"c":null,"d":null,"e":0.1}`},
		{"bool and raw", func(o *guest.Object) { o.Bool("t", true).Raw("r", []byte(`[1,{"x":null}]`)) }, `{"t":true,"r":[1,{"x":null}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := guest.NewObject([]byte("prefix:"))
			tt.build(&o)
			got := o.Bytes()
			if string(got) != "prefix:"+tt.want {
				t.Fatalf("got %s, want prefix:%s", got, tt.want)
			}
			if string(o.Bytes()) != string(got) {
				t.Fatal("second Bytes call differs")
			}
			if !json.Valid(got[len("prefix:"):]) {
				t.Fatalf("%s is not valid JSON", got)
			}
		})
	}
}

// FuzzJSON checks that the accessors never panic and, on valid UTF-8 JSON objects without
// duplicate keys, agree with encoding/json for every top-level key.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{flight, `{}`, `{"a":{"b":[1,2,{"c":"d"}]},"e":-0.5e-3,"f":true,"g":null}`,
		`{"d\u0065lay":7,"s":"\ud83d\ude00\ud800x"}`, `{"n":9223372036854775808,"m":-0}`, `[1]`, `{"a":1,"a":2}`, ``, `{"a":"\u00`} {
		f.Add([]byte(s), "delay")
	}
	f.Fuzz(func(t *testing.T, data []byte, probe string) {
		raw, ok := guest.JSONRaw(data, probe)
		if ok && !bytes.Contains(data, raw) {
			t.Fatalf("JSONRaw returned %q, not a part of the input", raw)
		}
		guest.JSONInt(data, probe)
		guest.JSONString(data, probe)
		guest.JSONFloat(data, probe)
		guest.JSONBool(data, probe)
		if !utf8.Valid(data) || !json.Valid(data) {
			return
		}
		keys, vals, ok := topLevel(data)
		if !ok {
			return
		}
		if _, dup := vals[probe]; !dup {
			if _, found := guest.JSONRaw(data, probe); found {
				t.Fatalf("found key %q that encoding/json does not see", probe)
			}
		}
		for _, k := range keys {
			v := vals[k]
			raw, ok := guest.JSONRaw(data, k)
			if !ok {
				t.Fatalf("key %q not found", k)
			}
			var want any
			if err := json.Unmarshal(v, &want); err != nil {
				t.Fatal(err)
			}
			var got any
			if err := json.Unmarshal(raw, &got); err != nil || !jsonEqual(got, want) {
				t.Fatalf("key %q: raw %q decodes to %v (%v), want %v", k, raw, got, err, want)
			}
			s, sok := guest.JSONString(data, k)
			if ws, isStr := want.(string); isStr != sok || (sok && string(s) != ws) {
				t.Fatalf("key %q: JSONString = %q, %v; encoding/json: %#v", k, s, sok, want)
			}
			i, iok := guest.JSONInt(data, k)
			wi, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if (err == nil) != iok || (iok && i != wi) {
				t.Fatalf("key %q: JSONInt = %d, %v; strconv on %q: %d, %v", k, i, iok, v, wi, err)
			}
			fl, fok := guest.JSONFloat(data, k)
			if wf, isNum := want.(float64); isNum != fok || (fok && fl != wf) {
				t.Fatalf("key %q: JSONFloat = %v, %v; encoding/json: %#v", k, fl, fok, want)
			}
			bv, bok := guest.JSONBool(data, k)
			if wb, isBool := want.(bool); isBool != bok || (bok && bv != wb) {
				t.Fatalf("key %q: JSONBool = %v, %v; encoding/json: %#v", k, bv, bok, want)
			}
		}
	})
}

// topLevel returns the keys of a JSON object in order with their raw values, or false when data
// is not an object, a number does not fit a float64, or a key repeats.
func topLevel(data []byte) ([]string, map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil || m == nil {
		return nil, nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return nil, nil, false
		}
	}
	if len(keys) != len(m) {
		return nil, nil, false // duplicate keys
	}
	for _, k := range keys {
		var v any
		if json.Unmarshal(m[k], &v) != nil { // e.g. a number out of float64 range
			return nil, nil, false
		}
	}
	return keys, m, true
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// FuzzObject checks that Object writes valid JSON that encoding/json reads back as the input.
func FuzzObject(f *testing.F) {
	f.Add("origin", "DTW", int64(66), 1.5)
	f.Add("k\"\\\n", "a\xff\x00é😀\u2028", int64(math.MinInt64), math.Inf(1))
	f.Fuzz(func(t *testing.T, k, s string, i int64, fl float64) {
		o := guest.NewObject(nil)
		o.Str("s", s).Int("i", i).Float("f", fl).Str("k", k)
		doc := o.Bytes()
		// Int writes in place when the buffer has room, else appends: the same bytes.
		roomy, tight := guest.NewObject(make([]byte, 0, 4096)), guest.NewObject(nil)
		roomy.Int(k, i).Int("i", -i)
		tight.Int(k, i).Int("i", -i)
		if a, b := roomy.Bytes(), tight.Bytes(); !bytes.Equal(a, b) {
			t.Fatalf("Int in place %q, appended %q", a, b)
		}
		var got struct {
			S string   `json:"s"`
			I int64    `json:"i"`
			F *float64 `json:"f"`
			K string   `json:"k"`
		}
		if err := json.Unmarshal(doc, &got); err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if got.S != strings.ToValidUTF8(s, "\ufffd") && got.S != string([]rune(s)) {
			t.Fatalf("s: got %q from %q", got.S, s)
		}
		if got.I != i {
			t.Fatalf("i: got %d want %d", got.I, i)
		}
		if math.IsNaN(fl) || math.IsInf(fl, 0) {
			if got.F != nil {
				t.Fatalf("f: got %v for %v, want null", *got.F, fl)
			}
		} else if got.F == nil || *got.F != fl {
			t.Fatalf("f: got %v want %v", got.F, fl)
		}
		if v, ok := guest.JSONString(doc, "k"); !ok || string(v) != string([]rune(k)) {
			t.Fatalf("JSONString k = %q, %v; want %q", v, ok, string([]rune(k)))
		}
	})
}

// FuzzJSONFields checks that one JSONFields scan agrees with the one-field accessors on any input.
func FuzzJSONFields(f *testing.F) {
	for _, s := range []string{flight, `{}`, `{"a":1,"a":2,"b":"x"}`, `{"a":1,"b":`, `{"b":"\u0041","a":[1,{"a":2}],"c":"\ud800"}`,
		`{"a":1 "b":2}`, `{"c":true,"a\u0062":null}`, ``} {
		f.Add([]byte(s), "a", "b", "ab")
	}
	// Keys and values around the eight- and sixteen-byte steps of Scan's fast paths, keys
	// sharing a slot (same length, first and last bytes), negative and long integers.
	f.Add([]byte(`{"abcdefgh":-12,"abcdefghi":"abcdefghijklmnopqrstuvwxyz","abcdefghijklmnopq":123456789012}`), "abcdefgh", "abcdefghi", "abcdefghijklmnopq")
	f.Add([]byte(`{"axxb":1,"ayyb":-0,"azzb":-7,"":"","e\u0061":2}`), "ayyb", "azzb", "")
	f.Add([]byte(`{"a":0 ,"b" : "x"	,"ab":-1}`), "a", "b", "ab")
	f.Add([]byte(`{"k":12345678,"l":1.5e3,"m":-9223372036854775808,"n":"\u00e9tat\n"}`), "k", "m", "n")
	f.Fuzz(func(t *testing.T, data []byte, k0, k1, k2 string) {
		keys := []string{k0}
		for _, k := range []string{k1, k2} {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		jf := guest.NewJSONFields(keys...)
		jf.Scan([]byte(`{"` + k0 + `":"stale"}`)) // the previous scan must not leak
		jf.Scan(data)
		for i, k := range keys {
			raw, ok := jf.Raw(i)
			wraw, wok := guest.JSONRaw(data, k)
			if ok != wok || !bytes.Equal(raw, wraw) {
				t.Fatalf("key %q: Raw = %q, %v; JSONRaw = %q, %v", k, raw, ok, wraw, wok)
			}
			n, ok := jf.Int(i)
			wn, wok := guest.JSONInt(data, k)
			if ok != wok || n != wn {
				t.Fatalf("key %q: Int = %d, %v; JSONInt = %d, %v", k, n, ok, wn, wok)
			}
			s, ok := jf.String(i)
			ws, wok := guest.JSONString(data, k)
			if ok != wok || !bytes.Equal(s, ws) {
				t.Fatalf("key %q: String = %q, %v; JSONString = %q, %v", k, s, ok, ws, wok)
			}
		}
	})
}

func TestJSONFields(t *testing.T) {
	jf := guest.NewJSONFields("delay", "distance", "origin", "destination", "missing")
	jf.Scan([]byte(flight))
	if v, ok := jf.Int(0); !ok || v != 66 {
		t.Errorf("delay = %d, %v", v, ok)
	}
	if v, ok := jf.Int(1); !ok || v != 1750 {
		t.Errorf("distance = %d, %v", v, ok)
	}
	if v, ok := jf.String(3); !ok || string(v) != "LAS" {
		t.Errorf("destination = %q, %v", v, ok)
	}
	if _, ok := jf.Raw(4); ok {
		t.Error("missing field found")
	}
	if _, ok := jf.String(0); ok {
		t.Error("an integer read as a string")
	}
	// Whitespace before a separator is not part of the value.
	ws := guest.NewJSONFields("a", "b")
	ws.Scan([]byte(`{"a":0 ,"b" : "x"` + "\t}"))
	if raw, ok := ws.Raw(0); !ok || string(raw) != "0" {
		t.Errorf("a = %q, %v; want 0", raw, ok)
	}
	if v, ok := ws.String(1); !ok || string(v) != "x" {
		t.Errorf("b = %q, %v; want x", v, ok)
	}
	data := []byte(flight)
	if n := testing.AllocsPerRun(100, func() { jf.Scan(data); jf.String(2) }); n != 0 {
		t.Errorf("Scan allocates %v times", n)
	}
	defer func() {
		if recover() == nil {
			t.Error("repeated key did not panic")
		}
	}()
	guest.NewJSONFields("a", "a")
}

// flightEvent is a flights-20k record, the event data of the flightdelays example.
var flightEvent = []byte(`{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`)

// BenchmarkJSONFieldsScan reads the four fields flightdelays reads.
func BenchmarkJSONFieldsScan(b *testing.B) {
	f := guest.NewJSONFields("delay", "distance", "origin", "destination")
	b.SetBytes(int64(len(flightEvent)))
	for b.Loop() {
		f.Scan(flightEvent)
		if _, ok := f.Int(0); !ok {
			b.Fatal("no delay")
		}
	}
}

// BenchmarkJSONIntDecode decodes a four-field document with one JSONInt per field, as the
// examples' Decode methods do.
func BenchmarkJSONIntDecode(b *testing.B) {
	doc := []byte(`{"flights":1234,"delayed":321,"total_delay":45678,"max_delay":987}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		for _, k := range []string{"flights", "delayed", "total_delay", "max_delay"} {
			if _, ok := guest.JSONInt(doc, k); !ok {
				b.Fatal(k)
			}
		}
	}
}

// BenchmarkObject encodes a four-field document.
func BenchmarkObject(b *testing.B) {
	var buf []byte
	for b.Loop() {
		o := guest.NewObject(buf[:0])
		o.Int("flights", 1234).Int("delayed", 321).Int("total_delay", 45678).Int("max_delay", 987)
		buf = o.Bytes()
	}
}

// TestJSONFieldsManyKeys: every key of a JSONFields of hundreds of keys is found, whatever its
// index (the slot table holds small indexes only) and however many keys share its slot.
func TestJSONFieldsManyKeys(t *testing.T) {
	var keys []string
	for i := range 600 {
		k := fmt.Sprintf("a%03db", i) // one slot for all of these: same length, first and last bytes
		if i%128 == 127 || i%256 == 255 {
			k = fmt.Sprintf("z%d", i) // alone in its slot
		}
		keys = append(keys, k)
	}
	o := guest.NewObject(nil)
	for i := len(keys) - 1; i >= 0; i-- {
		o.Int(keys[i], int64(i))
	}
	data := o.Bytes()
	jf := guest.NewJSONFields(keys...)
	jf.Scan(data)
	for i, k := range keys {
		if v, ok := jf.Int(i); !ok || v != int64(i) {
			t.Errorf("key %d %q: Int = %d, %v; want %d", i, k, v, ok, i)
		}
	}
}
