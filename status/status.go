// Package status tells, per projection and shard, what the stores say of it: the lease's owner
// and whether that owner is live, the shard's state (running, paused, stopped, finished, idle),
// its cursor, the source's head and the lag, open dead letters and the module version. It is
// the library behind `projhost status` (table and --json) and the worker's status page
// (package statuspage), which adds the figures only a running worker knows (Live).
//
// Use: Rows with a Config naming the stores and the source, for the projections Projections
// lists (or those you name). A Watcher judges lease liveness the way the lease manager does
// (shardmap): a lease whose counter has not changed for a lease duration on the watcher's own
// monotonic clock is expired, so clock skew between machines never makes a live owner look
// dead. A one-shot caller (the CLI) watches for up to a lease duration with Watch; a
// long-lived one (the page) keeps one Watcher and calls Rows now and then.
package status

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/store"
)

// Run states of a shard (Row.RunState), in the order Rows decides them: the first that applies.
const (
	RunFinished = "finished" // its lease is finished: a closed shard read to its end
	RunStopped  = "stopped"  // the stop error policy stopped it (Row.Stopped says why) until `projhost resume`
	RunPaused   = "paused"   // an operator paused it or its projection (`projhost pause`); its owner keeps the lease
	RunRunning  = "running"  // an owner holds its lease, live or not judged (Row.Lease live or unknown)
	RunIdle     = "idle"     // nobody runs it: no lease, no owner, or the owner's lease expired
)

// Lease liveness (Row.Lease).
const (
	LeaseFree    = "free"    // no owner (no lease yet, released, handed back or finished)
	LeaseLive    = "live"    // the owner renewed it less than a lease duration ago (its counter changed while watched)
	LeaseExpired = "expired" // its counter did not change for a lease duration or more while watched: the owner is dead or cut off
	LeaseUnknown = "unknown" // not watched long enough to tell (no Watcher, or less than a lease duration and no renewal seen)
)

// Row is one shard of one projection. Its JSON form is `projhost status --json`'s line: the
// field names are stable; fields are only added.
type Row struct {
	Projection string `json:"projection"`
	Shard      string `json:"shard"`
	Owner      string `json:"owner"`
	// State is the lease's state ("active", "finished"; "" without a lease), or "STOPPED" for a
	// stopped shard (kept as it was: RunState is the summary).
	State  string `json:"state"`
	Epoch  int64  `json:"epoch"`
	Cursor string `json:"cursor"`
	// Head is the journal's last sequence number of the shard ("" for Kinesis, or an empty shard).
	Head      string `json:"head"`
	LagEvents int64  `json:"lag_events"` // -1 when unknown (Kinesis) or the cursor is beyond the head (see Problem)
	// LagMillis (Kinesis, Config.Prober set) is MillisBehindLatest at the cursor (a probe:
	// GetShardIterator AFTER_SEQUENCE_NUMBER the cursor, GetRecords Limit 1); -1 when the
	// server did not say; 0 for a finished shard; absent for the journal or without a probe.
	LagMillis *int64 `json:"lag_ms,omitempty"`
	// RecordsBehind (Kinesis, probed): the probe found a record after the cursor.
	RecordsBehind *bool `json:"records_behind,omitempty"`
	// Closed: the shard was split or merged (no new records); its lease is FINISHED once read.
	Closed  bool   `json:"closed,omitempty"`
	Problem string `json:"problem,omitempty"`
	// Stopped is why the stop error policy stopped the shard ("" = not stopped); State is then
	// "STOPPED" until `projhost resume`.
	Stopped string `json:"stopped,omitempty"`
	// DeadLetters counts the shard's dead letters not replayed or dropped yet.
	DeadLetters int `json:"dead_letters"`
	// Version is the module registry version the shard's owner last switched it to,
	// VersionSince the switch point (the last event the version before handled); absent when
	// none was recorded.
	Version      int64  `json:"version,omitempty"`
	VersionSince string `json:"version_since,omitempty"`

	// RunState is the shard's state in one word: RunFinished, RunStopped, RunPaused,
	// RunRunning or RunIdle.
	RunState string `json:"run_state"`
	// Lease is the owner's liveness: LeaseFree, LeaseLive, LeaseExpired or LeaseUnknown.
	Lease string `json:"lease"`
	// LeaseSilentMs, for a watched owned lease (Lease live or expired), is how long ago, in ms
	// on the watcher's clock, its counter last changed (or was first seen, when it never did).
	LeaseSilentMs int64 `json:"lease_silent_ms,omitempty"`
	// Paused: the shard is paused, by itself or with its projection (cursor store Pauses).
	Paused bool `json:"paused,omitempty"`
}

// Config is what Rows reads. Stores and Source are required.
type Config struct {
	// Stores are the backend's stores: leases, cursors (and pauses), dead letters and, when
	// not nil, the module registry's per-shard versions.
	Stores *store.Stores
	// Source lists the shards (source.Source.Shards).
	Source interface {
		Shards(ctx context.Context) ([]source.Shard, error)
	}
	// Header, when set (the local journal), gives each shard's head, and the lag in events.
	Header source.Header
	// Prober, when set and Header is nil (Kinesis), is called once per unfinished shard for
	// its lag in ms (source.Prober; it counts against the shard's read quota). nil: no lag.
	Prober source.Prober
	// Watcher, when set, judges lease liveness (Row.Lease); nil: every owned lease is
	// LeaseUnknown. Rows records what it lists in it.
	Watcher *Watcher
}

// ErrConfig is wrapped by the errors of a Config missing a required field.
var ErrConfig = errors.New("status: bad configuration")

// ErrNoLister is returned by Projections for a lease store that cannot list projections.
var ErrNoLister = errors.New("status: this lease store cannot list its projections: name the projection (--name)")

// Projections returns the names of the projections that have leases in ls, sorted, when the
// store can list them (the embedded store can; DynamoDB's cannot: ErrNoLister).
func Projections(ctx context.Context, ls shardmap.LeaseStore) ([]string, error) {
	pl, ok := ls.(interface {
		Projections(ctx context.Context) ([]string, error)
	})
	if !ok {
		return nil, ErrNoLister
	}
	names, err := pl.Projections(ctx)
	if err != nil {
		return nil, fmt.Errorf("status: listing projections: %w", err)
	}
	return names, nil
}

// Rows returns one Row per projection of projections and shard of the source, in that order
// (shards in the source's order). It reads each projection's leases, pauses, dead letters and
// registry versions once and each shard's cursor once, plus the head (journal) or a probe
// (Kinesis with a Prober). A probe's failure is the row's Problem, not an error. Errors: a
// store's or the source's, wrapped with the projection's name; ErrConfig.
func Rows(ctx context.Context, cfg Config, projections []string) ([]Row, error) {
	if cfg.Stores == nil || cfg.Source == nil {
		return nil, fmt.Errorf("%w: Stores and Source are required", ErrConfig)
	}
	shards, err := cfg.Source.Shards(ctx)
	if err != nil {
		return nil, fmt.Errorf("status: listing the shards: %w", err)
	}
	var rows []Row
	for _, p := range projections {
		rs, err := projectionRows(ctx, cfg, p, shards)
		if err != nil {
			return nil, fmt.Errorf("status of projection %q: %w", p, err)
		}
		rows = append(rows, rs...)
	}
	return rows, nil
}

func projectionRows(ctx context.Context, cfg Config, p string, shards []source.Shard) ([]Row, error) {
	st := cfg.Stores
	leases, err := st.Leases.List(ctx, p)
	if err != nil {
		return nil, err
	}
	byShard := make(map[string]shardmap.Lease, len(leases))
	for _, l := range leases {
		byShard[l.ShardID] = l
	}
	var live map[string]Liveness
	if cfg.Watcher != nil {
		live = cfg.Watcher.Observe(p, leases)
	}
	pauses, err := st.Cursors.Pauses(ctx, p)
	if err != nil {
		return nil, err
	}
	letters, err := st.DeadLetters.List(ctx, p, deadletter.Filter{})
	if err != nil {
		return nil, err
	}
	open := map[string]int{}
	for _, l := range letters {
		if l.State == deadletter.StateFailed || l.State == deadletter.StateReplayRequested {
			open[l.ShardID]++
		}
	}
	versions := map[string]registry.ShardVersion{}
	if st.Registry != nil {
		vs, err := st.Registry.Shards(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			versions[v.ShardID] = v
		}
	}
	rows := make([]Row, 0, len(shards))
	for _, sh := range shards {
		row := Row{Projection: p, Shard: sh.ID, Closed: sh.Closed, DeadLetters: open[sh.ID], Paused: pauses.Paused(sh.ID)}
		l, leased := byShard[sh.ID]
		if leased {
			row.Owner, row.State, row.Epoch = l.Owner, string(l.State), l.Epoch
		}
		row.Lease = LeaseFree
		if row.Owner != "" {
			row.Lease = LeaseUnknown
			if lv, ok := live[sh.ID]; ok {
				row.Lease, row.LeaseSilentMs = lv.Lease, lv.Silent.Milliseconds()
			}
		}
		c, err := st.Cursors.Get(ctx, p, sh.ID)
		if err != nil {
			return nil, err
		}
		row.Cursor = c.Seq
		if c.Stopped != "" {
			row.State, row.Stopped = "STOPPED", c.Stopped
		}
		if v, ok := versions[sh.ID]; ok {
			row.Version, row.VersionSince = v.Version, v.Seq
		}
		row.RunState = runState(leased && l.State == shardmap.StateFinished, row)
		if err := lag(ctx, cfg, &row); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// runState is the one-word state of row (see the Run constants).
func runState(finished bool, row Row) string {
	switch {
	case finished:
		return RunFinished
	case row.Stopped != "":
		return RunStopped
	case row.Paused:
		return RunPaused
	case row.Lease == LeaseLive || row.Lease == LeaseUnknown:
		return RunRunning
	}
	return RunIdle
}

// lag fills in row's head and lag: from the journal's head, or a Kinesis probe.
func lag(ctx context.Context, cfg Config, row *Row) error {
	if cfg.Header == nil {
		row.LagEvents = -1
		if cfg.Prober == nil {
			return nil
		}
		if row.State == string(shardmap.StateFinished) {
			row.LagMillis, row.RecordsBehind = new(int64), new(bool)
			return nil
		}
		p, err := cfg.Prober.Probe(ctx, row.Shard, row.Cursor)
		if err != nil {
			row.Problem = err.Error()
			return nil
		}
		row.LagMillis, row.RecordsBehind = &p.MillisBehind, &p.More
		return nil
	}
	head, err := cfg.Header.Head(ctx, row.Shard)
	if err != nil {
		return err
	}
	row.Head = head
	// A child of a split or merge numbers its events after its parents'.
	start, err := journalStart(ctx, cfg.Header, row.Shard)
	if err != nil {
		return err
	}
	row.LagEvents = SeqDiff(row.Head, maxSeq(row.Cursor, start))
	if source.CompareSeq(row.Cursor, row.Head) > 0 {
		row.LagEvents = -1
		row.Problem = "cursor beyond the journal's end: was the journal replaced? use a new --name"
	}
	return nil
}

// journalStart is the sequence number before a shard's first one on the journal
// (journal.Journal.Start: "" for the shards Create made, the parents' largest last one for a
// child), "" for other sources.
func journalStart(ctx context.Context, hd source.Header, shard string) (string, error) {
	if s, ok := hd.(interface {
		Start(context.Context, string) (string, error)
	}); ok {
		return s.Start(ctx, shard)
	}
	return "", nil
}

// maxSeq is the larger of two decimal sequence numbers ("" = 0).
func maxSeq(a, b string) string {
	if source.CompareSeq(orZero(a), orZero(b)) < 0 {
		return b
	}
	return a
}

// SeqDiff returns head - cursor for decimal sequence numbers ("" = 0), never negative (0 when
// cursor is beyond head, or either is not a decimal number). The journal numbers a shard's
// events consecutively (from its Start), so this is the lag in events when the cursor is at
// least the shard's Start.
func SeqDiff(head, cursor string) int64 {
	h, c := new(big.Int), new(big.Int)
	if _, ok := h.SetString(orZero(head), 10); !ok {
		return 0
	}
	if _, ok := c.SetString(orZero(cursor), 10); !ok {
		return 0
	}
	d := h.Sub(h, c)
	if d.Sign() < 0 || !d.IsInt64() {
		return 0
	}
	return d.Int64()
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}
