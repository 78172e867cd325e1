package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/projhost/projhost/admin"
	"github.com/projhost/projhost/container"
	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/prom"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/journal"
	"github.com/projhost/projhost/status"
	"github.com/projhost/projhost/statuspage"
	"github.com/projhost/projhost/web"
)

func init() {
	var sf storeFlags
	var srcf sourceFlags
	var mf moduleFlags
	var name, handler, workerID, logLevel string
	var cfg container.Config
	var onError, trace, listen, adminFile, readFile string
	var tokens []admin.Token // the admin API's (run --admin-token-file, $PROJHOST_ADMIN_TOKEN)
	var trusted bool
	var deadline time.Duration
	// runWorker is the worker once the flags are checked and the signals caught.
	var runWorker func(ctx context.Context, logger *slog.Logger, memPages uint32) error
	var started bool // runWorker got to container.Runner.Run
	var memLimit, maxSize string
	var maxBytes int64
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a projection's WASM handler over the local journal or a Kinesis stream (one worker; start several to share the shards)",
		Long: `Run is one worker of projection --name. It takes shard leases (sharing them with every other
worker of the same projection on the same store), projects each owned shard's events through the
handler into the read model, and saves cursors in batches. SIGINT/SIGTERM finish the current batch,
save cursors, release leases and exit 0.

The worker runs the projection's active version from the module registry and follows it: when
the active version changes (deploy --activate, handlers activate, handlers rollback, or another
worker started with --handler) every shard switches to it at its next batch boundary, within
about a second, after committing what the old version produced; no restart. All workers of a
projection share its shards whatever version each runs for that second. The registry is in the
store (the same store flags as deploy); the module bytes are in the module store (--module-store;
by default the modules directory in --data with the embedded store, required with --store
dynamodb).

Without --handler the projection needs an active version (projhost deploy --activate). With
--handler H.wasm the worker first makes that file the active version: when the active version
already holds the same bytes (SHA-256) nothing changes; when a stored version does, it is
activated; otherwise the file is deployed as a new version and activated, validated as deploy
validates it (size, ABI and imports, memory under --memory-limit, compilation) but without
deploy's smoke run: the worker's --on-error policy meets a failing event. A module that fails is
refused and nothing is stored. Workers already running the projection then switch to it, as
after deploy --activate; to run two handlers side by side, use two --names.

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
			if err := projection.CheckName(name); err != nil {
				return fmt.Errorf("--name: %w", err)
			}
			if err := srcf.check(cmd, &sf); err != nil {
				return err
			}
			if err := mf.check(&sf, true); err != nil {
				return err
			}
			if deadline < 0 || deadline > 0 && deadline < time.Millisecond {
				return fmt.Errorf("--batch-deadline must be at least 1ms")
			}
			memPages, err := host.ParseMemoryLimit(memLimit)
			if err != nil {
				return fmt.Errorf("--memory-limit: %w", err)
			}
			if maxBytes, err = parseMaxModuleSize(maxSize); err != nil {
				return err
			}
			if listen != "" {
				lc := web.Config{Addr: listen}
				if err := lc.Validate(); err != nil {
					return fmt.Errorf("--listen: %w", err)
				}
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
			if tokens, err = admin.LoadTokens(admin.TokenSources{AdminFile: adminFile, ReadFile: readFile}, os.Getenv); err != nil {
				return err
			}
			if len(tokens) > 0 && listen == "" {
				if adminFile != "" || readFile != "" {
					return fmt.Errorf("--admin-token-file and --admin-read-token-file need --listen ADDR: the admin API is served there")
				}
				logger.Info("no admin API: $" + admin.EnvAdminToken + " or $" + admin.EnvReadToken + " is set, but there is no --listen")
				tokens = nil
			}
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
			if wasm, err = readModule(handler, maxBytes, "--max-module-size"); err != nil {
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
		if workerID == "" {
			hn, _ := os.Hostname()
			workerID = fmt.Sprintf("%s-%d", hn, os.Getpid())
		}
		c := cfg
		c.Projection, c.WorkerID, c.Logger = name, workerID, logger
		c.Source, c.Stores = src.Source, st.Stores
		// The runner's configuration is checked before --handler is made the active version: a
		// bad flag deploys nothing.
		check := c
		check.Modules = projection.Fixed(nil)
		if err := check.Validate(); err != nil {
			return err
		}
		var lis *listener
		// One lease watcher for the status page and the admin API's /status: the page's sampler
		// observes the leases every 2s, so both tell live from expired leases.
		statusCfg := status.Config{Stores: st.Stores, Source: src.Source, Header: src.header,
			Watcher: status.NewWatcher(c.LeaseDuration, nil)}
		if listen != "" {
			// Bound before --handler is made the active version: a port in use deploys nothing.
			metrics, live := prom.New(), status.NewLive()
			page, err := statuspage.New(statuspage.Config{Status: statusCfg,
				Projections: []string{name}, Live: live, Worker: workerID, LeaseDuration: c.LeaseDuration, Logger: logger})
			if err != nil {
				return err
			}
			l, err := startListener(web.Config{Addr: listen}, logger, metrics, page)
			if err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			defer l.close(logger)
			lis = l
			sctx, stopSampling := context.WithCancel(ctx)
			sampled := make(chan struct{})
			go func() { defer close(sampled); page.Run(sctx) }()
			defer func() { stopSampling(); <-sampled }()
			c.Hooks = projection.Chain(c.Hooks, metrics.Hooks(), live.Hooks())
		}
		if trace != "" {
			f, err := os.OpenFile(trace, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return fmt.Errorf("--trace: %w", err)
			}
			defer f.Close()
			c.Hooks = projection.Chain(c.Hooks, projection.TraceHooks(f))
		}
		if handler != "" {
			// The stream must be there before --handler becomes the active version (a mistyped
			// --stream deploys nothing).
			if _, err := src.Source.Shards(ctx); err != nil {
				return err
			}
		}
		rt, err := host.NewRuntime(ctx, host.WithLogger(logger), host.WithMemoryLimitPages(memPages))
		if err != nil {
			return err
		}
		defer rt.Close(context.Background())
		mopts := []host.ModuleOption{host.WithTrusted(trusted)}
		if deadline > 0 {
			mopts = append(mopts, host.WithBatchDeadline(deadline))
		}
		reg, err := registryOf(st)
		if err != nil {
			return err
		}
		blobs, err := mf.blobs(ctx, &sf, handler != "")
		if err != nil {
			return err
		}
		if len(tokens) > 0 {
			if err := lis.mountAdmin(admin.Config{Projection: name, Stores: st.Stores, Source: src.Source, Blobs: blobs,
				Status: &statusCfg, Tokens: tokens, Logger: logger}, logger); err != nil {
				return err
			}
		}
		if handler != "" {
			if err := ensureHandler(ctx, logger, reg, blobs, rt, name, handler, wasm, maxBytes); err != nil {
				return err
			}
		}
		follower, err := deploy.NewFollower(ctx, deploy.FollowConfig{Registry: reg, Blobs: blobs, Runtime: rt, Projection: name,
			ModuleOptions: mopts, Logger: logger})
		if err != nil {
			return fmt.Errorf("running the active version of %s: %w", name, err)
		}
		defer follower.Close(context.Background())
		logger.Info("running the active handler version", "projection", name, "version", follower.Version().Number,
			"sha256", follower.Version().SHA256)
		lags := &lagTracker{}
		c.Hooks = projection.Chain(c.Hooks, projection.Hooks{Lag: lags.record})
		c.Modules = follower
		c.ModuleID = deploy.ModuleIdentity
		r, err := container.New(c)
		if err != nil {
			return err
		}
		fctx, cancel := context.WithCancel(ctx)
		fdone := make(chan struct{})
		go func() { defer close(fdone); follower.Run(fctx) }()
		defer func() { cancel(); <-fdone }()
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
	f.StringVar(&handler, "handler", "", "handler module (.wasm, projhost ABI v1) to make the projection's active version (deployed as a new version unless one holds the same bytes) before running it; default: the active version as it is. Either way the worker follows the active version as it changes")
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
	registerMaxModuleSize(f, &maxSize)
	f.StringVar(&memLimit, "memory-limit", host.DefaultMemoryLimit, "cap on each handler instance's memory, in binary units, a multiple of 64KiB (e.g. 64MiB, 1GiB; at most 4GiB); one instance per owned shard, so a worker may hold shards x this")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&listen, "listen", "", "serve Prometheus metrics at http://ADDR/metrics and the status page at http://ADDR/ (JSON: /status.json) while the worker runs (ADDR: HOST:PORT, e.g. 127.0.0.1:9090; port 0 picks a free one, logged), and the admin API with an admin token; default: no listener")
	f.StringVar(&adminFile, "admin-token-file", "", "serve the admin API at http://ADDR/admin/v1/projections/NAME/... (needs --listen) to requests carrying this file's token (32 to 512 printable ASCII bytes, e.g. openssl rand -hex 32; or $"+admin.EnvAdminToken+"): every route; default: no admin API")
	f.StringVar(&readFile, "admin-read-token-file", "", "also accept this file's token (or $"+admin.EnvReadToken+") on the admin API's read-only routes (status, dead letters, versions)")
	f.StringVar(&trace, "trace", "", "append every shard open, batch, cursor save, handler error, dead letter, replay, stop and lease event, and the lag (sampled: projection.TraceLagEvery), to this file as JSON lines (projection.TraceRecord; for tools and tests)")
	rootCmd.AddCommand(cmd)
}

// ensureHandler makes the --handler file (wasm, read from path) projection name's active
// version with deploy.Ensure before the worker starts following the registry: the active
// version already holding those bytes is run as it is, a stored version holding them is
// activated, and otherwise the file is deployed as a new version and activated (validated as
// `deploy` validates: size, loader checks under --memory-limit, compilation; a module that
// fails is refused with one line and nothing is stored). A running worker of the projection
// then switches to it at its next batch boundary, as after `deploy --activate`.
//
// No smoke run: run --handler is the quick start (`make demo`), and the worker is about to run
// the module over the real events under its --on-error policy, which is what a smoke run
// tries beforehand on each shard's latest events; such a run would delay every start by a pass
// over every shard's tail, and a module failing on an event would be refused instead of
// meeting the error policy the user chose (dead letters, stop). `projhost deploy` keeps it.
// The version's note says where it came from.
//
// Another deploy, activate or rollback in between (workers started at once) is tried once
// more (deploy.Ensure: the same module is then found active; with another module the last
// worker to start wins); a second conflict is an error naming what to do.
func ensureHandler(ctx context.Context, logger *slog.Logger, reg registry.Store, blobs registry.Blobs, rt *host.Runtime, name, path string, wasm []byte, maxBytes int64) error {
	d, err := deploy.New(deploy.Config{Registry: reg, Blobs: blobs, Runtime: rt, MaxModuleSize: int(maxBytes), SmokeEvents: -1})
	if err != nil {
		return err
	}
	note := "projhost run --handler " + filepath.Base(path)
	if len(note) > registry.MaxNoteBytes {
		note = note[:registry.MaxNoteBytes]
	}
	got, err := d.Ensure(ctx, name, wasm, note)
	switch {
	case errors.Is(err, registry.ErrConflict):
		return fmt.Errorf("handler %s: the active version of %s kept changing while this worker made it active (another deploy, activate or rollback): %w; start the worker again", path, name, err)
	case errors.Is(err, host.ErrInvalidModule) || errors.Is(err, deploy.ErrTooLarge):
		return fmt.Errorf("handler %s refused, nothing stored: %w", path, err)
	case err != nil:
		return fmt.Errorf("handler %s: %w", path, err)
	}
	v := got.Version
	switch got.Outcome {
	case deploy.AlreadyActive:
		logger.Info("the handler is the active version already", "projection", name, "handler", path, "version", v.Number)
	case deploy.ActivatedStored:
		logger.Info("activated the stored version holding the handler", "projection", name, "handler", path, "version", v.Number,
			"was", versionName(got.Previous))
	case deploy.Deployed:
		logger.Info("deployed the handler as a new version and activated it", "projection", name, "handler", path, "version", v.Number,
			"was", versionName(got.Previous), "sha256", v.SHA256, "compiled_in", got.Deploy.Compile.Round(time.Millisecond))
	}
	return nil
}

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
