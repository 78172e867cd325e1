package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/source"
)

// Command returns the `bench` command with its subcommands handler, native, compare, e2e and
// sustained. natives are the Go handlers compiled into the binary that `bench native --example
// NAME`, `bench handler --native NAME` and `bench compare --native NAME` can run natively (nil:
// none). Output goes to the command's stdout; logs (warnings and errors of the host and guests)
// and progress to its stderr.
func Command(natives map[string]guest.Handler) *cobra.Command {
	root := &cobra.Command{
		Use:   "bench",
		Short: "Measure handler throughput, module costs and end-to-end rates (prints tables)",
		Long: `bench measures projhost on this machine and prints tables. Throughputs are wall-clock
events per second of one goroutine, the median of repeated passes over the events.

  bench handler  a module through the host against an in-memory read model
  bench native   a Go example handler compiled into the host, without WebAssembly (the baseline)
  bench compare  a handler against a baseline doing the same work (ratio of events/s)
  bench e2e      journal append and a runner projecting into the embedded store (with
                 --native, again with the Go handler compiled in: the WebAssembly tax)
  bench sustained  appending and projecting at once, in processes, for a fixed time`,
		Args: cobra.NoArgs,
	}
	var cpuProfile string
	var profile *os.File
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole command to this file (go tool pprof)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		profile = f
		return nil
	}
	root.PersistentPostRunE = func(*cobra.Command, []string) error {
		if profile == nil {
			return nil
		}
		pprof.StopCPUProfile()
		err := profile.Close()
		profile = nil
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}
	root.AddCommand(handlerCommand(natives), nativeCommand(natives), compareCommand(natives), e2eCommand(natives), sustainedCommand())
	return root
}

// passFlags are the flags shared by handler and native.
type passFlags struct {
	events, keyField, batchSizes string
	repeat                       int
	duration                     time.Duration
}

func (p *passFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&p.events, "events", "", "events file: JSON array or JSON lines, gzip ok (required)")
	f.StringVar(&p.keyField, "key-field", DefaultKeyField, "top-level JSON field used as the partition key")
	f.StringVar(&p.batchSizes, "batch-sizes", "1,100,1000", "comma-separated events per handler call")
	f.DurationVar(&p.duration, "duration", DefaultDuration, "measuring time per batch size (and deadline setting)")
	f.IntVar(&p.repeat, "repeat", 1, "replicate the file's events this many times per pass")
}

// load checks the flags and loads the events.
func (p *passFlags) load() (*loaded, error) {
	if p.events == "" {
		return nil, fmt.Errorf("%w: --events is required", ErrArgs)
	}
	sizes, err := ParseInts(p.batchSizes)
	if err != nil {
		return nil, fmt.Errorf("--batch-sizes: %w", err)
	}
	if p.duration <= 0 {
		return nil, fmt.Errorf("%w: --duration %v must be positive", ErrArgs, p.duration)
	}
	if p.repeat < 1 {
		return nil, fmt.Errorf("%w: --repeat %d must be at least 1", ErrArgs, p.repeat)
	}
	evs, err := LoadEvents(p.events, p.keyField, p.repeat)
	if err != nil {
		return nil, err
	}
	return &loaded{events: evs, sizes: sizes}, nil
}

type loaded struct {
	events []source.Event
	sizes  []int
}

// signalContext is the command's context, cancelled by SIGINT or SIGTERM so that temporary
// directories are removed on the way out.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
}

func logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func nativeNames(natives map[string]guest.Handler) string {
	names := make([]string, 0, len(natives))
	for n := range natives {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none in this build"
	}
	return strings.Join(names, ", ")
}

func lookupNative(natives map[string]guest.Handler, name string) (guest.Handler, error) {
	h, ok := natives[name]
	if !ok {
		return nil, fmt.Errorf("%w: no native handler %q (available: %s)", ErrArgs, name, nativeNames(natives))
	}
	return h, nil
}

func handlerCommand(natives map[string]guest.Handler) *cobra.Command {
	var pf passFlags
	var handlers []string
	var native string
	cmd := &cobra.Command{
		Use:   "handler --handler H.wasm [--handler H2.wasm] --events FILE",
		Short: "Module compile/instantiate/memory costs and events/s by batch size, deadline on and off",
		Long: `handler measures each --handler module through the host against an in-memory read model:
compile time (cold and warm cache), instantiate time and memory per instance, then events/s by
batch size with the per-batch deadline on and off.

For each batch size, the passes of every module (deadline on and off) and of the --native
baseline run in one interleaved rotation, --duration per module and setting: every events/s of a
batch size, and every wasm/native ratio, comes from the same time window. The native baseline is
the Go handler compiled into the host and run through the same host path as the modules (batch
encoding, reads, output decoding and document checks, the read model), without WebAssembly.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd)
			defer stop()
			if len(handlers) == 0 {
				return fmt.Errorf("%w: --handler is required", ErrArgs)
			}
			var nh guest.Handler
			if native != "" {
				var err error
				if nh, err = lookupNative(natives, native); err != nil {
					return err
				}
			}
			o := HandlerOptions{Native: nh, NativeName: native}
			for _, p := range handlers {
				b, err := host.ReadModuleFile(p, host.DefaultMaxModuleFile)
				if err != nil {
					return err
				}
				if len(b) == 0 {
					return fmt.Errorf("%w: --handler %s is an empty file: build the handler (make wasm) and give its .wasm", ErrArgs, p)
				}
				o.Modules = append(o.Modules, HandlerModule{Name: moduleLabel(p, handlers), WASM: b})
			}
			l, err := pf.load()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			o.Events, o.BatchSizes, o.Duration, o.Logger = l.events, l.sizes, pf.duration, logger(cmd.ErrOrStderr())
			res, err := MeasureHandlers(ctx, o)
			if err != nil {
				return err
			}
			for i, rep := range res.Modules {
				if i > 0 {
					fmt.Fprintln(out)
				}
				if err := WriteHandler(out, rep); err != nil {
					return err
				}
			}
			if res.Native == nil {
				return nil
			}
			fmt.Fprintln(out)
			return WriteComparison(out, res.Native, res.Modules)
		},
	}
	pf.register(cmd)
	cmd.Flags().StringArrayVar(&handlers, "handler", nil, "handler module (.wasm); repeat to measure several")
	cmd.Flags().StringVar(&native, "native", "", "also measure this Go handler compiled into the host, interleaved with the modules, and print wasm/native ratios ("+nativeNames(natives)+")")
	return cmd
}

func nativeCommand(natives map[string]guest.Handler) *cobra.Command {
	var pf passFlags
	var example string
	cmd := &cobra.Command{
		Use:   "native --events FILE [--example NAME]",
		Short: "The native baseline of a Go example handler (compiled into the host, through its handler path), by batch size",
		Long: `native measures a Go example handler compiled into the host and run through the host's
handler path (batch encoding, reads, output decoding and document checks, the read model), without
WebAssembly: the baseline of bench handler --native, alone. For a wasm/native ratio use bench
handler --native, which interleaves the baseline's passes with the modules'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd)
			defer stop()
			h, err := lookupNative(natives, example)
			if err != nil {
				return err
			}
			l, err := pf.load()
			if err != nil {
				return err
			}
			rep, err := MeasureNative(ctx, example, h, l.events, l.sizes, pf.duration)
			if err != nil {
				return err
			}
			return WriteNative(cmd.OutOrStdout(), rep)
		},
	}
	pf.register(cmd)
	cmd.Flags().StringVar(&example, "example", "flightdelays", "Go handler to run ("+nativeNames(natives)+")")
	return cmd
}

func e2eCommand(natives map[string]guest.Handler) *cobra.Command {
	var o E2EOptions
	var handlers []string
	var shards string
	cmd := &cobra.Command{
		Use:   "e2e --handler H.wasm [--handler H2.wasm] --events FILE [--shards 4,16,100] [--native NAME]",
		Short: "Append the events to a fresh N-shard journal, then project them with one runner per handler until caught up",
		Long: `e2e appends the events to a fresh journal of N shards, for each N of --shards, then projects
that journal with each --handler in turn (builds of one handler: their read models must be the
same), each with one in-process runner and an embedded store of its own, until caught up. With
--native NAME it projects the journal once more with the Go handler NAME compiled into the host
(the SDK's native runner, through the same runner, journal and store) and prints each module's
events/s as a ratio of the native one (wasm/native): the WebAssembly tax end to end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd)
			defer stop()
			if len(handlers) == 0 || o.EventsPath == "" {
				return fmt.Errorf("%w: --handler and --events are required", ErrArgs)
			}
			var nh guest.Handler
			if o.NativeName != "" {
				var err error
				if nh, err = lookupNative(natives, o.NativeName); err != nil {
					return err
				}
			}
			var err error
			if o.Shards, err = ParseInts(shards); err != nil {
				return fmt.Errorf("--shards: %w", err)
			}
			if o.Repeat < 1 {
				return fmt.Errorf("%w: --repeat %d must be at least 1", ErrArgs, o.Repeat)
			}
			if o.Limit < 0 || o.LeaseDuration < 0 {
				return fmt.Errorf("%w: --limit and --lease-duration must not be negative", ErrArgs)
			}
			if o.BatchSize < 1 {
				return fmt.Errorf("%w: --batch-size %d must be at least 1", ErrArgs, o.BatchSize)
			}
			for _, p := range handlers {
				b, err := host.ReadModuleFile(p, host.DefaultMaxModuleFile)
				if err != nil {
					return err
				}
				o.Modules = append(o.Modules, E2EModule{Name: filepath.Base(p), WASM: b})
			}
			if _, err := os.Stat(o.EventsPath); err != nil {
				return fmt.Errorf("reading events: %w", err)
			}
			errw := cmd.ErrOrStderr()
			o.Logger = logger(errw)
			if nh != nil {
				o.Native = NativeGuests(nh, o.Logger)
			}
			res, err := MeasureE2E(ctx, o, func(r E2EResult) {
				fmt.Fprintf(errw, "e2e %s: %d shards: %d events projected in %s\n", r.Module, r.Shards, r.Stats.Events, Dur(r.ProjectTime))
			})
			if err != nil {
				return err
			}
			return WriteE2E(cmd.OutOrStdout(), o.Trusted, res)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&handlers, "handler", nil, "handler module (.wasm); repeat to project each journal with several builds of one handler (required)")
	f.StringVar(&o.EventsPath, "events", "", "events file: JSON array or JSON lines, gzip ok; streamed (required)")
	f.StringVar(&o.KeyField, "key-field", DefaultKeyField, "top-level JSON field used as the partition key")
	f.StringVar(&shards, "shards", "4,16,100", "comma-separated journal shard counts, one journal each")
	f.IntVar(&o.Repeat, "repeat", 1, "append the file's events this many times")
	f.BoolVar(&o.Trusted, "trusted", false, "load the handlers without the per-batch deadline")
	f.IntVar(&o.BatchSize, "batch-size", 500, "max events per handler call (the runner's batch size)")
	f.Int64Var(&o.Limit, "limit", 0, "append at most this many events (0: the whole file, --repeat times)")
	f.DurationVar(&o.LeaseDuration, "lease-duration", 0, "the runner's lease duration (default: the runner's, shardmap.DefaultLeaseDuration = 6s)")
	f.StringVar(&o.TempDir, "tmp", "", "parent directory of the temporary journals and stores (default: the system temp dir)")
	f.StringVar(&o.NativeName, "native", "", "also project each journal with this Go handler compiled in, through the same pipeline, and print wasm/native ("+nativeNames(natives)+")")
	return cmd
}

// moduleLabel names the module at path p in bench tables: its base name, or the path as given
// when another of paths has the same base name.
func moduleLabel(p string, paths []string) string {
	for _, q := range paths {
		if q != p && filepath.Base(q) == filepath.Base(p) {
			return p
		}
	}
	return filepath.Base(p)
}
