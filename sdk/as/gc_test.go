package as_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/testwasm"
)

// TestASGarbageIsCollected runs testdata/garbageprobe.ts, a handler that makes about 22 KB of
// garbage per event and keeps one object per key alive across batches, for 20,000 events in
// batches of 100 (about 440 MB of garbage in all) and 3,000 in batches of 1, under a 64 MiB
// memory limit, built with each AssemblyScript runtime:
//   - minimal (the examples' and README's build; the library collects at the start of a call
//     once the memory grew) and incremental (the runtime collects by itself): every batch
//     succeeds, the live objects stay intact (the handler checks them), the counts are exact,
//     and the linear memory ends within 16 MiB;
//   - stub (never frees): the same run must break that bound, or the memory limit, which shows
//     the bound can fail.
func TestASGarbageIsCollected(t *testing.T) {
	const (
		keys      = 50
		bound     = 16 << 20
		limitPage = 1024 // 64 MiB
	)
	pad := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 28)[:1000]
	ctx := context.Background()
	rt, err := host.NewRuntime(ctx, host.WithMemoryLimitPages(limitPage), host.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	for _, tt := range []struct {
		module            string
		batches, perBatch int
		collects          bool
	}{
		{"as-garbageprobe", 200, 100, true},
		{"as-garbageprobe", 3000, 1, true},
		{"as-garbageprobe-incremental", 200, 100, true},
		{"as-garbageprobe-stub", 200, 100, false},
	} {
		batches, perBatch := tt.batches, tt.perBatch
		t.Run(fmt.Sprintf("%s/batch=%d", tt.module, perBatch), func(t *testing.T) {
			wasm, err := os.ReadFile(testwasm.Path(t, tt.module))
			if err != nil {
				t.Fatal(err)
			}
			mod, err := rt.Load(ctx, tt.module, wasm)
			if err != nil {
				t.Fatal(err)
			}
			defer mod.Close(ctx)
			h := mod.NewHandler(host.TestShardID)
			defer h.Close(ctx)
			rm := host.NewMemReadModel()
			want := map[string]int{}
			seq := 0
			var runErr error
			var peak uint64
			for b := 0; b < batches && runErr == nil; b++ {
				evs := make([]event.Event, perBatch)
				for i := range evs {
					seq++
					k := fmt.Sprintf("k%02d", seq%keys)
					want[k]++
					evs[i] = event.Event{ShardID: host.TestShardID, Seq: fmt.Sprint(seq), PartitionKey: k,
						Data: []byte(`{"key":"` + k + `","pad":"` + pad + `"}`)}
				}
				muts, err := h.Handle(ctx, evs, rm)
				if err != nil {
					runErr = fmt.Errorf("batch %d: %w", b, err)
					break
				}
				rm.Apply(muts)
				peak = max(peak, h.MemorySize())
			}
			if !tt.collects {
				if runErr == nil && peak <= bound {
					t.Fatalf("a runtime that never frees stayed within %d bytes (peak %d): the bound cannot fail", bound, peak)
				}
				t.Logf("stub, as expected: peak %d bytes, error %v", peak, runErr)
				return
			}
			if runErr != nil {
				t.Fatal(runErr)
			}
			if peak > bound {
				t.Errorf("linear memory peaked at %d bytes, want at most %d", peak, bound)
			}
			for k, n := range want {
				doc, ok, _ := rm.ReadDoc(ctx, "counts", []byte(k))
				if !ok || string(doc) != fmt.Sprintf(`{"n":%d}`, n) {
					t.Errorf("counts/%s = %s (found %v), want {\"n\":%d}", k, doc, ok, n)
				}
			}
			t.Logf("%s: peak linear memory %d bytes", tt.module, peak)
		})
	}
}
