package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/store"
)

// OnError names an error policy: what the core does with an event the handler keeps failing
// on (a projhost.fail call, a trap, an exit, the batch deadline, bad output, or an event the
// ABI cannot carry). The set follows Akka Projections' recovery strategies.
type OnError string

// The error policies.
const (
	// Retry retries the batch for ever with backoff (RetryMin doubling up to RetryMax); the
	// shard waits until the handler or the event is fixed. MaxAttempts is ignored, unless the
	// mode delivers failed events again itself (ShardOptions.YieldRetries: Lambda mode).
	Retry OnError = "retry"
	// DeadLetter retries the batch MaxAttempts times, then finds the first failing event by
	// bisection (the handler is deterministic, so a failing sub-batch fails again), stores it
	// as a dead letter and goes on after it. Nothing is lost: the letter holds the full event
	// and can be replayed once the handler is fixed.
	DeadLetter OnError = "dead-letter"
	// Stop retries the batch MaxAttempts times, then applies the events before the failing one
	// and stops the shard: it is shown STOPPED with the error until resumed (projhost resume);
	// the other shards go on.
	Stop OnError = "stop"
)

// DefaultOnError is the default policy: Stop. A deterministic handler retried for ever is a
// stuck shard that says little; skipping an event silently is lost data. Stop loses nothing,
// keeps the read model a faithful prefix of the stream, and says what failed and where (status,
// the exit status of run --until-caught-up); DeadLetter is the choice when progress matters
// more than completeness, and keeps the event for a replay.
const DefaultOnError = Stop

// DefaultMaxAttempts is the default number of handler calls on a failing batch before Stop or
// DeadLetter acts (with the default backoff, about 1.5 s of retries).
const DefaultMaxAttempts = 5

// Policy is a projection's error policy.
type Policy struct {
	OnError     OnError // default DefaultOnError
	MaxAttempts int     // calls of a failing batch before DeadLetter or Stop act; default DefaultMaxAttempts; ignored by Retry (but see ShardOptions.YieldRetries)
}

// ParseOnError accepts "retry", "dead-letter" or "stop".
func ParseOnError(s string) (OnError, error) {
	switch o := OnError(s); o {
	case Retry, DeadLetter, Stop:
		return o, nil
	}
	return "", fmt.Errorf("%w: unknown error policy %q: use retry, dead-letter or stop", ErrConfig, s)
}

// Defaults of Config.
const (
	DefaultCursorEveryEvents = 2000
	DefaultCursorEvery       = time.Second
	DefaultMaxBatchBytes     = 4 << 20
	DefaultRetryMin          = 100 * time.Millisecond
	DefaultRetryMax          = 10 * time.Second
)

// Config configures a Processor. Zero values take the documented defaults; Validate is the one
// place that accepts or rejects values (the CLI calls it too).
type Config struct {
	Projection string         // required
	Stores     *store.Stores  // required; see store.Stores.Validate
	Modules    ModuleProvider // required: the handler module, asked at every batch boundary
	Policy     Policy         // error policy; default Stop after 5 attempts
	Hooks      Hooks          // observers; every hook is optional
	Logger     *slog.Logger   // default slog.Default()

	CursorEveryEvents int           // flush after this many handled events; default 2000
	CursorEvery       time.Duration // ... or when events are pending for this long; default 1s
	MaxBatchBytes     int           // event data bytes per handler call; default 4 MiB (a single larger event goes alone)
	RetryMin          time.Duration // first backoff after a failure (handler or store); default 100ms
	RetryMax          time.Duration // backoff cap; default 10s
}

// ErrConfig is wrapped by errors about a bad Config.
var ErrConfig = errors.New("projection: bad configuration")

// MaxNameBytes bounds a projection name.
const MaxNameBytes = 255

// CheckName returns an error wrapping ErrConfig unless name can name a projection: 1 to
// MaxNameBytes bytes of UTF-8 without control characters (names are keys in every store and
// columns of `projhost status`).
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: projection name is required", ErrConfig)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: projection name of %d bytes: at most %d", ErrConfig, len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: projection name %q is not UTF-8", ErrConfig, name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: projection name %q holds a control character", ErrConfig, name)
	}
	return nil
}

// Validate checks c and fills in the defaults.
func (c *Config) Validate() error {
	if err := CheckName(c.Projection); err != nil {
		return err
	}
	switch {
	case c.Modules == nil:
		return fmt.Errorf("%w: a module provider is required", ErrConfig)
	case c.CursorEveryEvents < 0:
		return fmt.Errorf("%w: cursor-every-events must be at least 1", ErrConfig)
	case c.CursorEvery < 0:
		return fmt.Errorf("%w: cursor-every must be positive", ErrConfig)
	case c.MaxBatchBytes < 0:
		return fmt.Errorf("%w: max batch bytes must be positive", ErrConfig)
	case c.RetryMin < 0 || c.RetryMax < 0:
		return fmt.Errorf("%w: retry backoff must be positive", ErrConfig)
	case c.Policy.MaxAttempts < 0:
		return fmt.Errorf("%w: max-attempts must be at least 1", ErrConfig)
	}
	if err := c.Stores.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.Policy.OnError == "" {
		c.Policy.OnError = DefaultOnError
	}
	if _, err := ParseOnError(string(c.Policy.OnError)); err != nil {
		return err
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Policy.MaxAttempts, DefaultMaxAttempts)
	def(&c.CursorEveryEvents, DefaultCursorEveryEvents)
	def(&c.MaxBatchBytes, DefaultMaxBatchBytes)
	defDur(&c.CursorEvery, DefaultCursorEvery)
	defDur(&c.RetryMin, DefaultRetryMin)
	defDur(&c.RetryMax, DefaultRetryMax)
	if c.RetryMax < c.RetryMin {
		c.RetryMax = c.RetryMin
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// ModuleProvider gives the core the handler module to run. Module is called at every batch
// boundary; when it returns a different module than the shard's handler runs, the shard first
// commits what the old one produced, then continues with a handler of the new one (a later
// module registry swaps versions this way). It must be safe for concurrent use and fast (no
// I/O).
type ModuleProvider interface {
	Module() *host.Module
}

// ModuleRecorder is implemented by a ModuleProvider whose modules are versions it records per
// shard (the module registry's deploy.Follower). The core then makes every module change of a
// shard durable before the new module's first commit, and a new owner that must handle the range
// of an interrupted write again (Fenced mode: the read model's high-water mark is past the
// cursor, Processor.Open) handles it with the module that wrote it, not with the provider's
// current one, and switches at the next batch boundary after it. So no event is applied by two
// modules when a shard changes owner while its module changes.
type ModuleRecorder interface {
	// RecordModule records that the shard runs i.Module for the events after i.Seq (i.From ""
	// at a shard's open). The core calls it before the module handles anything, and retries
	// an error with backoff like a store error (an error wrapping ErrLost ends the shard). A
	// record of an older epoch than the one stored must be dropped without error (a zombie's).
	RecordModule(ctx context.Context, i ModuleInfo) error
	// ModuleAfter returns the module recorded as handling the shard's events after seq (the
	// cursor): the one that wrote an interrupted write's range. nil when no record tells (the
	// current module is used). Errors are retried like RecordModule's.
	ModuleAfter(ctx context.Context, shardID, seq string) (*host.Module, error)
}

// Fixed returns a ModuleProvider that always gives m.
func Fixed(m *host.Module) ModuleProvider { return fixed{m} }

type fixed struct{ m *host.Module }

func (f fixed) Module() *host.Module { return f.m }
