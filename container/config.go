// Package container is projhost's container mode: one long-lived worker process of a
// projection among any number sharing the same stores. A Runner holds shard leases through a
// shardmap.Manager, pulls each owned shard's events from a source.Source, and feeds them to the
// per-shard core (projection.Processor), which handles, applies the error policy and commits.
// It keeps the shard set live (new and split shards get leases; a child starts after every
// parent is finished) and dispatches dead-letter replays to the shards' owners.
package container

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
)

// Defaults of Config.
const (
	DefaultBatchSize    = 500
	DefaultBatchWait    = 200 * time.Millisecond
	DefaultShardSync    = 10 * time.Second
	DefaultControlCheck = time.Second
)

// Config configures a Runner. Zero values take the documented defaults; Validate is the one
// place values are accepted or rejected (the CLI calls it).
type Config struct {
	// Projection configures the per-shard core (projection name, stores, module, error
	// policy, hooks, cursor batching, retry backoff).
	projection.Config

	WorkerID string        // required: unique per worker process
	Source   source.Source // required
	// ModuleID is the handler module's identity (ModuleID(bytes): "sha256:<hex>"), written on
	// every lease this worker takes or renews. A worker whose ModuleID differs from that of a
	// live worker of the same projection refuses to start (Run returns a
	// *shardmap.ModuleConflictError), so a read model never mixes two handlers. Default "": no
	// identity, no check (tests, embedders that guarantee one module themselves).
	ModuleID string

	BatchSize int // max events per read and handler call; default 500
	// BatchWait is the max wait for a batch to fill; default 200ms. A shard found idle (no new
	// events, everything committed) is then read less often: BatchWait, doubling, up to
	// IdleReadMax between reads.
	BatchWait         time.Duration
	LeaseDuration     time.Duration // default shardmap.DefaultLeaseDuration (6s); at least 1s
	MaxStealsPerRound int           // default 1; stealing cannot be turned off here
	// ShardSync is how often the source's shard list is read again: new shards (the children
	// of a split, a merge or an UpdateShardCount) get their leases then, in the lease store
	// every worker shares, and a lease round (every third of LeaseDuration) of any worker takes
	// a child once every parent is finished. The list is also read right after this worker
	// finishes a shard, so the children of a shard read to its end here do not wait for the
	// next sync; ShardSync bounds the wait for the others (a worker that finished the parents
	// died before its sync; parents past the retention period, which nobody reads). Each sync is one Source.Shards call (Kinesis:
	// ListShards, paged, whose quota the Kinesis API reference gives as 1000 calls a second per
	// stream, shared by every consumer) and one lease-store write per new shard. 0 takes
	// DefaultShardSync (10s); a negative value is refused (ErrConfig).
	ShardSync time.Duration
	// ControlCheck is how often requested dead-letter replays, resumes of stopped shards and
	// the projection's pauses (cursorstore.Store.Pauses: one read per worker) are looked for.
	// Default 1s.
	ControlCheck time.Duration

	// UntilCaughtUp makes Run return once every shard is caught up and no dead-letter replay
	// is pending: every closed shard finished, and every open shard's cursor at the source's
	// head (a source.Header: the local journal), or, from a source.Prober (Kinesis), every open
	// shard read to its tip (an empty read with MillisBehindLatest 0 after its cursor, by this
	// worker's reader or a probe; see Runner.caughtUp). A stopped shard makes Run return an
	// error wrapping ErrShardStopped instead of waiting.
	UntilCaughtUp bool
}

// ErrConfig is wrapped by errors about a bad Config (projection.ErrConfig too for the core's).
var ErrConfig = errors.New("container: bad runner configuration")

// Validate checks c and fills in the defaults.
func (c *Config) Validate() error {
	switch {
	case c.WorkerID == "":
		return fmt.Errorf("%w: worker id is required", ErrConfig)
	case c.Source == nil:
		return fmt.Errorf("%w: a source is required", ErrConfig)
	case c.BatchSize < 0:
		return fmt.Errorf("%w: batch size must be at least 1", ErrConfig)
	case c.BatchWait < 0:
		return fmt.Errorf("%w: batch wait must be positive", ErrConfig)
	case c.LeaseDuration != 0 && c.LeaseDuration < time.Second:
		return fmt.Errorf("%w: lease duration must be at least 1s (renewals happen every third of it)", ErrConfig)
	case c.MaxStealsPerRound < 0 || c.ControlCheck < 0:
		return fmt.Errorf("%w: steals per round and control check must be positive", ErrConfig)
	case c.ShardSync < 0:
		return fmt.Errorf("%w: shard-sync %v is negative: give how often the shard list is read again, e.g. 10s (0: the default, %v)", ErrConfig, c.ShardSync, DefaultShardSync)
	}
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if c.UntilCaughtUp {
		_, hd := c.Source.(source.Header)
		_, pr := c.Source.(source.Prober)
		if !hd && !pr {
			return fmt.Errorf("%w: until-caught-up needs a source that reports its head (source.Header: the local journal) or probes its lag (source.Prober: Kinesis)", ErrConfig)
		}
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchWait == 0 {
		c.BatchWait = DefaultBatchWait
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = shardmap.DefaultLeaseDuration
	}
	if c.MaxStealsPerRound == 0 {
		c.MaxStealsPerRound = shardmap.DefaultMaxStealsPerRound
	}
	if c.ShardSync == 0 {
		c.ShardSync = DefaultShardSync
	}
	if c.ControlCheck == 0 {
		c.ControlCheck = DefaultControlCheck
	}
	return nil
}

// ModuleID returns the identity of a handler module for Config.ModuleID: "sha256:" and the
// lowercase hex SHA-256 of its bytes (the .wasm file as loaded).
func ModuleID(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return "sha256:" + hex.EncodeToString(sum[:])
}
