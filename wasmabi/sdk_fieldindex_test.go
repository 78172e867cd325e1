package wasmabi_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/wasmabi"
)

// fieldAnswers is what the accessors of f tell of its keys 0..n-1, a line per key.
func fieldAnswers(f *guest.JSONFields, n int) string {
	var b strings.Builder
	for i := range n {
		raw, rok := f.Raw(i)
		v, iok := f.Int(i)
		s, sok := f.String(i)
		fmt.Fprintf(&b, "%d: raw %q %v, int %d %v, string %q %v\n", i, raw, rok, v, iok, s, sok)
	}
	return b.String()
}

// FuzzSDKFieldIndex: the Go SDK's JSONFields reading the field index this host encodes
// (event.IndexFields, AppendIndexedBatch; ABI.md §2.1) gives the answers of its own scan of the
// data, on any data and keys: the host indexes only data on which the two agree.
func FuzzSDKFieldIndex(f *testing.F) {
	for _, d := range []string{
		`{"date":"2001/01/01 00:47","delay":66,"distance":1750,"origin":"DTW","destination":"LAS"}`,
		`{"d\u0065lay":-3,"origin":"D\u0054W","x":[1,{"delay":2}]}`,
		` { "delay" : 1.5e3 , "origin" : null } `,
		`{"delay":1,"delay":2}`,
		`{"\ud800":1,"a\u0000":"\ud83d\ude00"}`,
		"{\"origin\":\"a\xffb\"}",
		`[1]`,
		`{"delay":1,"x":}`,
	} {
		f.Add([]byte(d), "delay", "origin")
	}
	f.Add([]byte(`{"\ud800":1,"\u00e9":2}`), "\ufffd", "é")
	f.Fuzz(func(t *testing.T, data []byte, k1, k2 string) {
		if k1 == k2 {
			return
		}
		fs := guest.NewJSONFields(k1, k2)
		fs.Scan(data) // outside a batch: a scan
		want := fieldAnswers(fs, 2)

		var names []string // registered, by slot, as projhost.field does (ABI.md §1)
		field := func(name []byte) int {
			for i, n := range names {
				if n == string(name) {
					return i
				}
			}
			if len(name) == 0 || len(name) > wasmabi.MaxFieldNameLen || !utf8.Valid(name) {
				return -1
			}
			names = append(names, string(name))
			return len(names) - 1
		}
		var got string
		n := guest.NewNative(func(b *guest.Batch) error {
			for b.Next() {
				fs.Scan(b.Event().Data)
				got = fieldAnswers(fs, 2)
			}
			return nil
		})
		ev := []wasmabi.Event{{Seq: []byte("1"), Data: data}}
		for batch := range 2 { // the keys are registered during the first batch, indexed in the second
			ev[0].Index = nil
			spans := make([]event.FieldSpan, len(names))
			if len(names) > 0 && event.IndexFields(data, names, spans) {
				for _, sp := range spans {
					ev[0].Index = wasmabi.AppendFieldEntry(ev[0].Index, sp.Start, sp.End, sp.Escaped)
				}
			}
			if batch == 1 && len(names) == 2 && ev[0].Index == nil && event.CheckDoc(data) == nil {
				t.Fatalf("the host did not index a document that follows the rule: %q", data)
			}
			b, err := wasmabi.AppendIndexedBatch(nil, "s", ev, len(names))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := n.RunBatchImports(b, guest.Imports{Field: field}); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("batch %d (index % x): got\n%s\nwant (scanned)\n%s", batch, ev[0].Index, got, want)
			}
		}
	})
}
