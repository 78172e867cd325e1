// Package deploy is how a handler module becomes a projection's running version: Deployer
// validates uploaded bytes (size, the loader's checks, compilation with the runtime's
// compilation cache, a smoke run over the latest events of each shard into a scratch read
// model), stores them content-addressed in the module store, records a new numbered version in
// the registry and, when asked, activates it; Activate and Rollback move the active pointer.
// Nothing is stored when validation fails, and nothing is activated that was not validated.
//
// Concurrent deploys: each gets its own version number; of deploys that activate, the pointer
// is read before validation and written on condition that it did not change meanwhile, so when
// two race exactly one becomes active and the other reports registry.ErrConflict (its version
// stays stored, inactive, for `projhost handlers activate`).
package deploy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/source"
)

// DefaultSmokeEvents is how many of each shard's latest events the smoke run handles.
const DefaultSmokeEvents = 100

// Errors.
var (
	// ErrTooLarge: the module is larger than Config.MaxModuleSize.
	ErrTooLarge = host.ErrModuleTooLarge
	// ErrSmokeFailed: the module failed on the smoke run (*SmokeError wraps it).
	ErrSmokeFailed = errors.New("deploy: the module failed its smoke run")
	// ErrNoPrevious: Rollback found no previous version to return to.
	ErrNoPrevious = errors.New("deploy: no previous version to roll back to")
	// ErrNoActive: the projection has no active version.
	ErrNoActive = errors.New("deploy: the projection has no active version")
	// ErrConfig: a bad Config.
	ErrConfig = errors.New("deploy: bad configuration")
)

// SmokeError is the module's failure on the smoke run.
type SmokeError struct {
	ShardID string
	Err     error // the handler's error (a *host.HandlerError)
}

func (e *SmokeError) Error() string {
	return fmt.Sprintf("deploy: the module failed its smoke run on the latest events of shard %s: %v", e.ShardID, e.Err)
}

// Unwrap returns ErrSmokeFailed and the handler's error.
func (e *SmokeError) Unwrap() []error { return []error{ErrSmokeFailed, e.Err} }

// Config configures a Deployer.
type Config struct {
	Registry registry.Store // required
	Blobs    registry.Blobs // required: the module store
	// Runtime loads (validates and compiles) the module: its memory limit and compilation
	// cache are the ones the workers use. Required.
	Runtime *host.Runtime
	// Source gives the smoke run its events when it is a source.Tailer (the local journal,
	// Kinesis); nil, or a source that is not: no smoke run (Result.Smoke.Skipped says why).
	Source source.Source
	// MaxModuleSize is the largest module accepted, in bytes; default
	// registry.DefaultMaxModuleSize (64 MiB).
	MaxModuleSize int
	// SmokeEvents is how many of each open shard's latest events the smoke run handles;
	// default DefaultSmokeEvents. Negative: no smoke run.
	SmokeEvents int
	// Now is the clock of upload times; default time.Now.
	Now func() time.Time
}

// Validate checks c and fills in the defaults.
func (c *Config) Validate() error {
	switch {
	case c.Registry == nil || c.Blobs == nil || c.Runtime == nil:
		return fmt.Errorf("%w: a registry, a module store and a runtime are required", ErrConfig)
	case c.MaxModuleSize < 0:
		return fmt.Errorf("%w: max module size %d", ErrConfig, c.MaxModuleSize)
	}
	if c.MaxModuleSize == 0 {
		c.MaxModuleSize = registry.DefaultMaxModuleSize
	}
	if c.SmokeEvents == 0 {
		c.SmokeEvents = DefaultSmokeEvents
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Deployer deploys modules. Safe for concurrent use.
type Deployer struct{ cfg Config }

// New returns a Deployer. Errors: ErrConfig.
func New(cfg Config) (*Deployer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Deployer{cfg: cfg}, nil
}

// Options are a deploy's choices.
type Options struct {
	Note     string // stored with the version (at most registry.MaxNoteBytes)
	Activate bool   // activate the version once stored
}

// Result is what a deploy did.
type Result struct {
	Version   registry.Version
	Activated bool
	Active    registry.Active // the pointer written, when Activated
	Compile   time.Duration   // validation and compilation (host.Runtime.Load)
	Smoke     Smoke
}

// Smoke is the smoke run's report.
type Smoke struct {
	Skipped   string // why there was none ("" = it ran)
	Shards    []ShardSmoke
	Events    int // events handled, all shards
	Mutations int // mutations returned, all shards
}

// ShardSmoke is one shard's part of the smoke run.
type ShardSmoke struct {
	ShardID   string
	Events    int
	Mutations int
}

// Deploy validates wasm, stores it and records it as projection's next version, then
// activates it if opts.Activate. Errors: ErrTooLarge; host.ErrInvalidModule (wrapped, naming
// the problem); a *SmokeError; registry.ErrInvalid (a note too long); registry.ErrConflict
// when activating and another deploy, activate or rollback changed the pointer since this
// deploy read it (the version stays stored: Result.Version is set); store errors. On every
// error before the version is recorded nothing is stored but, possibly, the module bytes
// (content-addressed: harmless).
func (d *Deployer) Deploy(ctx context.Context, projection string, wasm []byte, opts Options) (Result, error) {
	var res Result
	if projection == "" {
		return res, fmt.Errorf("%w: no projection name", registry.ErrInvalid)
	}
	if len(opts.Note) > registry.MaxNoteBytes {
		return res, fmt.Errorf("%w: a note of %d bytes: at most %d", registry.ErrInvalid, len(opts.Note), registry.MaxNoteBytes)
	}
	if len(wasm) > d.cfg.MaxModuleSize {
		return res, fmt.Errorf("%w: %d bytes, the limit is %d (--max-module-size)", ErrTooLarge, len(wasm), d.cfg.MaxModuleSize)
	}
	var before registry.Active
	if opts.Activate {
		var err error
		if before, err = d.cfg.Registry.Active(ctx, projection); err != nil {
			return res, err
		}
	}
	start := time.Now()
	mod, err := d.cfg.Runtime.Load(ctx, projection, wasm)
	if err != nil {
		return res, err
	}
	defer mod.Close(ctx)
	res.Compile = time.Since(start)
	if res.Smoke, err = d.smoke(ctx, mod); err != nil {
		return res, err
	}
	sum := registry.Sum(wasm)
	if err := d.cfg.Blobs.Put(ctx, sum, wasm); err != nil {
		return res, err
	}
	res.Version, err = d.cfg.Registry.Add(ctx, registry.Version{Projection: projection, SHA256: sum, Size: int64(len(wasm)),
		ABI: 1, UploadedMs: d.cfg.Now().UnixMilli(), Note: opts.Note})
	if err != nil {
		return res, err
	}
	if !opts.Activate {
		return res, nil
	}
	res.Active, err = d.cfg.Registry.Activate(ctx, projection, res.Version.Number, before.Counter)
	if err != nil {
		return res, fmt.Errorf("version %d is stored but not active: %w", res.Version.Number, err)
	}
	res.Activated = true
	return res, nil
}

// smoke runs mod over the latest SmokeEvents events of each open shard, each shard into its
// own empty read model, in one batch per shard.
func (d *Deployer) smoke(ctx context.Context, mod *host.Module) (Smoke, error) {
	var out Smoke
	if d.cfg.SmokeEvents < 0 {
		out.Skipped = "turned off"
		return out, nil
	}
	t, ok := d.cfg.Source.(source.Tailer)
	if !ok {
		out.Skipped = "the source cannot give its latest events"
		if d.cfg.Source == nil {
			out.Skipped = "no source"
		}
		return out, nil
	}
	shards, err := d.cfg.Source.Shards(ctx)
	if err != nil {
		return out, fmt.Errorf("deploy: smoke run: %w", err)
	}
	for _, s := range shards {
		if s.Closed {
			continue
		}
		evs, err := t.Tail(ctx, s.ID, d.cfg.SmokeEvents)
		if err != nil {
			return out, fmt.Errorf("deploy: smoke run: latest events of %s: %w", s.ID, err)
		}
		ss := ShardSmoke{ShardID: s.ID, Events: len(evs)}
		if len(evs) > 0 {
			muts, err := handleOnce(ctx, mod, s.ID, evs)
			if err != nil {
				return out, &SmokeError{ShardID: s.ID, Err: err}
			}
			ss.Mutations = len(muts)
		}
		out.Shards = append(out.Shards, ss)
		out.Events += ss.Events
		out.Mutations += ss.Mutations
	}
	if out.Events == 0 {
		out.Skipped = "no events yet"
	}
	return out, nil
}

func handleOnce(ctx context.Context, mod *host.Module, shardID string, evs []event.Event) ([]event.Mutation, error) {
	h := mod.NewHandler(shardID)
	defer h.Close(ctx)
	return h.Handle(ctx, evs, host.NewMemReadModel())
}

// Activate makes version n projection's active version (reading the pointer, then writing it
// on its counter), after checking that the module store holds its bytes intact (a version the
// workers could not load is never activated). When n is already active nothing is written and
// changed is false (a retried command leaves the rollback target as it was). Errors:
// registry.ErrNoVersion, registry.ErrNoModule / ErrCorrupt (wrapped, naming the version),
// registry.ErrConflict (another change came between the read and the write: try again), store
// errors.
func Activate(ctx context.Context, reg registry.Store, blobs registry.Blobs, projection string, n int64) (a registry.Active, changed bool, err error) {
	if a, err = reg.Active(ctx, projection); err != nil {
		return a, false, err
	}
	return activateFrom(ctx, reg, blobs, a, n)
}

func activateFrom(ctx context.Context, reg registry.Store, blobs registry.Blobs, a registry.Active, n int64) (registry.Active, bool, error) {
	v, err := Get(ctx, reg, a.Projection, n)
	if err != nil {
		return a, false, err
	}
	if a.Version == n {
		return a, false, nil
	}
	if _, err := blobs.Get(ctx, v.SHA256); err != nil {
		return a, false, fmt.Errorf("version %d of %s cannot be activated: %w (deploy its module again)", n, a.Projection, err)
	}
	a, err = reg.Activate(ctx, a.Projection, n, a.Counter)
	return a, err == nil, err
}

// Rollback makes the previous active version active again (the pointer's Previous; checked
// as Activate checks); a second rollback undoes the first. Errors: ErrNoPrevious, those of
// Activate.
func Rollback(ctx context.Context, reg registry.Store, blobs registry.Blobs, projection string) (registry.Active, error) {
	a, err := reg.Active(ctx, projection)
	if err != nil {
		return a, err
	}
	if a.Previous == 0 || a.Previous == a.Version {
		if a.Version == 0 {
			return a, fmt.Errorf("%w: %s has no active version", ErrNoPrevious, projection)
		}
		return a, fmt.Errorf("%w: version %d of %s is the only one that was active", ErrNoPrevious, a.Version, projection)
	}
	a, _, err = activateFrom(ctx, reg, blobs, a, a.Previous)
	return a, err
}

// ActiveModule returns projection's active version and its bytes from blobs. Errors:
// ErrNoActive, registry.ErrNoVersion (the pointer names a version the registry lacks),
// registry.ErrNoModule and registry.ErrCorrupt from the module store, store errors.
func ActiveModule(ctx context.Context, reg registry.Store, blobs registry.Blobs, projection string) (registry.Version, []byte, error) {
	a, err := reg.Active(ctx, projection)
	if err != nil {
		return registry.Version{}, nil, err
	}
	if a.Version == 0 {
		return registry.Version{}, nil, fmt.Errorf("%w: %s (deploy one: projhost deploy --name %s --handler H.wasm --activate)", ErrNoActive, projection, projection)
	}
	v, err := Get(ctx, reg, projection, a.Version)
	if err != nil {
		return v, nil, err
	}
	b, err := blobs.Get(ctx, v.SHA256)
	if err != nil {
		return v, nil, fmt.Errorf("version %d of %s: %w", v.Number, projection, err)
	}
	return v, b, nil
}

// Get returns version n of projection. Errors: registry.ErrNoVersion, store errors.
func Get(ctx context.Context, reg registry.Store, projection string, n int64) (registry.Version, error) {
	vs, err := reg.Versions(ctx, projection)
	if err != nil {
		return registry.Version{}, err
	}
	for _, v := range vs {
		if v.Number == n {
			return v, nil
		}
	}
	return registry.Version{}, fmt.Errorf("%w: %s has no version %d", registry.ErrNoVersion, projection, n)
}
