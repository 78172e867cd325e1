package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/sdk/go/guest"
)

// sum is the document sums/<partition key> of TestNativeGuestsStateAfterPanic: {"n":N}.
type sum struct{ N int64 }

// TestNativeGuestsStateAfterPanic: a Go handler whose State kept documents panics in the native
// baseline after changing them; the host discards the guest, and the next batches write what
// they would have written had the batch that panicked never happened. Kept documents are reused
// from the batch after on (no decode).
func TestNativeGuestsStateAfterPanic(t *testing.T) {
	ctx := context.Background()
	decodes := 0
	sums := guest.NewState("sums", func(s *sum, doc []byte) error {
		decodes++
		var ok bool
		if s.N, ok = guest.JSONInt(doc, "n"); !ok {
			return errors.New(`no integer "n"`)
		}
		return nil
	}, func(s *sum, dst []byte) []byte {
		o := guest.NewObject(dst)
		o.Int("n", s.N)
		return o.Bytes()
	})
	h := func(b *guest.Batch) error {
		for b.Next() {
			ev := b.Event()
			s, _ := sums.Get(b, ev.PartitionKey)
			s.N++
			if string(ev.Data) == `{"panic":true}` {
				panic("on purpose")
			}
		}
		return nil
	}
	mod := host.NewNativeModule("sums", NativeGuests(h, slog.Default()), nil)
	hd := mod.NewHandler(host.TestShardID)
	defer hd.Close(ctx)
	rm := host.NewMemReadModel()
	seq := 0
	batch := func(keys ...string) []event.Event {
		var evs []event.Event
		for _, k := range keys {
			seq++
			data := `{}`
			if k == "panic" {
				k, data = "a", `{"panic":true}`
			}
			evs = append(evs, event.Event{ShardID: host.TestShardID, Seq: fmt.Sprintf("%d", seq), PartitionKey: k, Data: []byte(data)})
		}
		return evs
	}
	steps := []struct {
		keys        []string
		wantErr     error
		wantDecodes int
	}{
		{[]string{"a", "b"}, nil, 0},
		{[]string{"a", "b", "b"}, nil, 0},
		{[]string{"b", "a", "panic"}, host.ErrTrap, 0},
		{[]string{"a"}, nil, 1},
		{[]string{"a", "b"}, nil, 1},
		{[]string{"a", "b"}, nil, 0},
	}
	for i, s := range steps {
		decodes = 0
		muts, err := hd.Handle(ctx, batch(s.keys...), rm)
		if s.wantErr != nil {
			require.ErrorIs(t, err, s.wantErr, "step %d", i)
		} else {
			require.NoError(t, err, "step %d", i)
			rm.Apply(muts)
		}
		assert.Equal(t, s.wantDecodes, decodes, "step %d: decodes", i)
	}
	assert.Equal(t, []event.Doc{
		{Collection: "sums", Key: "a", Doc: []byte(`{"n":5}`)},
		{Collection: "sums", Key: "b", Doc: []byte(`{"n":5}`)},
	}, rm.Docs())
}
