package bench

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/source"
)

// NativeRow is one throughput cell of the native baseline.
type NativeRow struct {
	BatchSize int
	Rate
}

// NativeReport is what MeasureNative measured.
type NativeReport struct {
	Name   string // the handler's name, e.g. "flightdelays"
	Events int    // events per pass
	Rows   []NativeRow
}

// MeasureNative is the native baseline of a Go handler: h runs in-process through guest.Native
// (batch encoding, SDK decoding, the handler, output encoding, decoding, document validation and
// application to Native's in-memory read model: the WebAssembly path without WebAssembly) over
// events, for each batch size the median events/s of repeated passes for d (after one untimed
// warm-up batch). batchSizes and d default as in HandlerOptions. Errors: ErrArgs for bad
// arguments, a failing batch (wrapping guest.ErrHandlerFailed or guest.ErrMalformed), ctx's
// error.
func MeasureNative(ctx context.Context, name string, h guest.Handler, events []source.Event, batchSizes []int, d time.Duration) (*NativeReport, error) {
	batchSizes, d, err := runDefaults(len(events), batchSizes, d)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: no native handler", ErrArgs)
	}
	evs := guestEvents(events)
	rep := &NativeReport{Name: name, Events: len(events)}
	for _, size := range batchSizes {
		runtime.GC()
		n := guest.NewNative(h)
		run := func(b []guest.Event) error {
			if _, err := n.Run(host.TestShardID, b); err != nil {
				return fmt.Errorf("bench: native %s batch size %d: %w", name, size, err)
			}
			return nil
		}
		if err := run(evs[:min(size, len(evs))]); err != nil {
			return nil, err
		}
		rate, err := measure(ctx, d, len(evs), func() error {
			for start := 0; start < len(evs); start += size {
				if err := run(evs[start:min(start+size, len(evs))]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		rep.Rows = append(rep.Rows, NativeRow{BatchSize: size, Rate: rate})
	}
	return rep, nil
}

// guestEvents converts events to the Go SDK's (copying the sequence numbers and keys).
func guestEvents(events []source.Event) []guest.Event {
	evs := make([]guest.Event, len(events))
	for i, e := range events {
		evs[i] = guest.Event{Seq: []byte(e.Seq), PartitionKey: []byte(e.PartitionKey), ArrivalMs: e.ArrivalMs, Data: e.Data}
	}
	return evs
}

// sdkGuest runs a Go handler through the SDK's native runner (guest.Native.RunBatch:
// projhost_handle without WebAssembly) as a host.NativeGuest: the handler compiled into the
// host, for bench e2e --native. The host checks the documents as for a module, so the runner
// does not (guest.WithDocValidation(false)). guest.Native reads its own copy of what the
// handler wrote, not the host's read model (it takes no read function); in the benchmark's
// pipeline (an empty read model, every document written by the handler of one shard) that
// copy answers what the host's read model would.
type sdkGuest struct {
	n  *guest.Native
	mu *sync.Mutex // held while the handler runs (NativeGuests)
}

// NativeGuests returns the maker of E2EOptions.Native for h: guests that run h through the
// SDK's native runner, logging to logger. They run h one at a time: the SDK's handlers keep
// their state in package variables (each WebAssembly instance has its own), so natively one
// Native at a time may run a handler. With several shards on several cores this leaves the
// native runs less parallel than the module's: a wasm/native ratio flatters WebAssembly by up
// to the handler's share of the pipeline's time.
func NativeGuests(h guest.Handler, logger *slog.Logger) func(shardID string) host.NativeGuest {
	var mu sync.Mutex
	return func(string) host.NativeGuest {
		return &sdkGuest{n: guest.NewNative(h, guest.WithDocValidation(false), guest.WithLogger(logger)), mu: &mu}
	}
}

// HandleBatch implements host.NativeGuest.
func (g *sdkGuest) HandleBatch(batch []byte, _ host.NativeRead) ([]byte, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out, err := g.n.RunBatch(batch)
	if err != nil {
		return nil, err.Error()
	}
	return out, ""
}
