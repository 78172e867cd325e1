package deploy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/registry"
)

// DefaultPoll is how often a Follower reads the active pointer: well within one lease-renewal
// interval (a third of the default 6 s lease), so that every shard switches within one.
const DefaultPoll = time.Second

// ModuleIdentity is the lease module identity (container.Config.ModuleID) of workers that run
// a projection's active version through a Follower: they all run the same version, switching
// within a poll of each other, so none of them is foreign to another (a library worker running a
// fixed module of its own, container.Config.ModuleID, is, and waits for them to stop). Every
// `projhost run` worker is a follower: with --handler it makes that file the active version
// first (Deployer.Ensure).
const ModuleIdentity = "registry"

// FollowConfig configures a Follower.
type FollowConfig struct {
	Registry   registry.Store // required
	Blobs      registry.Blobs // required
	Runtime    *host.Runtime  // required: compiles each version once
	Projection string         // required
	// ModuleOptions are passed to Runtime.Load for every version (the batch deadline, trusted).
	ModuleOptions []host.ModuleOption
	Poll          time.Duration // how often the pointer is read; default DefaultPoll
	Logger        *slog.Logger  // default slog.Default()
	// OnSwitch, when set, is called after the Follower loaded a new active version (before
	// any shard runs it).
	OnSwitch func(from, to registry.Version)
}

// Follower is a projection.ModuleProvider that gives the shards the projection's active
// version: it loads it at start, reads the active pointer every Poll, and when the pointer
// names another version fetches its bytes (checked against their SHA-256), compiles them once
// and makes them the module every shard takes at its next batch boundary (the core commits
// what the old version produced first). Versions once loaded stay loaded until Close (a
// rollback switches back without compiling again). It is a projection.ModuleRecorder: each
// shard's switch is recorded in the registry (SetShard: the version and the switch point,
// which `status` shows) before the new version's first commit, and a new owner handles an
// interrupted write's range again with the version that wrote it. Safe for concurrent use.
type Follower struct {
	cfg FollowConfig

	mu     sync.Mutex
	cur    *host.Module
	curV   registry.Version
	loaded map[int64]loadedVersion
	byName map[string]int64 // module name -> version
	closed bool

	refreshMu sync.Mutex
	refresh   pollState // Refresh's
}

var _ projection.ModuleRecorder = (*Follower)(nil)

// NewFollower loads the projection's active version and returns a Follower running it.
// Errors: ErrNoActive, registry.ErrNoModule / ErrCorrupt (module store), host.ErrInvalidModule
// (a stored module the runtime now refuses, e.g. under a lower memory limit), store errors.
func NewFollower(ctx context.Context, cfg FollowConfig) (*Follower, error) {
	switch {
	case cfg.Registry == nil || cfg.Blobs == nil || cfg.Runtime == nil || cfg.Projection == "":
		return nil, fmt.Errorf("%w: a follower needs a registry, a module store, a runtime and a projection", ErrConfig)
	case cfg.Poll < 0:
		return nil, fmt.Errorf("%w: poll interval %v", ErrConfig, cfg.Poll)
	}
	if cfg.Poll == 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &Follower{cfg: cfg, loaded: map[int64]loadedVersion{}, byName: map[string]int64{}}
	a, err := cfg.Registry.Active(ctx, cfg.Projection)
	if err != nil {
		return nil, err
	}
	if a.Version == 0 {
		return nil, fmt.Errorf("%w: %s (deploy one: projhost deploy --name %s --handler H.wasm --activate)", ErrNoActive, cfg.Projection, cfg.Projection)
	}
	if err := f.switchTo(ctx, a.Version); err != nil {
		f.Close(ctx)
		return nil, err
	}
	return f, nil
}

// Module implements projection.ModuleProvider.
func (f *Follower) Module() *host.Module {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

// Version is the active version the Follower gives the shards now.
func (f *Follower) Version() registry.Version {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.curV
}

// moduleName is the name version v of projection is loaded under (host.Module.Name: it labels
// logs, errors and the trace's module records): "<projection> v<N>".
func moduleName(projection string, n int64) string {
	return projection + " v" + strconv.FormatInt(n, 10)
}

// VersionOf returns the version number of a module name the Follower loaded (0 when unknown).
func VersionOf(name string) int64 {
	i := strings.LastIndex(name, " v")
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseInt(name[i+2:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// switchTo makes version n current, loading it unless it was before.
func (f *Follower) switchTo(ctx context.Context, n int64) error {
	m, v, err := f.load(ctx, n)
	if err != nil {
		return err
	}
	f.mu.Lock()
	from := f.curV
	f.cur, f.curV = m, v
	f.mu.Unlock()
	if from.Number != 0 {
		f.cfg.Logger.Info("active handler version changed: shards switch at their next batch", "projection", f.cfg.Projection,
			"from", from.Number, "to", n, "sha256", v.SHA256)
	}
	if f.cfg.OnSwitch != nil {
		f.cfg.OnSwitch(from, v)
	}
	return nil
}

// RetryFailed is how long a Follower waits before trying again to load an active version it
// failed to load (its bytes missing from the module store, say), unless the pointer changes
// first (a re-activation, or another version activated, is tried at once).
const RetryFailed = 10 * time.Second

// Run reads the active pointer every Poll and switches when it changed, until ctx ends; it
// returns nil then. A failed read is logged and tried again at the next poll; a version that
// cannot be loaded is logged and tried again after RetryFailed or when the pointer changes
// (the shards keep the version they run meanwhile).
func (f *Follower) Run(ctx context.Context) error {
	t := time.NewTicker(f.cfg.Poll)
	defer t.Stop()
	var st pollState
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := f.poll(ctx, &st); err != nil && ctx.Err() == nil {
			f.logPollError(err)
		}
	}
}

// Refresh reads the active pointer once and switches when it changed, as one poll of Run does
// (a version that failed to load is tried again only after RetryFailed or when the pointer
// changes): for a caller without a long-lived goroutine, such as a Lambda invocation (the
// process is frozen between invocations, so Run's ticker would not help). The shards keep the
// version they run when it fails. Errors: the registry's (reading the pointer), or why the new
// active version cannot be loaded (those of NewFollower). Safe for concurrent use (calls are
// serialized); do not mix it with Run on one Follower.
func (f *Follower) Refresh(ctx context.Context) error {
	f.refreshMu.Lock()
	defer f.refreshMu.Unlock()
	return f.poll(ctx, &f.refresh)
}

// pollState is what a follower's polls remember between them: the pointer whose version failed
// to load (Counter 0: none), and when.
type pollState struct {
	failed   registry.Active
	failedAt time.Time
}

// errPointerRead wraps a failed read of the active pointer (logged as a warning by Run).
type errPointerRead struct{ err error }

func (e errPointerRead) Error() string { return "reading the active handler version: " + e.err.Error() }
func (e errPointerRead) Unwrap() error { return e.err }

// errSwitch wraps a failed load of a new active version.
type errSwitch struct {
	version int64
	err     error
}

func (e errSwitch) Error() string {
	return fmt.Sprintf("the new active handler version %d cannot be run: %v", e.version, e.err)
}
func (e errSwitch) Unwrap() error { return e.err }

// poll is one read of the active pointer, and a switch when it names another version than the
// current one (unless that version failed to load less than RetryFailed ago under the same
// pointer). Errors: errPointerRead, errSwitch.
func (f *Follower) poll(ctx context.Context, st *pollState) error {
	a, err := f.cfg.Registry.Active(ctx, f.cfg.Projection)
	if err != nil {
		return errPointerRead{err}
	}
	if a.Version == 0 || a.Version == f.Version().Number {
		st.failed = registry.Active{}
		return nil
	}
	if st.failed.Counter != 0 && a.Counter == st.failed.Counter && time.Since(st.failedAt) < RetryFailed {
		return nil
	}
	if err := f.switchTo(ctx, a.Version); err != nil {
		st.failed, st.failedAt = a, time.Now()
		return errSwitch{a.Version, err}
	}
	st.failed = registry.Active{}
	return nil
}

// logPollError logs an error of poll as Run reports it.
func (f *Follower) logPollError(err error) {
	var sw errSwitch
	if errors.As(err, &sw) {
		f.cfg.Logger.Error("the new active handler version cannot be run; the shards keep the one they run (tried again in 10s)",
			"projection", f.cfg.Projection, "version", sw.version, "running", f.Version().Number, "err", sw.err)
		return
	}
	f.cfg.Logger.Warn("reading the active handler version failed; trying again", "projection", f.cfg.Projection, "err", errors.Unwrap(err))
}

// RecordModule implements projection.ModuleRecorder: it records in the registry, before the
// shard's first commit with it, which version the shard runs since which sequence number
// (SetShard; `status` shows it, and ModuleAfter reads it back). A module the Follower did not
// load is not recorded. Errors are the registry's (the core retries them).
func (f *Follower) RecordModule(ctx context.Context, i projection.ModuleInfo) error {
	f.mu.Lock()
	n := f.byName[i.Module]
	f.mu.Unlock()
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return f.cfg.Registry.SetShard(ctx, registry.ShardVersion{Projection: f.cfg.Projection, ShardID: i.ShardID, Epoch: i.Epoch,
		Version: n, Seq: i.Seq, ChangedMs: time.Now().UnixMilli()})
}

// ModuleAfter implements projection.ModuleRecorder: the version the shard's record says ran
// the events after seq (its switch point at or before seq), loaded if needed. nil when the
// shard has no record, the record is past seq, or the version cannot be loaded any more (its
// bytes gone from the module store: logged; the shard then runs the active version).
func (f *Follower) ModuleAfter(ctx context.Context, shardID, seq string) (*host.Module, error) {
	rs, err := f.cfg.Registry.Shards(ctx, f.cfg.Projection)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if r.ShardID != shardID {
			continue
		}
		if event.CompareSeq(r.Seq, seq) > 0 {
			f.cfg.Logger.Warn("the shard's version record is past its cursor: the interrupted write is handled again with the active version",
				"projection", f.cfg.Projection, "shard", shardID, "record_seq", r.Seq, "cursor", seq)
			return nil, nil
		}
		m, _, err := f.load(ctx, r.Version)
		if err != nil {
			if ctx.Err() == nil && (errors.Is(err, registry.ErrNoModule) || errors.Is(err, registry.ErrCorrupt) ||
				errors.Is(err, registry.ErrNoVersion) || errors.Is(err, host.ErrInvalidModule)) {
				f.cfg.Logger.Error("the version that wrote an interrupted write cannot be loaded: its range is handled again with the active version",
					"projection", f.cfg.Projection, "shard", shardID, "version", r.Version, "err", err)
				return nil, nil
			}
			return nil, err
		}
		return m, nil
	}
	return nil, nil
}

// loadedVersion is a version the Follower loaded: its registry record and its module.
type loadedVersion struct {
	m *host.Module
	v registry.Version
}

// load returns version n's module and record, loading them (the record, the bytes, the
// compilation) unless they were before: a version once loaded costs no registry read again.
func (f *Follower) load(ctx context.Context, n int64) (*host.Module, registry.Version, error) {
	f.mu.Lock()
	l, ok := f.loaded[n]
	f.mu.Unlock()
	if ok {
		return l.m, l.v, nil
	}
	v, err := Get(ctx, f.cfg.Registry, f.cfg.Projection, n)
	if err != nil {
		return nil, v, err
	}
	b, err := f.cfg.Blobs.Get(ctx, v.SHA256)
	if err != nil {
		return nil, v, fmt.Errorf("version %d of %s: %w", n, f.cfg.Projection, err)
	}
	m, err := f.cfg.Runtime.Load(ctx, moduleName(f.cfg.Projection, n), b, f.cfg.ModuleOptions...)
	if err != nil {
		return nil, v, fmt.Errorf("version %d of %s: %w", n, f.cfg.Projection, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		_ = m.Close(context.WithoutCancel(ctx))
		return nil, v, fmt.Errorf("%w: the follower of %s is closed", ErrConfig, f.cfg.Projection)
	}
	if prev, ok := f.loaded[n]; ok { // loaded concurrently
		_ = m.Close(context.WithoutCancel(ctx))
		return prev.m, prev.v, nil
	}
	f.loaded[n], f.byName[m.Name()] = loadedVersion{m, v}, n
	return m, v, nil
}

// Close closes every loaded version. The shards must no longer run (call it after the runner
// returned). Idempotent.
func (f *Follower) Close(ctx context.Context) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	mods := f.loaded
	f.loaded = nil
	f.mu.Unlock()
	for _, l := range mods {
		_ = l.m.Close(ctx)
	}
	return nil
}
