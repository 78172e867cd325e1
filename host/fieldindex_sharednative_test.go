package host

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/projhost/projhost/sdk/go/guest"
)

var (
	sharedFX = guest.NewJSONFields("x")
	sharedFY = guest.NewJSONFields("y")
)

// sharedXY puts c/<seq> = {"v":N}: the value of field x for events of partition key "X", of y else.
func sharedXY(b *guest.Batch) error {
	for b.Next() {
		ev := b.Event()
		f := sharedFY
		if string(ev.PartitionKey) == "X" {
			f = sharedFX
		}
		f.Scan(ev.Data)
		v, _ := f.Int(0)
		o := guest.NewObject(nil)
		o.Int("v", v)
		b.Put("c", ev.Seq, o.Bytes())
	}
	return nil
}

type sharedGuest struct {
	mu sync.Mutex
	n  *guest.Native
}

func (g *sharedGuest) HandleBatch(batch []byte, imp NativeImports) ([]byte, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out, err := g.n.RunBatchImports(batch, guest.Imports{Read: imp.Read, Field: imp.Field})
	if err != nil {
		return nil, err.Error()
	}
	return out, ""
}

// TestSharedNativeFieldIndex: one guest.Native behind the NativeGuests of two shards (newGuest
// returns the same guest for every Handler). The Native keeps the slots the first Handler's
// Field gave, the second Handler indexes other names in those slots, and JSONFields reads the
// wrong field: x reads as y's value.
func TestSharedNativeFieldIndex(t *testing.T) {
	t.Skip("known bug (break-fieldidx report): a guest.Native shared by Handlers reads another name's slot")
	g := &sharedGuest{n: guest.NewNative(sharedXY)}
	m := NewNativeModule("xy", func(string) NativeGuest { return g }, nil)
	h1, h2 := m.NewHandler("s1"), m.NewHandler("s2")
	data := `{"x":1,"y":2}`
	seq := 0
	run := func(h *Handler, shard, key string) string {
		seq++
		muts, err := h.Handle(context.Background(), evs(shard, seq, key, data), NewMemReadModel())
		if err != nil {
			t.Fatal(err)
		}
		return key + "=" + string(muts[0].Doc) + " (seq " + strconv.Itoa(seq) + ")"
	}
	for _, r := range []string{run(h1, "s1", "X"), run(h1, "s1", "X"), run(h2, "s2", "Y"), run(h2, "s2", "Y")} {
		t.Log(r)
	}
	got := run(h2, "s2", "X")
	if got[:10] != `X={"v":1} ` {
		t.Errorf("field x read on shard s2: %s, want 1", got)
	}
}
