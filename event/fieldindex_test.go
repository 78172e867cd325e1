package event

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestIndexFields: the spans of the names in a table of documents, and false for what the
// document rule refuses.
func TestIndexFields(t *testing.T) {
	names := []string{"delay", "origin", "é", "nested", "missing"}
	type want struct {
		text    string // the value's JSON text; "" = absent
		escaped bool
	}
	tests := []struct {
		name string
		doc  string
		ok   bool
		want []want // per name, when ok
	}{
		{"flight", `{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`, true,
			[]want{{text: "66"}, {text: `"DTW"`}, {}, {}, {}}},
		{"white space", " \n{ \"delay\" : -5 ,\t\"origin\":\"A\" }\r\n", true,
			[]want{{text: "-5"}, {text: `"A"`}, {}, {}, {}}},
		{"escaped value", `{"origin":"O\"Hare","delay":1.5e3}`, true,
			[]want{{text: "1.5e3"}, {text: `"O\"Hare"`, escaped: true}, {}, {}, {}}},
		{"escaped key matches unescaped name", `{"\u00e9":true,"dela\u0079":null}`, true,
			[]want{{text: "null"}, {}, {text: "true"}, {}, {}}},
		{"nested members are not top-level", `{"nested":{"delay":1,"origin":[1,{"é":2}]}}`, true,
			[]want{{}, {}, {}, {text: `{"delay":1,"origin":[1,{"é":2}]}`}, {}}},
		{"unicode value", `{"origin":"Zürich ✈"}`, true,
			[]want{{}, {text: `"Zürich ✈"`}, {}, {}, {}}},
		{"empty object", `{}`, true, []want{{}, {}, {}, {}, {}}},
		{"duplicate key", `{"delay":1,"delay":2}`, false, nil},
		{"duplicate nested key", `{"delay":1,"x":{"a":1,"a":2}}`, false, nil},
		{"array", `[{"delay":1}]`, false, nil},
		{"not JSON", `delay=1`, false, nil},
		{"truncated", `{"delay":1,"origin":"DT`, false, nil},
		{"trailing bytes", `{"delay":1} x`, false, nil},
		{"invalid UTF-8", "{\"origin\":\"\xff\"}", false, nil},
		{"empty key", `{"":1}`, false, nil},
		{"number out of range", `{"delay":1e200}`, false, nil},
		{"too deep", `{"nested":` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `}`, false, nil},
		{"empty", ``, false, nil},
		{"longest key", `{"` + strings.Repeat("k", MaxFieldNameBytes) + `":1,"delay":2}`, true,
			[]want{{text: "2"}, {}, {}, {}, {}}},
		{"key too long", `{"` + strings.Repeat("k", MaxFieldNameBytes+1) + `":1,"delay":2}`, false, nil},
	}
	spans := make([]FieldSpan, len(names))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok := IndexFields([]byte(tt.doc), names, spans)
			if ok != tt.ok {
				t.Fatalf("IndexFields(%q) = %v, want %v", tt.doc, ok, tt.ok)
			}
			if (CheckDoc([]byte(tt.doc)) == nil) != ok {
				t.Fatalf("IndexFields(%q) = %v disagrees with CheckDoc", tt.doc, ok)
			}
			if !ok {
				return
			}
			for i, w := range tt.want {
				sp := spans[i]
				if w.text == "" {
					if sp.Start != -1 {
						t.Errorf("%s: span %+v (%q), want absent", names[i], sp, tt.doc[sp.Start:sp.End])
					}
					continue
				}
				if sp.Start < 0 || tt.doc[sp.Start:sp.End] != w.text || sp.Escaped != w.escaped {
					t.Errorf("%s: span %+v, want %q escaped %v", names[i], sp, w.text, w.escaped)
				}
			}
		})
	}
}

// TestIndexFieldsDoesNotAllocate: a flight record is indexed without allocating.
func TestIndexFieldsDoesNotAllocate(t *testing.T) {
	doc := []byte(`{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`)
	names := []string{"delay", "distance", "origin", "destination"}
	spans := make([]FieldSpan, len(names))
	if n := testing.AllocsPerRun(100, func() { IndexFields(doc, names, spans) }); n != 0 {
		t.Fatalf("IndexFields allocates %v times per call, want 0", n)
	}
}

// FuzzIndexFields: IndexFields takes exactly what CheckDoc takes, and then each name's span is
// the raw text encoding/json finds for that top-level key (absent when it finds none), escaped
// exactly when that text is a string with a backslash. The names are the document's own
// top-level keys plus one it lacks. Seeds: testdata/fuzz/FuzzCheckDoc (shared).
func FuzzIndexFields(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzCheckDoc", "*"))
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		// The corpus files are in go test fuzz v1 encoding: one []byte("...") line.
		if doc, ok := corpusBytes(b); ok {
			f.Add(doc)
		}
	}
	f.Add([]byte(`{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`))
	f.Add([]byte(`{"a\u0062":"x\"y","c":[1,{"ab":2}]}`))
	for _, d := range flatShapes {
		f.Add([]byte(d.doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var raw map[string]json.RawMessage
		names := []string{"not a key of the fuzzed document\u2603"}
		if json.Unmarshal(doc, &raw) == nil {
			for k := range raw {
				if k != names[0] && len(names) < 64 {
					names = append(names, k)
				}
			}
		}
		spans := make([]FieldSpan, len(names))
		ok := IndexFields(doc, names, spans)
		if ok != (CheckDoc(doc) == nil) {
			t.Fatalf("IndexFields(%q) = %v, CheckDoc says %v", doc, ok, CheckDoc(doc))
		}
		if !ok {
			return
		}
		for i, n := range names {
			sp := spans[i]
			r, has := raw[n]
			if !has {
				if sp.Start != -1 {
					t.Fatalf("%q: %q has a span %+v, encoding/json finds no such key", doc, n, sp)
				}
				continue
			}
			if sp.Start < 0 || !bytes.Equal(doc[sp.Start:sp.End], r) {
				t.Fatalf("%q: %q spans %+v, encoding/json finds %q", doc, n, sp, r)
			}
			esc := r[0] == '"' && bytes.IndexByte(r, '\\') >= 0
			if sp.Escaped != esc {
				t.Fatalf("%q: %q escaped %v, want %v", doc, n, sp.Escaped, esc)
			}
		}
	})
}

// corpusBytes decodes a go test fuzz v1 corpus file holding one []byte value.
func corpusBytes(b []byte) ([]byte, bool) {
	lines := strings.SplitN(string(b), "\n", 3)
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "[]byte(") {
		return nil, false
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		return nil, false
	}
	return []byte(s), true
}

// BenchmarkIndexFields: the host's cost of indexing one flight record for flightdelays's four
// fields (ns/op per event), next to checking it against the document rule alone.
func BenchmarkIndexFields(b *testing.B) {
	doc := []byte(`{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`)
	names := []string{"delay", "distance", "origin", "destination"}
	spans := make([]FieldSpan, len(names))
	b.Run("IndexFields", func(b *testing.B) {
		for b.Loop() {
			IndexFields(doc, names, spans)
		}
	})
	b.Run("CheckDoc", func(b *testing.B) {
		for b.Loop() {
			_ = CheckDoc(doc)
		}
	})
}

// flatShapes are documents at the edge of indexFlat's shape, and whether it takes them (the
// full scanner decides the rest).
var flatShapes = []struct {
	doc  string
	flat bool
}{
	{`{"a":1,"b":"x","c":true,"d":false,"e":null,"f":-0,"g":""}`, true},
	{`{}`, true},
	{`{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`, true},
	{`{"a":"` + "\x7f~ " + `"}`, true},
	{`{"a":` + strings.Repeat("9", MaxNumberDigits) + `}`, true},
	{`{"a":` + strings.Repeat("9", MaxNumberDigits+1) + `}`, false},
	{`{"a":01}`, false},
	{`{"a":-}`, false},
	{`{"a":1.5}`, false},
	{`{"a":1e3}`, false},
	{`{"a":1,"a":2}`, false},
	{`{"":1}`, false},
	{`{"a":"\u0041"}`, false},
	{`{"a":"é"}`, false},
	{`{"a": 1}`, false},
	{`{"a":[1]}`, false},
	{`{"a":tru}`, false},
	{`{"a":1}x`, false},
	{`{"a":1`, false},
	{`{"a":"` + "\x01" + `"}`, false},
	{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"ka":10,"kb":11,"kc":12,"kd":13,"ke":14,"kf":15}`, true},
	{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"ka":10,"kb":11,"kc":12,"kd":13,"ke":14,"kf":15,"kg":16}`, false},
}

// TestIndexFlat: the fast path takes the flat shapes it is meant for (so flight records do not
// go through the full scanner) and leaves everything else to it; IndexFields agrees with
// CheckDoc on all of them either way.
func TestIndexFlat(t *testing.T) {
	names := []string{"a", "delay", "kf"}
	spans := make([]FieldSpan, len(names))
	for _, c := range flatShapes {
		doc := []byte(c.doc)
		for i := range spans {
			spans[i] = FieldSpan{Start: -1, End: -1}
		}
		if got := indexFlat(doc, names, spans); got != c.flat {
			t.Errorf("indexFlat(%q) = %v, want %v", doc, got, c.flat)
		}
		if IndexFields(doc, names, spans) != (CheckDoc(doc) == nil) {
			t.Errorf("IndexFields(%q) disagrees with CheckDoc (%v)", doc, CheckDoc(doc))
		}
	}
}
