//go:build !wasip1

package guest_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/sdk/go/internal/abi"
)

func events(keys ...string) []guest.Event {
	evs := make([]guest.Event, len(keys))
	for i, k := range keys {
		evs[i] = guest.Event{Seq: []byte(fmt.Sprint(100 + i)), PartitionKey: []byte(k), ArrivalMs: int64(1000 + i), Data: []byte(`{"n":` + fmt.Sprint(i) + `}`)}
	}
	return evs
}

func strDoc(v string) []byte {
	o := guest.NewObject(nil)
	o.Str("v", v)
	return o.Bytes()
}

type mut struct{ op, coll, key, doc string }

func muts(ms []guest.Mutation) []mut {
	var out []mut
	for _, m := range ms {
		op := "put"
		if m.Op == guest.OpDelete {
			op = "del"
		}
		out = append(out, mut{op, string(m.Collection), string(m.Key), string(m.Doc)})
	}
	return out
}

// batchCase is a handler run natively over one batch: the read model it starts from, and the
// mutations it must emit or the failure it must end with.
type batchCase struct {
	name    string
	seed    map[string]string // "coll/key" -> doc
	h       guest.Handler
	want    []mut
	wantErr string
}

// run runs the case over a batch of events with keys.
func (tt batchCase) run(t *testing.T, shard string, keys ...string) {
	t.Helper()
	n := guest.NewNative(tt.h)
	for ck, d := range tt.seed {
		c, k, _ := strings.Cut(ck, "/")
		n.Set(c, k, []byte(d))
	}
	ms, err := n.Run(shard, events(keys...))
	if tt.wantErr != "" {
		if !errors.Is(err, guest.ErrHandlerFailed) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Fatalf("err = %v, want ErrHandlerFailed containing %q", err, tt.wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := muts(ms); fmt.Sprint(got) != fmt.Sprint(tt.want) {
		t.Fatalf("mutations\n got %v\nwant %v", got, tt.want)
	}
}

func TestNativeBatch(t *testing.T) {
	big := `{"x":"` + strings.Repeat("a", 10000) + `"}`
	tests := []batchCase{
		{
			name: "events are decoded in order with shard id",
			h: func(b *guest.Batch) error {
				if string(b.ShardID()) != "shard-7" || b.Len() != 3 {
					return fmt.Errorf("shard %q len %d", b.ShardID(), b.Len())
				}
				var got []string
				for b.Next() {
					ev := b.Event()
					got = append(got, fmt.Sprintf("%s|%s|%d|%s", ev.Seq, ev.PartitionKey, ev.ArrivalMs, ev.Data))
				}
				b.Put("seen", []byte("all"), strDoc(strings.Join(got, ";")))
				return nil
			},
			want: []mut{{"put", "seen", "all", `{"v":"100|a|1000|{\"n\":0};101|b|1001|{\"n\":1};102|c|1002|{\"n\":2}"}`}},
		},
		{
			name: "only the last write per key is emitted, in first-write order",
			h: func(b *guest.Batch) error {
				b.Put("c", []byte("k1"), []byte(`{"v":1}`))
				b.Put("c", []byte("k2"), []byte(`{"v":2}`))
				b.Put("d", []byte("k1"), []byte(`{"v":3}`))
				b.Put("c", []byte("k1"), []byte(`{"v":4}`))
				b.Delete("c", []byte("k2"))
				return nil
			},
			want: []mut{{"put", "c", "k1", `{"v":4}`}, {"del", "c", "k2", ""}, {"put", "d", "k1", `{"v":3}`}},
		},
		{
			name: "read sees the store, then the batch's own writes and deletes",
			seed: map[string]string{"c/k": `{"v":1}`},
			h: func(b *guest.Batch) error {
				var log []string
				read := func() {
					d, ok := b.Read("c", []byte("k"))
					log = append(log, fmt.Sprintf("%s/%v", d, ok))
				}
				read()
				b.Put("c", []byte("k"), []byte(`{"v":2}`))
				read()
				b.Delete("c", []byte("k"))
				read()
				b.Put("c", []byte("k"), []byte(`{"v":3}`))
				read()
				b.Put("log", []byte("x"), strDoc(strings.Join(log, " ")))
				return nil
			},
			want: []mut{{"put", "c", "k", `{"v":3}`}, {"put", "log", "x", `{"v":"{\"v\":1}/true {\"v\":2}/true /false {\"v\":3}/true"}`}},
		},
		{
			name: "reads alone emit nothing; a missing document reads as absent",
			seed: map[string]string{"c/k": `{"v":1}`},
			h: func(b *guest.Batch) error {
				if _, ok := b.Read("c", []byte("missing")); ok {
					return errors.New("missing document found")
				}
				if d, ok := b.Read("c", []byte("k")); !ok || string(d) != `{"v":1}` {
					return fmt.Errorf("read %s %v", d, ok)
				}
				return nil
			},
		},
		{
			name: "documents larger than the read buffer are read whole",
			seed: map[string]string{"c/big": big},
			h: func(b *guest.Batch) error {
				d, ok := b.Read("c", []byte("big"))
				if !ok || string(d) != big {
					return fmt.Errorf("read %d bytes, %v", len(d), ok)
				}
				b.Put("c", []byte("copy"), d)
				return nil
			},
			want: []mut{{"put", "c", "copy", big}},
		},
		{
			name: "handler error fails the batch",
			h: func(b *guest.Batch) error {
				b.Put("c", []byte("k"), []byte(`{}`))
				return errors.New("event seq 42: bad")
			},
			wantErr: "event seq 42: bad",
		},
		{
			name:    "an error with an empty message fails the batch (it must not read as success)",
			h:       func(b *guest.Batch) error { b.Put("c", []byte("k"), []byte(`{}`)); return errors.New("") },
			wantErr: "the handler returned an error with an empty message (*errors.errorString)",
		},
		{
			name:    "invalid collection name fails the batch",
			h:       func(b *guest.Batch) error { b.Put("bad name", []byte("k"), []byte(`{}`)); return nil },
			wantErr: `invalid collection name "bad name"`,
		},
		{
			name:    "empty key fails the batch",
			h:       func(b *guest.Batch) error { b.Delete("c", nil); return nil },
			wantErr: "invalid key",
		},
		{
			name:    "non-object document fails the batch",
			h:       func(b *guest.Batch) error { b.Put("c", []byte("k"), []byte(`[1]`)); return nil },
			wantErr: "not a JSON object",
		},
		{
			name: "oversized document fails the batch",
			h: func(b *guest.Batch) error {
				b.Put("c", []byte("k"), []byte(`{"x":"`+strings.Repeat("a", 256<<10)+`"}`))
				return nil
			},
			wantErr: "exceeds 262144",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, "shard-7", "a", "b", "c") })
	}
}

// counter is a handler counting each partition key's events in counts/<key>: {"count":N}, with
// a "pad" field of pad when it is not empty.
func counter(pad string) guest.Handler {
	return func(b *guest.Batch) error {
		for b.Next() {
			ev := b.Event()
			var n int64
			if d, ok := b.Read("counts", ev.PartitionKey); ok {
				n, _ = guest.JSONInt(d, "count")
			}
			o := guest.NewObject(nil)
			o.Int("count", n+1)
			if pad != "" {
				o.Str("pad", pad)
			}
			b.Put("counts", ev.PartitionKey, o.Bytes())
		}
		return nil
	}
}

func TestNativeAppliesAndReusesState(t *testing.T) {
	h := counter("")
	n := guest.NewNative(h)
	for range 3 {
		if _, err := n.Run("s", events("a", "b", "a", "c", "a")); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"a": `{"count":9}`, "b": `{"count":3}`, "c": `{"count":3}`}
	got := n.Collection("counts")
	if len(got) != len(want) {
		t.Fatalf("got %d docs, want %d", len(got), len(want))
	}
	for k, w := range want {
		if string(got[k]) != w {
			t.Errorf("counts/%s = %s, want %s", k, got[k], w)
		}
	}
	// A failed batch applies nothing.
	fail := guest.NewNative(func(b *guest.Batch) error { return h(b) })
	fail.Set("counts", "a", []byte(`{"count":1}`))
	bad := events("a")
	bad[0].Seq = nil
	if _, err := fail.Run("s", bad); !errors.Is(err, guest.ErrMalformed) {
		t.Fatalf("empty seq: err = %v, want ErrMalformed", err)
	}
	if d, _ := fail.Get("counts", "a"); string(d) != `{"count":1}` {
		t.Fatalf("counts/a = %s after a failed batch", d)
	}
}

// TestNativeRunBatchWith: with a host's read function, the handler's reads go to it (once per
// key and batch, a document too large for the buffer asked again), its output comes back
// encoded and is not applied, and the Native's own store is neither read nor changed.
func TestNativeRunBatchWith(t *testing.T) {
	h := counter(strings.Repeat("x", 5000))
	host := map[string]string{"counts/a": `{"count":41,"pad":"` + strings.Repeat("y", 9000) + `"}`}
	var asked []string
	read := func(coll, key, buf []byte) int {
		asked = append(asked, string(coll)+"/"+string(key))
		d, ok := host[string(coll)+"/"+string(key)]
		if !ok {
			return -1
		}
		copy(buf, d)
		return len(d)
	}
	n := guest.NewNative(h)
	n.Set("counts", "a", []byte(`{"count":1000}`)) // must not be read
	batch, err := abi.AppendBatch(nil, "s", events("a", "b", "a"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := n.RunBatchWith(batch, read)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"counts/a", "counts/a", "counts/b"}; strings.Join(asked, " ") != strings.Join(want, " ") {
		t.Errorf("reads %q, want %q (the 9,000-byte document asked again with a larger buffer)", asked, want)
	}
	var ms []guest.Mutation
	if err := abi.DecodeOutput(out, nil, func(m guest.Mutation) error { ms = append(ms, m); return nil }); err != nil {
		t.Fatal(err)
	}
	got := muts(ms)
	pad := strings.Repeat("x", 5000)
	if want := []mut{{"put", "counts", "a", `{"count":43,"pad":"` + pad + `"}`}, {"put", "counts", "b", `{"count":1,"pad":"` + pad + `"}`}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("output %v, want %v", got, want)
	}
	if d, _ := n.Get("counts", "a"); string(d) != `{"count":1000}` {
		t.Errorf("the Native's store changed: counts/a = %s", d)
	}
	if _, ok := n.Get("counts", "b"); ok {
		t.Error("the Native's store got counts/b")
	}
	fail := guest.NewNative(func(*guest.Batch) error { return errors.New("no") })
	if _, err := fail.RunBatchWith(batch, read); !errors.Is(err, guest.ErrHandlerFailed) || !strings.Contains(err.Error(), "no") {
		t.Errorf("failing handler: err = %v, want ErrHandlerFailed with its message", err)
	}
}

func TestNativeDeleteApplied(t *testing.T) {
	n := guest.NewNative(func(b *guest.Batch) error { b.Delete("c", []byte("k")); return nil })
	n.Set("c", "k", []byte(`{}`))
	if _, err := n.Run("s", events("a")); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Get("c", "k"); ok {
		t.Fatal("c/k still stored after delete")
	}
}

func TestNativeLog(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n := guest.NewNative(func(b *guest.Batch) error {
		b.Log(guest.LevelWarn, "hello from the guest")
		b.Log(guest.LevelDebug, strings.Repeat("x", 5000))
		return nil
	}, guest.WithLogger(l))
	if _, err := n.Run("s", events("a")); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `level=WARN msg="hello from the guest" source=guest`) {
		t.Fatalf("log output %q lacks the warning", out)
	}
	if strings.Contains(out, strings.Repeat("x", 4097)) || !strings.Contains(out, strings.Repeat("x", 4096)) {
		t.Fatal("long message not truncated to 4096 bytes")
	}
}

func TestRegisteredHandler(t *testing.T) {
	guest.Handle(func(b *guest.Batch) error { b.Put("r", []byte("k"), []byte(`{"ok":true}`)); return nil })
	t.Cleanup(func() { guest.Handle(nil) })
	ms, err := guest.NewNative(nil).Run("s", events("a"))
	if err != nil || len(ms) != 1 || string(ms[0].Doc) != `{"ok":true}` {
		t.Fatalf("Run = %v, %v", muts(ms), err)
	}
	guest.Handle(nil)
	if _, err := guest.NewNative(nil).Run("s", events("a")); !errors.Is(err, guest.ErrHandlerFailed) {
		t.Fatalf("no handler: err = %v", err)
	}
}

func TestBatchZeroAllocSteadyState(t *testing.T) {
	key := []byte("k")
	doc := []byte(`{"v":1}`)
	n := guest.NewNative(func(b *guest.Batch) error {
		for b.Next() {
			b.Read("c", b.Event().PartitionKey)
			b.Put("c", b.Event().PartitionKey, doc)
			b.Read("c", key)
		}
		return nil
	}, guest.WithDocValidation(false))
	evs := events("a", "b", "a")
	if _, err := n.Run("s", evs); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() { n.Run("s", evs) })
	if allocs != 0 {
		t.Fatalf("%.0f allocations per batch in steady state, want 0", allocs)
	}
}

// TestBatchManyKeys: thousands of keys, the same key bytes in several collections, batches of
// very different sizes on one Native (a large key index, then a small batch in it): every Read
// finds the batch's own write of exactly that collection/key, and a batch starts from the read
// model (nothing of the previous batch's keys is found in the batch itself).
func TestBatchManyKeys(t *testing.T) {
	colls := []string{"a", "b", "c"}
	keys := func(n int) []string {
		ks := make([]string, n)
		for i := range ks {
			ks[i] = fmt.Sprintf("k%d", i*7919%n) // a permutation of k0..k(n-1) (7919 is prime)
		}
		return ks
	}
	stored := map[string]int{} // collection/key -> the batch that wrote it last
	batch, n := 0, 0
	doc := func(batch int, c, k string) string { return string(strDoc(fmt.Sprintf("%d %s/%s", batch, c, k))) }
	nat := guest.NewNative(func(b *guest.Batch) error {
		for _, c := range colls {
			for _, k := range keys(n) {
				d, ok := b.Read(c, []byte(k))
				if w, was := stored[c+"/"+k]; ok != was || (ok && string(d) != doc(w, c, k)) {
					return fmt.Errorf("batch %d: %s/%s = %s %v before the batch wrote it, want batch %d's", batch, c, k, d, ok, w)
				}
				b.Put(c, []byte(k), []byte(doc(batch, c, k)))
			}
		}
		for _, c := range colls {
			for _, k := range keys(n) {
				if d, _ := b.Read(c, []byte(k)); string(d) != doc(batch, c, k) {
					return fmt.Errorf("batch %d: read back %s/%s = %s", batch, c, k, d)
				}
			}
		}
		return nil
	})
	for _, n = range []int{3000, 10, 500, 10} {
		ms, err := nat.Run("s", events("a"))
		if err != nil {
			t.Fatalf("%d keys: %v", n, err)
		}
		if len(ms) != n*len(colls) {
			t.Fatalf("%d keys: %d mutations, want %d", n, len(ms), n*len(colls))
		}
		for _, c := range colls {
			for _, k := range keys(n) {
				stored[c+"/"+k] = batch
			}
		}
		batch++
	}
}
