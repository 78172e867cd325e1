//go:build !wasip1

package guest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/sdk/go/internal/abi"
)

// fieldHost is the host's side of the field index (ABI.md §2.1) for tests: Field registers names
// as projhost.field does, and batch encodes events with the index of the names registered so far,
// finding the values with encoding/json (independently of the SDK's scanner).
type fieldHost struct {
	names []string // registered, by slot
	limit int      // names it takes (0: abi.MaxIndexedFields)
	calls []string // the names Field was called with, in order
}

func (h *fieldHost) Field(name []byte) int {
	h.calls = append(h.calls, string(name))
	if i := slices.Index(h.names, string(name)); i >= 0 {
		return i
	}
	limit := h.limit
	if limit == 0 {
		limit = abi.MaxIndexedFields
	}
	if len(name) == 0 || len(name) > 255 || !utf8.Valid(name) || len(h.names) == limit {
		return -1
	}
	h.names = append(h.names, string(name))
	return len(h.names) - 1
}

// batch encodes evs with the index of h's names (no index before the first name).
func (h *fieldHost) batch(t testing.TB, evs []guest.Event) []byte {
	t.Helper()
	b, err := abi.AppendIndexedBatch(nil, "shard", indexed(evs, h.names), len(h.names))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// indexed returns a copy of evs with the index of names.
func indexed(evs []guest.Event, names []string) []guest.Event {
	evs = slices.Clone(evs)
	for i := range evs {
		evs[i].Index = indexOf(evs[i].Data, names)
	}
	return evs
}

// indexOf returns the index entries of names in data, or nil when the host does not index data:
// when it is not one JSON object of valid UTF-8 with unique top-level keys (the parts of the
// document rule the tests' datas break).
func indexOf(data []byte, names []string) []byte {
	if !utf8.Valid(data) || !json.Valid(data) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return nil
	}
	type span struct {
		start, end int
		escaped    bool
	}
	found := map[string]span{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil
		}
		if _, dup := found[key]; dup {
			return nil
		}
		end := int(dec.InputOffset())
		found[key] = span{end - len(raw), end, raw[0] == '"' && bytes.IndexByte(raw, '\\') >= 0}
	}
	index := []byte{}
	for _, name := range names {
		sp, ok := found[name]
		if !ok {
			sp.start = -1
		}
		index = abi.AppendFieldEntry(index, sp.start, sp.end, sp.escaped)
	}
	return index
}

// answers is what the accessors of a JSONFields tell of every key, one line per key.
func answers(f *guest.JSONFields, keys int) string {
	var b strings.Builder
	for i := range keys {
		raw, rok := f.Raw(i)
		n, iok := f.Int(i)
		s, sok := f.String(i)
		fmt.Fprintf(&b, "%d: raw %q %v, int %d %v, string %q %v\n", i, raw, rok, n, iok, s, sok)
	}
	return b.String()
}

// fieldSets are JSONFields over the same events: the flightdelays keys, some of them again in
// another order with a key of their own, and one with an empty key, which cannot be registered.
func fieldSets() []*guest.JSONFields {
	return []*guest.JSONFields{
		guest.NewJSONFields("delay", "distance", "origin", "destination"),
		guest.NewJSONFields("origin", "delay", "note"),
		guest.NewJSONFields("", "delay"),
	}
}

// keyCounts are the numbers of keys of fieldSets.
var keyCounts = []int{4, 3, 2}

// scanHandler scans every event's data with every JSONFields of sets and appends their answers,
// one string per event, to got.
func scanHandler(sets []*guest.JSONFields, got *[]string) guest.Handler {
	return func(b *guest.Batch) error {
		for b.Next() {
			var s strings.Builder
			for i, f := range sets {
				f.Scan(b.Event().Data)
				s.WriteString(answers(f, keyCounts[i]))
			}
			*got = append(*got, s.String())
		}
		return nil
	}
}

// indexDatas are event datas for the field index tests: ones the host indexes and ones it does
// not (indexOf returns nil: they are scanned).
var indexDatas = []string{
	flight,
	`{"origin":"D\u0054W","delay":-3,"destination":"a\"b\\c","distance":0}`,     // escapes in values
	`{"d\u0065lay":7,"origin":"Zürich"}`,                                        // an escaped key; absent fields; UTF-8
	` { "delay" : 66 ,` + "\n\t" + `"origin":"SFO" } `,                          // whitespace everywhere
	`{"origin":{"delay":1},"delay":[1,{"x":"}"}],"note":null,"distance":1.5e3}`, // values of other kinds
	`{"":1,"delay":9223372036854775808,"destination":""}`,                       // the empty key, an int64 overflow, an empty string
	`{}`,
	`{"delay":1,"delay":2}`,               // not indexed: a duplicate key
	`[{"delay":1}]`,                       // not indexed: not an object
	`{"delay":1,"x":}`,                    // not indexed: a syntax error
	"{\"origin\":\"a\xffb\",\"delay\":5}", // not indexed: invalid UTF-8
	`delay=5`,
	``,
}

func indexEvents() []guest.Event {
	evs := make([]guest.Event, len(indexDatas))
	for i, d := range indexDatas {
		evs[i] = guest.Event{Seq: []byte(fmt.Sprint(i + 1)), Data: []byte(d)}
	}
	return evs
}

// scanned returns the answers of sets, of keys keys each, for every event of evs outside a batch,
// where JSONFields always scans.
func scanned(sets []*guest.JSONFields, keys []int, evs []guest.Event) []string {
	var want []string
	for _, ev := range evs {
		var s strings.Builder
		for i, f := range sets {
			f.Scan(ev.Data)
			s.WriteString(answers(f, keys[i]))
		}
		want = append(want, s.String())
	}
	return want
}

// TestFieldIndexSameAnswers: batches with a field index give every JSONFields the answers of its
// scan, for datas the host indexes and ones it does not, over three batches: the first without
// an index (the keys are registered during it), the next two with one. The index is used in them:
// TestFieldIndexUsed shows a wrong index changes the answers.
func TestFieldIndexSameAnswers(t *testing.T) {
	for _, limit := range []int{0, 1, 5} { // the host takes every name, only 1 (none of the sets is indexed), only 5
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			sets := fieldSets()
			evs := indexEvents()
			want := scanned(sets, keyCounts, evs)
			var got []string
			n := guest.NewNative(scanHandler(sets, &got))
			h := &fieldHost{limit: limit}
			for batch := range 3 {
				got = got[:0]
				if _, err := n.RunBatchImports(h.batch(t, evs), guest.Imports{Field: h.Field}); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("batch %d, data %q:\ngot\n%s\nwant (scanned)\n%s", batch, evs[i].Data, got[i], want[i])
					}
				}
			}
			wantNames := []string{"delay", "distance", "origin", "destination", "note"}
			if limit != 0 {
				wantNames = wantNames[:min(limit, len(wantNames))]
			}
			if !slices.Equal(h.names, wantNames) {
				t.Errorf("registered %q, want %q", h.names, wantNames)
			}
		})
	}
}

// wrongIndex encodes evs with an index of f fields whose every entry is the value of data's key
// "distance" (a deliberately wrong index: a JSONFields reading it answers distance's value for
// every key), events without that key not indexed.
func wrongIndex(t *testing.T, evs []guest.Event, f int) []byte {
	t.Helper()
	evs = slices.Clone(evs)
	for i, ev := range evs {
		if x := indexOf(ev.Data, []string{"distance"}); x != nil {
			if _, _, _, ok := abi.FieldEntry(x, 0); ok {
				evs[i].Index = bytes.Repeat(x, f)
			}
		}
	}
	b, err := abi.AppendIndexedBatch(nil, "shard", evs, f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFieldIndexUsed: Scan of an event's data reads the fields from the index, not from the data,
// once the keys are registered: a deliberately wrong index (every field at distance's value)
// changes the answers. That is what proves the index path is taken in TestFieldIndexSameAnswers.
// It is not taken before the keys are registered (a name registered during a batch is indexed
// from the next one), when the host refused a key, for data that is not the event's own slice,
// and after the Native ran a batch without a Field (the keys are registered again first).
func TestFieldIndexUsed(t *testing.T) {
	evs := []guest.Event{{Seq: []byte("1"), Data: []byte(flight)}}
	f := guest.NewJSONFields("delay", "distance", "origin")
	g := guest.NewJSONFields("origin", "extra")
	var got []string
	var copyToo bool // also Scan a copy of the data
	n := guest.NewNative(func(b *guest.Batch) error {
		for b.Next() {
			data := b.Event().Data
			if copyToo {
				data = bytes.Clone(data)
			}
			f.Scan(data)
			a := answers(f, 3)
			g.Scan(data)
			got = append(got, a+answers(g, 2))
		}
		return nil
	})
	rightF := "0: raw \"66\" true, int 66 true, string \"\" false\n" +
		"1: raw \"1750\" true, int 1750 true, string \"\" false\n" +
		"2: raw \"\\\"DTW\\\"\" true, int 0 false, string \"DTW\" true\n"
	rightG := "0: raw \"\\\"DTW\\\"\" true, int 0 false, string \"DTW\" true\n" +
		"1: raw \"\" false, int 0 false, string \"\" false\n"
	wrongF := "0: raw \"1750\" true, int 1750 true, string \"\" false\n" +
		"1: raw \"1750\" true, int 1750 true, string \"\" false\n" +
		"2: raw \"1750\" true, int 1750 true, string \"\" false\n"
	wrongG := "0: raw \"1750\" true, int 1750 true, string \"\" false\n" +
		"1: raw \"1750\" true, int 1750 true, string \"\" false\n"
	h := &fieldHost{}
	refuse := func(name []byte) int {
		if string(name) == "extra" {
			return -1
		}
		return h.Field(name)
	}
	for _, c := range []struct {
		name    string
		field   func([]byte) int // nil: RunBatch
		f       int              // fields of the wrong index
		copyToo bool
		want    string
	}{
		// The host encodes the first batch before any registration: no index. f registers its
		// keys (slots 0-2); the host refuses g's "extra".
		{"no index before the keys are registered", refuse, 0, false, rightF + rightG},
		{"f reads the index, g scans", refuse, 4, false, wrongF + rightG},
		{"a copy of the data is scanned", refuse, 4, true, rightF + rightG},
		{"an index of fewer fields than f's slots", refuse, 2, false, rightF + rightG},
		{"RunBatch: no Field, no index", nil, 4, false, rightF + rightG},
		// With a Field again, the keys are registered again: f's get their slots back (0-2)
		// and read this batch's index; g's "extra", registered now, is indexed from the next
		// batch.
		{"registered again during a batch of 3 fields", h.Field, 3, false, wrongF + rightG},
		{"both read the next batch's index", h.Field, 4, false, wrongF + wrongG},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, copyToo = got[:0], c.copyToo
			batch := wrongIndex(t, evs, c.f)
			var err error
			if c.field == nil {
				_, err = n.RunBatch(batch)
			} else {
				_, err = n.RunBatchImports(batch, guest.Imports{Field: c.field})
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
	if want := []string{"delay", "distance", "origin", "extra"}; !slices.Equal(h.names, want) {
		t.Errorf("registered %q, want %q", h.names, want)
	}
}

// TestNativeFieldOncePerName: a Native calls Field once per name, whichever JSONFields and batch
// ask for it; another Native (another instance) asks again, and a Native whose calls went without
// a Field asks again once they have one.
func TestNativeFieldOncePerName(t *testing.T) {
	sets := fieldSets()
	var got []string
	h := scanHandler(sets, &got)
	evs := indexEvents()
	want := []string{"delay", "distance", "origin", "destination", "note"} // "" is never asked
	for _, c := range []struct {
		name  string
		steps string // per batch: F with a Field, N with none
		calls int    // times want is asked for
	}{
		{"three batches", "FFF", 1},
		{"without a Field between", "FNF", 2},
		{"without a Field first", "NFF", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			host := &fieldHost{}
			n := guest.NewNative(h)
			for _, s := range c.steps {
				imp := guest.Imports{}
				if s == 'F' {
					imp.Field = host.Field
				}
				if _, err := n.RunBatchImports(host.batch(t, evs), imp); err != nil {
					t.Fatal(err)
				}
			}
			var w []string
			for range c.calls {
				w = append(w, want...)
			}
			if !slices.Equal(host.calls, w) {
				t.Errorf("Field called with %q, want %q", host.calls, w)
			}
			// Another Native of the same handler, and so of the same JSONFields, asks its own host.
			other := &fieldHost{}
			if _, err := guest.NewNative(h).RunBatchImports(other.batch(t, evs), guest.Imports{Field: other.Field}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(other.calls, want) {
				t.Errorf("another Native: Field called with %q, want %q", other.calls, want)
			}
		})
	}
}

// TestFieldIndexNativesAtOnce: Natives running batches at once in several goroutines give the
// answers of a scan (they neither register nor read the index then; -race checks they do not
// read each other's events).
func TestFieldIndexNativesAtOnce(t *testing.T) {
	evs := indexEvents()
	want := scanned(fieldSets(), keyCounts, evs)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got []string
			n := guest.NewNative(scanHandler(fieldSets(), &got))
			h := &fieldHost{}
			for range 50 {
				got = got[:0]
				batch, err := abi.AppendIndexedBatch(nil, "s", indexed(evs, h.names), len(h.names))
				if err == nil {
					_, err = n.RunBatchImports(batch, guest.Imports{Field: h.Field})
				}
				if err == nil && !slices.Equal(got, want) {
					err = fmt.Errorf("answers %q, want %q", got, want)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// FuzzFieldIndex: on any data and keys, a JSONFields reading the index of the data (as indexOf
// makes it; none for data the host does not index) answers as its scan does.
func FuzzFieldIndex(f *testing.F) {
	for _, d := range indexDatas {
		f.Add([]byte(d), "delay", "origin")
	}
	f.Add([]byte(`{"\ud800":1,"a\u0000":"\ud83d\ude00"}`), "\ufffd", "a\x00")
	f.Fuzz(func(t *testing.T, data []byte, k1, k2 string) {
		if k1 == k2 {
			return
		}
		fs := guest.NewJSONFields(k1, k2)
		want := scanned([]*guest.JSONFields{fs}, []int{2}, []guest.Event{{Data: data}})[0]
		var got string
		n := guest.NewNative(func(b *guest.Batch) error {
			for b.Next() {
				fs.Scan(b.Event().Data)
				got = answers(fs, 2)
			}
			return nil
		})
		h := &fieldHost{}
		ev := []guest.Event{{Seq: []byte("1"), Data: data}}
		for range 2 { // the keys are registered during the first batch and indexed in the second
			if _, err := n.RunBatchImports(h.batch(t, ev), guest.Imports{Field: h.Field}); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%d names registered: got\n%s\nwant (scanned)\n%s", len(h.names), got, want)
			}
		}
	})
}
