package bench

import (
	"context"
	"fmt"
	"runtime"
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
