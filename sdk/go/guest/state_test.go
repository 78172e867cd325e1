//go:build !wasip1

package guest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/projhost/projhost/sdk/go/guest"
)

// Doc is the document of the State tests and benchmarks: {"v":N}.
type Doc struct{ V int64 }

func (d *Doc) Decode(doc []byte) error {
	var ok bool
	if d.V, ok = guest.JSONInt(doc, "v"); !ok {
		return errors.New(`no integer "v"`)
	}
	return nil
}

func (d *Doc) Append(dst []byte) []byte {
	o := guest.NewObject(dst)
	o.Int("v", d.V)
	return o.Bytes()
}

func newDocs(coll string) *guest.State[Doc] {
	return guest.NewState(coll, (*Doc).Decode, (*Doc).Append)
}

func TestState(t *testing.T) {
	a, b2, c := newDocs("a"), newDocs("b"), newDocs("c")
	tests := []batchCase{
		{
			name: "a stored document is decoded at its first Get, changed in place and written once",
			seed: map[string]string{"a/k": `{"v":40}`},
			h: func(b *guest.Batch) error {
				for b.Next() {
					d, found := a.Get(b, []byte("k"))
					if !found {
						return errors.New("stored document not found")
					}
					d.V++
				}
				return nil
			},
			want: []mut{{"put", "a", "k", `{"v":43}`}},
		},
		{
			name: "a missing document is a zero value, found only from its second Get on",
			h: func(b *guest.Batch) error {
				var log []string
				for b.Next() {
					d, found := a.Get(b, b.Event().PartitionKey)
					log = append(log, fmt.Sprintf("%s:%d/%v", b.Event().PartitionKey, d.V, found))
					d.V += 10
				}
				d, _ := a.GetString(b, "a")
				log = append(log, fmt.Sprintf("a:%d", d.V))
				b.Put("log", []byte("x"), strDoc(strings.Join(log, " ")))
				return nil
			},
			want: []mut{{"put", "a", "a", `{"v":20}`}, {"put", "a", "b", `{"v":10}`}, {"put", "log", "x", `{"v":"a:0/false b:0/false a:10/true a:20"}`}},
		},
		{
			name: "documents are written in first-touch order across States and plain writes",
			seed: map[string]string{"c/1": `{"v":1}`},
			h: func(b *guest.Batch) error {
				a.Get(b, []byte("z"))
				b.Put("p", []byte("k"), []byte(`{"p":1}`))
				b2.Get(b, []byte("y"))
				b.Read("q", []byte("unwritten")) // touched, never written: not in the output
				c.Get(b, []byte("1"))
				a.Get(b, []byte("x"))
				a.Get(b, []byte("z"))
				return nil
			},
			want: []mut{{"put", "a", "z", `{"v":0}`}, {"put", "p", "k", `{"p":1}`}, {"put", "b", "y", `{"v":0}`}, {"put", "c", "1", `{"v":1}`}, {"put", "a", "x", `{"v":0}`}},
		},
		{
			name: "Get after the batch's own Put decodes the Put; the State's value wins over a later Put or Delete",
			h: func(b *guest.Batch) error {
				b.Put("a", []byte("k"), []byte(`{"v":7}`))
				d, found := a.Get(b, []byte("k"))
				if !found || d.V != 7 {
					return fmt.Errorf("Get after Put: %d %v", d.V, found)
				}
				d.V = 8
				b.Put("a", []byte("k"), []byte(`{"v":100}`))
				b.Delete("a", []byte("k"))
				return nil
			},
			want: []mut{{"put", "a", "k", `{"v":8}`}},
		},
		{
			name: "Read of a key a State holds returns the document as it was",
			seed: map[string]string{"a/k": `{"v":1}`},
			h: func(b *guest.Batch) error {
				d, _ := a.Get(b, []byte("k"))
				d.V = 2
				doc, ok := b.Read("a", []byte("k"))
				b.Put("log", []byte("x"), strDoc(fmt.Sprintf("%s %v", doc, ok)))
				return nil
			},
			want: []mut{{"put", "a", "k", `{"v":2}`}, {"put", "log", "x", `{"v":"{\"v\":1} true"}`}},
		},
		{
			name: "a handler error writes nothing",
			h: func(b *guest.Batch) error {
				d, _ := a.Get(b, []byte("k"))
				d.V = 1
				return errors.New("event seq 7: bad")
			},
			wantErr: "event seq 7: bad",
		},
		{
			name:    "a stored document that does not decode fails the batch",
			seed:    map[string]string{"a/k": `{"v":"x"}`},
			h:       func(b *guest.Batch) error { a.Get(b, []byte("k")); return nil },
			wantErr: `guest: stored document a/k does not decode: no integer "v" (document: {"v":"x"})`,
		},
		{
			name: "Err reports a failed decode at once, and the batch fails whatever the handler returns",
			seed: map[string]string{"a/k": `[]`},
			h: func(b *guest.Batch) error {
				if b.Err() != nil {
					return errors.New("Err before any misuse")
				}
				d, found := a.Get(b, []byte("k"))
				if b.Err() == nil || !found || d == nil {
					return errors.New("Err is nil after a failed decode")
				}
				return nil
			},
			wantErr: "stored document a/k does not decode",
		},
		{
			name:    "an empty key fails the batch",
			h:       func(b *guest.Batch) error { d, _ := a.Get(b, nil); d.V = 1; return nil },
			wantErr: "guest: collection a: invalid key",
		},
		{
			name:    "a key with NUL fails the batch",
			h:       func(b *guest.Batch) error { a.GetString(b, "x\x00y"); return nil },
			wantErr: "invalid key",
		},
		{
			name:    "an invalid collection name fails the batch",
			h:       func(b *guest.Batch) error { d, _ := newDocs("a/b").Get(b, []byte("k")); d.V = 1; return nil },
			wantErr: `invalid collection name "a/b"`,
		},
		{
			name: "an encoder writing something else than an object fails the batch",
			h: func(b *guest.Batch) error {
				guest.NewState("bad", (*Doc).Decode, func(d *Doc, dst []byte) []byte { return append(dst, "[1]"...) }).Get(b, []byte("k"))
				return nil
			},
			wantErr: "guest: bad/k: encoded document is not a JSON object",
		},
		{
			name: "an encoded document over 256 KiB fails the batch",
			h: func(b *guest.Batch) error {
				big := func(d *Doc, dst []byte) []byte {
					o := guest.NewObject(dst)
					o.Str("x", strings.Repeat("a", 256<<10))
					return o.Bytes()
				}
				guest.NewState("big", (*Doc).Decode, big).Get(b, []byte("k"))
				return nil
			},
			wantErr: "encoded document of 262152 bytes exceeds 262144",
		},
		{
			name: "two States of one collection cannot hold one key",
			h: func(b *guest.Batch) error {
				a.Get(b, []byte("k"))
				newDocs("a").Get(b, []byte("k"))
				return nil
			},
			wantErr: "guest: a/k is held by two States in one batch",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, "s", "a", "b", "a") })
	}
}

// TestStatePointersStay: a value's pointer keeps pointing at it however many documents the batch
// touches after it (values live in pages that never move).
func TestStatePointersStay(t *testing.T) {
	docs := newDocs("d")
	const keys = 1000
	n := guest.NewNative(func(b *guest.Batch) error {
		ptrs := make([]*Doc, keys)
		for i := range ptrs {
			ptrs[i], _ = docs.GetString(b, fmt.Sprint(i))
		}
		for i, p := range ptrs {
			p.V = int64(i * i)
			if q, _ := docs.GetString(b, fmt.Sprint(i)); q != p {
				return fmt.Errorf("key %d: second Get returned another pointer", i)
			}
		}
		return nil
	})
	ms, err := n.Run("s", events("a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != keys {
		t.Fatalf("%d mutations, want %d", len(ms), keys)
	}
	for i, m := range ms {
		if want := fmt.Sprintf(`d/%d {"v":%d}`, i, i*i); fmt.Sprintf("%s/%s %s", m.Collection, m.Key, m.Doc) != want {
			t.Fatalf("mutation %d = %s/%s %s, want %s", i, m.Collection, m.Key, m.Doc, want)
		}
	}
}

// TestStateAcrossBatches: each batch starts from the read model (the values of the batch before
// are gone), after a failed batch too, and two Natives may take turns with one State.
func TestStateAcrossBatches(t *testing.T) {
	sums := newDocs("sums")
	fail := false
	h := func(b *guest.Batch) error {
		for b.Next() {
			s, _ := sums.Get(b, b.Event().PartitionKey)
			s.V++
		}
		if fail {
			return errors.New("failed on purpose")
		}
		return nil
	}
	n1, n2 := guest.NewNative(h), guest.NewNative(h)
	n2.Set("sums", "a", []byte(`{"v":100}`))
	steps := []struct {
		n    *guest.Native
		keys []string
		fail bool
	}{
		{n1, []string{"a", "b", "a"}, false},
		{n2, []string{"a"}, false},
		{n1, []string{"a", "a"}, true},
		{n1, []string{"b", "a"}, false},
		{n2, []string{"b"}, false},
	}
	for i, s := range steps {
		fail = s.fail
		_, err := s.n.Run("s", events(s.keys...))
		if (err != nil) != s.fail {
			t.Fatalf("step %d: err = %v", i, err)
		}
	}
	for _, c := range []struct {
		n          *guest.Native
		key, want  string
		wantExists bool
	}{
		{n1, "a", `{"v":3}`, true}, {n1, "b", `{"v":2}`, true},
		{n2, "a", `{"v":101}`, true}, {n2, "b", `{"v":1}`, true},
	} {
		if got, ok := c.n.Get("sums", c.key); ok != c.wantExists || string(got) != c.want {
			t.Errorf("sums/%s = %s %v, want %s", c.key, got, ok, c.want)
		}
	}
}

// TestStateZeroAllocSteadyState: once its batches and documents stop growing, a State handler
// allocates nothing per batch (so nothing per event), composite keys included. (A document that
// grows past its buffer's capacity costs an allocation: rare, as buffers grow by doubling.)
func TestStateZeroAllocSteadyState(t *testing.T) {
	sums := newDocs("sums")
	pairs := newDocs("pairs")
	var key []byte
	n := guest.NewNative(func(b *guest.Batch) error {
		for b.Next() {
			ev := b.Event()
			s, _ := sums.Get(b, ev.PartitionKey)
			s.V = int64(len(ev.Data))
			key = append(append(append(key[:0], ev.PartitionKey...), '-'), ev.Seq...)
			p, _ := pairs.Get(b, key)
			p.V = int64(len(key))
		}
		return nil
	}, guest.WithDocValidation(false))
	evs := benchEvents(500, 50)
	if _, err := n.Run("s", evs); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(20, func() { n.Run("s", evs) }); allocs != 0 {
		t.Fatalf("%.1f allocations per batch of %d events in steady state, want 0", allocs, len(evs))
	}
}
