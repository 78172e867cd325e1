package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/wasmabi"
)

// indexedFanGuest registers "n" and "pad" and puts n documents per event; it fails the batch when an
// event's index disagrees with the data, or when a batch carries an index it did not register.
type indexedFanGuest struct {
	registered int
	calls      *[]string
}

func (g *indexedFanGuest) HandleBatch(batch []byte, imp host.NativeImports) ([]byte, string) {
	r, err := wasmabi.NewBatchReader(batch)
	if err != nil {
		return nil, err.Error()
	}
	*g.calls = append(*g.calls, fmt.Sprintf("%d events, f=%d (guest had %d)", r.Len(), r.Fields(), g.registered))
	if r.Fields() > g.registered {
		return nil, fmt.Sprintf("batch indexes %d fields, the guest registered %d", r.Fields(), g.registered)
	}
	if s := imp.Field([]byte("n")); s != 0 {
		return nil, "slot of n " + strconv.Itoa(s)
	}
	if s := imp.Field([]byte("pad")); s != 1 {
		return nil, "slot of pad " + strconv.Itoa(s)
	}
	g.registered = 2
	var w wasmabi.OutputWriter
	w.Reset()
	var e wasmabi.Event
	for r.Next(&e) {
		var v struct{ N int }
		if err := json.Unmarshal(e.Data, &v); err != nil {
			return nil, err.Error()
		}
		if e.Index != nil {
			start, end, _, ok := wasmabi.FieldEntry(e.Index, 0)
			if !ok || string(e.Data[start:end]) != strconv.Itoa(v.N) {
				return nil, fmt.Sprintf("event %s: index says %q, data %s", e.Seq, e.Data[max(start, 0):max(end, 0)], e.Data)
			}
		}
		for i := 0; i < v.N; i++ {
			w.Put("f", fmt.Sprintf("%s-%d", e.Seq, i), []byte(`{}`))
		}
	}
	return w.Buf, ""
}

// TestBisectionWithFieldIndex: outputs past the limit are handed over in halves; every call's index
// is the truth and only for a guest that registered.
func TestBisectionWithFieldIndex(t *testing.T) {
	ctx := context.Background()
	var calls []string
	mod := host.NewNativeModule("fan", func(string) host.NativeGuest { return &indexedFanGuest{calls: &calls} }, nil)
	var rec recorder
	st := storetest.Backends()[0].Open(t)
	p := newProc(t, st, projection.Fixed(mod), func(c *projection.Config) {
		c.Hooks = rec.hooks()
		c.Policy = projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 2}
	})
	sh, err := p.Open(ctx, shard, 1, projection.ShardOptions{})
	require.NoError(t, err)
	var evs []event.Event
	for i, n := range []int{1, 20000, 20000, wasmabi.MaxOutputMutations + 1, 20000, 3} {
		evs = append(evs, event.Event{ShardID: shard, Seq: fmt.Sprint(i + 1), PartitionKey: "k", Data: []byte(fmt.Sprintf(`{"pad":"%0*d","n":%d}`, i, 0, n))})
	}
	require.NoError(t, sh.Handle(ctx, evs[:1]))
	require.NoError(t, sh.Handle(ctx, evs[1:]))
	require.NoError(t, sh.Flush(ctx))
	sh.Close(ctx)
	// The first call registers; the index goes only to guests that registered (a guest
	// discarded for its too-large output is replaced by one with none).
	require.Equal(t, []string{"1 events, f=0 (guest had 0)", "5 events, f=2 (guest had 2)", "2 events, f=0 (guest had 0)",
		"3 events, f=2 (guest had 2)", "1 events, f=0 (guest had 0)", "1 events, f=0 (guest had 0)", "2 events, f=0 (guest had 0)"}, calls)
	for _, e := range rec.errs {
		require.Equal(t, projection.KindBadOutput, e.Kind)
	}
	require.Len(t, rec.dead, 1)
	require.Equal(t, "4", rec.dead[0].Seq)
}
