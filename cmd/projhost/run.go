package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/journal"
)

func init() {
	var sf storeFlags
	var srcf sourceFlags
	var mf moduleFlags
	var name, handler, workerID, logLevel string
	var cfg container.Config
	var onError, trace string
	var trusted bool
	var deadline time.Duration
	// runWorker is the worker once the flags are checked and the signals caught.
	var runWorker func(ctx context.Context, logger *slog.Logger, memPages uint32) error
	var started bool // runWorker got to container.Runner.Run
	var memLimit string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a projection's WASM handler over the local journal or a Kinesis stream (one worker; start several to share the shards)",
		Long: `Run is one worker of projection --name. It takes shard leases (sharing them with every other
worker of the same projection on the same store), projects each owned shard's events through the
handler into the read model, and saves cursors in batches. SIGINT/SIGTERM finish the current batch,
save cursors, release leases and exit 0.

Without --handler the worker runs the projection's active version from the module registry
(projhost deploy --activate; the same store flags, and --module-store) and follows it: when
the active version changes (deploy --activate, handlers activate, handlers rollback) every shard
switches to it at its next batch boundary, within about a second, after committing what the old
version produced; no restart. Such workers share a projection with each other whatever version
each runs for that second.

With --handler the worker runs that file and nothing else. Every such worker of one --name must
run the same handler: each lease records its owner's module (sha256 of the --handler file). A worker whose module differs from a live worker's takes no lease
and exits 1 (within about one --lease-duration), naming both modules and that worker. To deploy a
new handler, stop every worker (gracefully: the new one then starts at once; after a crash, once
the old leases expire) and start them with it, or run it under another --name.

--source kinesis reads a Kinesis Data Streams stream (--stream NAME|ARN) instead of the local
journal: shards from ListShards, re-listed every --shard-sync (a child shard starts once every
parent is finished), GetRecords paced under the per-shard quotas, cursors AFTER_SEQUENCE_NUMBER;
shards without a cursor start at --initial-position. --data is then only the embedded store's
directory (with --store dynamodb nothing is kept in files, and --data is refused).
--until-caught-up then means: every closed shard finished, every open shard read to its tip
(an empty GetRecords with MillisBehindLatest 0 after its saved cursor; other workers' shards
are probed at most once a second), and no dead-letter replay pending.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return fmt.Errorf("--name is required (and --handler H.wasm, or a version deployed with projhost deploy --activate)")
			}
			if err := srcf.check(cmd, &sf); err != nil {
				return err
			}
			if err := mf.check(&sf, handler == ""); err != nil {
				return err
			}
			if deadline < 0 || deadline > 0 && deadline < time.Millisecond {
				return fmt.Errorf("--batch-deadline must be at least 1ms")
			}
			memPages, err := host.ParseMemoryLimit(memLimit)
			if err != nil {
				return fmt.Errorf("--memory-limit: %w", err)
			}
			pol, err := projection.ParseOnError(onError)
			if err != nil {
				return fmt.Errorf("--on-error: %w", err)
			}
			cfg.Policy.OnError = pol
			lvl := slog.LevelInfo
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: use debug, info, warn or error", logLevel)
			}
			logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			slog.SetDefault(logger) // the AWS SDK's lines too (internal/dynamotables routes them to slog.Default())
			ctx, stop := gracefulContext(cmd.Context(), logger)
			defer stop()
			started = false
			err = runWorker(ctx, logger, memPages)
			if err != nil && !started && ctx.Err() != nil {
				// A signal during start-up (a setup step failed on the cancelled context):
				// nothing was taken yet, so it is a graceful stop like any other.
				logger.Info("stopped before starting", "err", err)
				return nil
			}
			return err
		},
	}
	runWorker = func(ctx context.Context, logger *slog.Logger, memPages uint32) error {
		var wasm []byte
		if handler != "" {
			var err error
			if wasm, err = readModule(handler, maxRunModule, "a module for run --handler"); err != nil {
				return err
			}
		}
		src, err := srcf.open(ctx, &sf, journal.Open, logger)
		if err != nil {
			return err
		}
		defer src.close()
		st, err := sf.open(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		rt, err := host.NewRuntime(ctx, host.WithLogger(logger), host.WithMemoryLimitPages(memPages))
		if err != nil {
			return err
		}
		defer rt.Close(context.Background())
		mopts := []host.ModuleOption{host.WithTrusted(trusted)}
		if deadline > 0 {
			mopts = append(mopts, host.WithBatchDeadline(deadline))
		}
		var modules projection.ModuleProvider
		var follower *deploy.Follower
		var moduleID string
		if handler != "" {
			mod, err := rt.Load(ctx, name, wasm, mopts...)
			if err != nil {
				return err
			}
			modules, moduleID = projection.Fixed(mod), container.ModuleID(wasm)
		} else {
			reg, err := registryOf(st)
			if err != nil {
				return err
			}
			blobs, err := mf.blobs(ctx, &sf, false)
			if err != nil {
				return err
			}
			follower, err = deploy.NewFollower(ctx, deploy.FollowConfig{Registry: reg, Blobs: blobs, Runtime: rt, Projection: name,
				ModuleOptions: mopts, Logger: logger})
			if err != nil {
				return fmt.Errorf("running the active version of %s: %w", name, err)
			}
			defer follower.Close(context.Background())
			logger.Info("running the active handler version", "projection", name, "version", follower.Version().Number,
				"sha256", follower.Version().SHA256)
			modules, moduleID = follower, deploy.ModuleIdentity
		}
		if workerID == "" {
			hn, _ := os.Hostname()
			workerID = fmt.Sprintf("%s-%d", hn, os.Getpid())
		}
		c := cfg
		c.Projection, c.WorkerID, c.Logger = name, workerID, logger
		if trace != "" {
			f, err := os.OpenFile(trace, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return fmt.Errorf("--trace: %w", err)
			}
			defer f.Close()
			c.Hooks = projection.Chain(c.Hooks, projection.TraceHooks(f))
		}
		lags := &lagTracker{}
		c.Hooks = projection.Chain(c.Hooks, projection.Hooks{Lag: lags.record})
		c.Source, c.Stores, c.Modules = src.Source, st.Stores, modules
		c.ModuleID = moduleID
		r, err := container.New(c)
		if err != nil {
			return err
		}
		if follower != nil {
			fctx, cancel := context.WithCancel(ctx)
			fdone := make(chan struct{})
			go func() { defer close(fdone); follower.Run(fctx) }()
			defer func() { cancel(); <-fdone }()
		}
		var progressDone chan struct{}
		if term.IsTerminal(int(os.Stderr.Fd())) {
			progressDone = make(chan struct{})
			pctx, cancel := context.WithCancel(ctx)
			defer func() { cancel(); <-progressDone }()
			go progress(pctx, os.Stderr, r, src.header, lags, st, name, progressDone)
		}
		start := time.Now()
		started = true
		if err := r.Run(ctx); err != nil {
			return err
		}
		s := r.Stats()
		logger.Info("worker stopped", "events", s.Events, "batches", s.Batches, "cursor_saves", s.CursorSaves,
			"handler_failures", s.Failures, "dead_letters", s.DeadLetters, "replayed", s.Replayed, "elapsed", time.Since(start).Round(time.Millisecond))
		return nil
	}
	sf.register(cmd)
	srcf.register(cmd)
	mf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "projection name (workers with the same name share its shards)")
	f.StringVar(&handler, "handler", "", "handler module to run (.wasm, projhost ABI v1); default: the projection's active version in the module registry, followed as it changes")
	f.BoolVar(&cfg.UntilCaughtUp, "until-caught-up", false, "exit 0 once every shard is caught up: its cursor at the journal's end, or, with --source kinesis, read to the tip (MillisBehindLatest 0) and closed shards finished")
	f.IntVar(&cfg.BatchSize, "batch-size", container.DefaultBatchSize, "max events per handler call")
	f.DurationVar(&cfg.BatchWait, "batch-wait", container.DefaultBatchWait, "max wait for a batch to fill (an idle shard is then read less often: this, doubling, up to once a second)")
	f.IntVar(&cfg.CursorEveryEvents, "cursor-every-events", projection.DefaultCursorEveryEvents, "save the cursor (with the documents handled since the last save) after this many events")
	f.DurationVar(&cfg.CursorEvery, "cursor-every", projection.DefaultCursorEvery, "save the cursor at least this often while events flow; the documents handled since the last save are written with it, so they stay invisible to queries for up to this long")
	f.StringVar(&onError, "on-error", string(projection.DefaultOnError), "what to do with an event the handler keeps failing on: retry (for ever), dead-letter (store it, go on) or stop (stop the shard until projhost resume)")
	f.IntVar(&cfg.Policy.MaxAttempts, "max-attempts", projection.DefaultMaxAttempts, "handler calls of a failing batch before --on-error dead-letter or stop acts")
	f.DurationVar(&cfg.LeaseDuration, "lease-duration", shardmap.DefaultLeaseDuration, "lease duration: a worker silent this long loses its shards (renewed every third of it)")
	f.DurationVar(&cfg.ShardSync, "shard-sync", container.DefaultShardSync, "how often the shard list is read again, which gives new shards (a split's, a merge's or a resharded Kinesis stream's children) their leases; also right after this worker finishes a shard (0: the default)")
	f.StringVar(&workerID, "worker-id", "", "unique worker id (default HOSTNAME-PID)")
	f.BoolVar(&trusted, "trusted", false, "trust the handler: no per-batch deadline (a batch may run as long as it takes; a runaway loop then holds its shard, but the other shards, lease renewals and SIGINT/SIGTERM keep working)")
	f.DurationVar(&deadline, "batch-deadline", 0, "per-batch deadline of the handler (default 5s; ignored with --trusted)")
	f.StringVar(&memLimit, "memory-limit", host.DefaultMemoryLimit, "cap on each handler instance's memory, in binary units, a multiple of 64KiB (e.g. 64MiB, 1GiB; at most 4GiB); one instance per owned shard, so a worker may hold shards x this")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&trace, "trace", "", "append every shard open, batch, cursor save, handler error, dead letter, replay, stop and lease event, and the lag (sampled: projection.TraceLagEvery), to this file as JSON lines (projection.TraceRecord; for tools and tests)")
	rootCmd.AddCommand(cmd)
}

// maxRunModule bounds a --handler file: 1 GiB, far above any handler (a standard Go build is
// about 3 MB), so that a mistaken path (a device, a huge file) is refused before it is read.
const maxRunModule = 1 << 30

// progress prints events/s and lag once a second on a terminal: in events from the journal's
// heads (hd), else the largest MillisBehindLatest of the owned shards (lags).
func progress(ctx context.Context, w io.Writer, r *container.Runner, hd source.Header, lags *lagTracker, st *stores, name string, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var last int64
	lastT := time.Now()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprint(w, "\r\033[K")
			return
		case now := <-t.C:
			s := r.Stats()
			rate := float64(s.Events-last) / now.Sub(lastT).Seconds()
			last, lastT = s.Events, now
			if hd == nil {
				fmt.Fprintf(w, "\r\033[K%d shards  %d events  %.0f events/s  lag %s", len(r.Owned()), s.Events, rate, lags.max(r.Owned()))
				continue
			}
			lag := int64(0)
			for _, id := range r.Owned() {
				if l, err := shardLag(ctx, hd, st, name, id); err == nil {
					lag += l
				}
			}
			fmt.Fprintf(w, "\r\033[K%d shards  %d events  %.0f events/s  lag %d events", len(r.Owned()), s.Events, rate, lag)
		}
	}
}

// stopSignals, when set, has caught SIGINT and SIGTERM since main started (catchStopSignals):
// a signal that arrives while `run` starts up is then a graceful stop, not the default
// action's death. The Go runtime cannot catch one before main (package initialisation, some
// 15 ms); that one ends the process as SIGTERM does.
var stopSignals chan os.Signal

// catchStopSignals starts catching SIGINT and SIGTERM into stopSignals, for gracefulContext.
func catchStopSignals() {
	stopSignals = make(chan os.Signal, 2)
	signal.Notify(stopSignals, os.Interrupt, syscall.SIGTERM)
}

// gracefulContext is cancelled by the first SIGINT/SIGTERM (graceful stop: finish the batch,
// save cursors, release leases; a shard still in its batch after the lease duration, such as a
// trusted handler stuck in a loop, is interrupted without saving: container.Runner). A second
// signal exits at once with status 130; leases then expire and other workers replay from the
// saved cursors.
func gracefulContext(parent context.Context, logger *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	ch := stopSignals
	if ch == nil {
		ch = make(chan os.Signal, 2)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	}
	go func() {
		select {
		case sig := <-ch:
			logger.Info("stopping gracefully: finishing batches, saving cursors, releasing leases (signal again to exit at once)", "signal", sig.String())
			cancel()
		case <-ctx.Done():
			return
		}
		sig := <-ch
		logger.Warn("second signal: exiting without saving", "signal", sig.String())
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

// lagTracker keeps each shard's last MillisBehind (projection.Hooks.Lag), for progress.
type lagTracker struct {
	mu sync.Mutex
	ms map[string]int64
}

func (l *lagTracker) record(i projection.LagInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ms == nil {
		l.ms = map[string]int64{}
	}
	l.ms[i.ShardID] = i.MillisBehind
}

// max returns the largest lag of shards as "N ms behind", or "unknown".
func (l *lagTracker) max(shards []string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := int64(-1)
	for _, id := range shards {
		if v, ok := l.ms[id]; ok {
			m = max(m, v)
		}
	}
	if m < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d ms behind", m)
}
