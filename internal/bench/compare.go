package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/source"
)

// CompareOptions configures MeasureCompare: a handler and a baseline doing the same work (the
// documented flightdelays example and its hand-tuned predecessor), as WebAssembly modules and,
// optionally, as Go handlers run natively.
type CompareOptions struct {
	Name, BaselineName string // module names in the report; required
	WASM, BaselineWASM []byte // the modules; required
	// Native and BaselineNative, when both are set, are also measured natively: compiled into
	// the host and run through its Handler path (host.NewNativeModule with NativeGuests).
	Native, BaselineNative guest.Handler
	Events                 []source.Event // the events of one pass, all on host.TestShardID; at least one
	BatchSizes             []int          // default DefaultBatchSizes
	Duration               time.Duration  // measuring time per handler and cell; default DefaultDuration
	Logger                 *slog.Logger   // host and guest log output; default slog.Default()
}

// CompareRow is one cell of a CompareReport: the handler's and the baseline's rates measured in
// the same interleaved rounds.
type CompareRow struct {
	BatchSize      int
	Native         bool // the Go handlers compiled into the host; false: the modules, deadline on
	Rate, Baseline Rate
}

// Ratio is the handler's events/s over the baseline's (0 when the baseline measured 0).
func (r CompareRow) Ratio() float64 {
	if r.Baseline.EventsPerSec <= 0 {
		return 0
	}
	return r.Rate.EventsPerSec / r.Baseline.EventsPerSec
}

// CompareReport is what MeasureCompare measured.
type CompareReport struct {
	Name, BaselineName string
	Events             int // events per pass
	Rows               []CompareRow
}

// MeasureCompare measures, for every batch size, the two modules through host.Module/Handler
// with the per-batch deadline on (as `bench handler`), then, when both Go handlers are given,
// the two natively, through the same host path (host.NewNativeModule, as the baseline of
// `bench handler --native`). Each cell runs passes of the handler and the baseline interleaved
// in turns of 10 ms (measureInterleaved) for 2*Duration, after one untimed warm-up batch each, so a shared
// machine's load falls on both alike; the ratio of their medians is the figure to read.
//
// Errors: ErrArgs for bad options, the host's errors (host.ErrInvalidModule, a
// *host.HandlerError when a handler, native or not, fails a batch), ctx's error.
func MeasureCompare(ctx context.Context, o CompareOptions) (*CompareReport, error) {
	if o.Name == "" || o.BaselineName == "" || len(o.WASM) == 0 || len(o.BaselineWASM) == 0 {
		return nil, fmt.Errorf("%w: both modules and their names are required", ErrArgs)
	}
	if (o.Native == nil) != (o.BaselineNative == nil) {
		return nil, fmt.Errorf("%w: give both native handlers or neither", ErrArgs)
	}
	sizes, d, err := runDefaults(len(o.Events), o.BatchSizes, o.Duration)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	rt, err := host.NewRuntime(ctx, host.WithLogger(o.Logger))
	if err != nil {
		return nil, err
	}
	defer rt.Close(context.WithoutCancel(ctx))
	mods := make([]*host.Module, 2)
	for i, m := range []struct {
		name string
		wasm []byte
	}{{o.Name, o.WASM}, {o.BaselineName, o.BaselineWASM}} {
		if mods[i], err = rt.Load(ctx, m.name, m.wasm); err != nil {
			return nil, err
		}
		defer mods[i].Close(context.WithoutCancel(ctx))
	}
	rep := &CompareReport{Name: o.Name, BaselineName: o.BaselineName, Events: len(o.Events)}
	for _, size := range sizes {
		rates, err := measureThroughput(ctx, mods, o.Events, size, d)
		if err != nil {
			return nil, fmt.Errorf("bench: compare batch size %d: %w", size, err)
		}
		rep.Rows = append(rep.Rows, CompareRow{BatchSize: size, Rate: rates[0], Baseline: rates[1]})
	}
	if o.Native == nil {
		return rep, nil
	}
	natives := []*host.Module{
		host.NewNativeModule(o.Name+" (native)", NativeGuests(o.Native, o.Logger), o.Logger),
		host.NewNativeModule(o.BaselineName+" (native)", NativeGuests(o.BaselineNative, o.Logger), o.Logger),
	}
	for _, size := range sizes {
		rates, err := measureThroughput(ctx, natives, o.Events, size, d)
		if err != nil {
			return nil, fmt.Errorf("bench: compare native batch size %d: %w", size, err)
		}
		rep.Rows = append(rep.Rows, CompareRow{BatchSize: size, Native: true, Rate: rates[0], Baseline: rates[1]})
	}
	return rep, nil
}

// WriteCompare prints rep: per batch size and build, both rates and their ratio.
func WriteCompare(w io.Writer, rep *CompareReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "compare %s with baseline %s: %s events per pass, events/s = median of interleaved passes (wall, 1 goroutine)\n",
		rep.Name, rep.BaselineName, group(int64(rep.Events)))
	fmt.Fprintln(tw, "  batch\tbuild\tevents/s\tbaseline events/s\tratio")
	for _, r := range rep.Rows {
		build := "wasm (deadline on)"
		if r.Native {
			build = "native"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", r.BatchSize, build, group(int64(r.Rate.EventsPerSec+0.5)),
			group(int64(r.Baseline.EventsPerSec+0.5)), ratio(r.Rate.EventsPerSec, r.Baseline.EventsPerSec))
	}
	return tw.Flush()
}

func compareCommand(natives map[string]guest.Handler) *cobra.Command {
	var pf passFlags
	var handler, baseline, native, nativeBaseline string
	cmd := &cobra.Command{
		Use:   "compare --handler H.wasm --baseline B.wasm --events FILE [--native N --native-baseline NB]",
		Short: "A handler against a baseline doing the same work: events/s of both and their ratio, in WebAssembly and natively",
		Long: `compare measures a handler and a baseline doing the same work, per batch size, in interleaved
passes (turns of 10 ms, --duration each), and prints both events/s and their ratio: the two modules with the
per-batch deadline on, then, with --native and --native-baseline, the two Go handlers compiled
into the host and run through the same host path as the modules (batch encoding, reads, output
decoding and document checks, the read model), without WebAssembly.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd)
			defer stop()
			if handler == "" || baseline == "" {
				return fmt.Errorf("%w: --handler and --baseline are required", ErrArgs)
			}
			o := CompareOptions{Name: filepath.Base(handler), BaselineName: filepath.Base(baseline)}
			if (native == "") != (nativeBaseline == "") {
				return fmt.Errorf("%w: give both --native and --native-baseline, or neither", ErrArgs)
			}
			if native != "" {
				var err error
				if o.Native, err = lookupNative(natives, native); err != nil {
					return err
				}
				if o.BaselineNative, err = lookupNative(natives, nativeBaseline); err != nil {
					return err
				}
			}
			var err error
			if o.WASM, err = host.ReadModuleFile(handler, host.DefaultMaxModuleFile); err != nil {
				return err
			}
			if o.BaselineWASM, err = host.ReadModuleFile(baseline, host.DefaultMaxModuleFile); err != nil {
				return err
			}
			l, err := pf.load()
			if err != nil {
				return err
			}
			o.Events, o.BatchSizes, o.Duration, o.Logger = l.events, l.sizes, pf.duration, logger(cmd.ErrOrStderr())
			rep, err := MeasureCompare(ctx, o)
			if err != nil {
				return err
			}
			return WriteCompare(cmd.OutOrStdout(), rep)
		},
	}
	pf.register(cmd)
	f := cmd.Flags()
	pf.batchSizes, f.Lookup("batch-sizes").DefValue = "100,1000", "100,1000"
	f.StringVar(&handler, "handler", "", "the module measured (.wasm) (required)")
	f.StringVar(&baseline, "baseline", "", "the module it is compared with (.wasm) (required)")
	f.StringVar(&native, "native", "", "also measure this Go handler natively ("+nativeNames(natives)+")")
	f.StringVar(&nativeBaseline, "native-baseline", "", "against this one ("+nativeNames(natives)+")")
	return cmd
}
