package bench

import (
	"context"
	"fmt"
	"log/slog"
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

// NativeReport is the native baseline's part of a report (MeasureNative, MeasureHandlers).
type NativeReport struct {
	Name   string // the handler's name, e.g. "flightdelays"
	Events int    // events per pass
	Rows   []NativeRow
}

// MeasureNative is the native baseline of a Go handler alone: h compiled into the host and run
// through the host's Handler path like a module (host.NewNativeModule with NativeGuests: batch
// encoding, reads, output decoding and document checks, a host.MemReadModel; no WebAssembly,
// sandbox or deadline) over events, for each batch size the median events/s of repeated passes
// for d (after one untimed warm-up batch). batchSizes and d default as in HandlerOptions. Its
// figures are those MeasureHandlers prints for the baseline, but measured in a window of their
// own: compute a wasm/native ratio with MeasureHandlers, whose passes are interleaved.
//
// Errors: ErrArgs for bad arguments, a *host.HandlerError when a batch fails, ctx's error.
func MeasureNative(ctx context.Context, name string, h guest.Handler, events []source.Event, batchSizes []int, d time.Duration) (*NativeReport, error) {
	batchSizes, d, err := runDefaults(len(events), batchSizes, d)
	if err != nil {
		return nil, err
	}
	if h == nil || name == "" {
		return nil, fmt.Errorf("%w: a native handler and its name are required", ErrArgs)
	}
	mod := host.NewNativeModule(name, NativeGuests(h, slog.Default()), nil)
	rep := &NativeReport{Name: name, Events: len(events)}
	for _, size := range batchSizes {
		rates, err := measureThroughput(ctx, []*host.Module{mod}, events, size, d)
		if err != nil {
			return nil, fmt.Errorf("bench: native %s batch size %d: %w", name, size, err)
		}
		rep.Rows = append(rep.Rows, NativeRow{BatchSize: size, Rate: rates[0]})
	}
	return rep, nil
}

// sdkGuest runs a Go handler through the SDK's native runner (guest.Native.RunBatchImports:
// projhost_handle without WebAssembly) as a host.NativeGuest: the handler compiled into the
// host, the native baseline of the bench commands. Like a module's guest, it reads through
// the host's read model (NativeImports.Read, and ReadKnown for the documents its States kept),
// registers its fields for the batch field index (NativeImports.Field; ABI.md §2.1) and hands
// its output back encoded, for the host to check and apply; the Native's own store is not used.
type sdkGuest struct {
	n  *guest.Native
	mu *sync.Mutex // held while the handler runs (NativeGuests)
}

// NativeGuests returns the maker of host.NewNativeModule's guests (E2EOptions.Native) for h:
// guests that run h through the SDK's native runner (see sdkGuest), logging to logger. They
// run h one at a time: the SDK's handlers keep their state in package variables (each WebAssembly instance has its own), so natively one
// Native at a time may run a handler. With several shards on several cores this leaves the
// native runs less parallel than the module's: a wasm/native ratio flatters WebAssembly by up
// to the handler's share of the pipeline's time.
func NativeGuests(h guest.Handler, logger *slog.Logger) func(shardID string) host.NativeGuest {
	var mu sync.Mutex
	return func(string) host.NativeGuest {
		return &sdkGuest{n: guest.NewNative(h, guest.WithLogger(logger)), mu: &mu}
	}
}

// HandleBatch implements host.NativeGuest.
func (g *sdkGuest) HandleBatch(batch []byte, imp host.NativeImports) ([]byte, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out, err := g.n.RunBatchImports(batch, guest.Imports{Read: imp.Read, ReadKnown: imp.ReadKnown, Field: imp.Field})
	if err != nil {
		return nil, err.Error()
	}
	return out, ""
}
