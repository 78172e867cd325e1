package as_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/testwasm"
)

// TestKeepingStateMemoryBounded: testdata/keepgcprobe.ts keeps 16,000 documents in a State while
// every event makes garbage (a string of 4 or 16 KB). Collections are spaced by up to 1024 events
// when many documents are kept (collectGarbage, sdk/as/README.md "Why --runtime minimal"), so the
// keeping State's peak memory may exceed that of a State keeping nothing (decodeEveryBatch, same
// events) by about twice the garbage of 1024 events plus the kept documents, and no more. Before
// the cap (spacing K/2 = 8,000 events), 16 KB per event filled the 128 MiB limit and trapped.
func TestKeepingStateMemoryBounded(t *testing.T) {
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	wasm, err := os.ReadFile(testwasm.Path(t, "as-keepgcprobe"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.Load(ctx, "as-keepgcprobe", wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	const keys, perBatch, batches = 16000, 100, 400
	for _, units := range []int{2000, 8000} { // UTF-16 units: 2 bytes each
		peak := func(every int) uint64 {
			h := m.NewHandler(host.TestShardID)
			defer h.Close(ctx)
			rm := host.NewMemReadModel()
			var top uint64
			seq, k := 0, 0
			for bi := range batches {
				evs := make([]event.Event, perBatch)
				for i := range evs {
					seq++
					evs[i] = event.Event{ShardID: host.TestShardID, Seq: fmt.Sprint(seq), PartitionKey: "p",
						Data: fmt.Appendf(nil, `{"k":%d,"g":%d,"e":%d}`, k, units, every)}
					k = (k + 1) % keys
				}
				muts, err := h.Handle(ctx, evs, rm)
				if err != nil {
					t.Fatalf("garbage %d B/event, every=%d, batch %d: %.300v", 2*units, every, bi, err)
				}
				rm.Apply(muts)
				top = max(top, h.MemorySize())
			}
			if got := len(rm.Docs()); got != keys {
				t.Errorf("every=%d: %d documents, want %d", every, got, keys)
			}
			return top
		}
		keeping, every := peak(0), peak(1)
		bound := every + 2*1024*uint64(2*units) + 8<<20
		t.Logf("garbage %d B/event: peak %d MiB keeping, %d MiB keeping nothing (bound %d MiB)", 2*units, keeping>>20, every>>20, bound>>20)
		if keeping > bound {
			t.Errorf("garbage %d B/event: the keeping State peaks at %d MiB, over %d MiB (%d MiB keeping nothing)", 2*units, keeping>>20, bound>>20, every>>20)
		}
	}
}
