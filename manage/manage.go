// Package manage is the library behind the management verbs of a projection: pause and
// resume (a projection or one shard), reset (move cursors to a sequence number, the start, the
// source's head or a time) and rebuild (clear the read model and cursors, start over). The CLI
// (projhost pause|resume|reset|rebuild) is a thin face over it; the verbs work on every store
// (store.Stores) while workers run.
//
// # Pause
//
// A pause is persisted in the cursor store (cursorstore.Store.SetPaused), apart from the
// cursors: one flag for the projection as a whole, which also covers shards that appear later
// (split and merge children), and one per shard. Workers read it about once a second
// (container.Config.ControlCheck: one read per worker, not per shard). An owner keeps the
// lease of a paused shard and skips it: it commits what it handled, closes the shard and then
// reads nothing, calls no handler and leaves the cursor alone until the pause is lifted; a
// worker that takes the lease meanwhile (a restart, a rebalance) does not open it either. So
// leases stay balanced across workers, and a resume needs no lease move: the owner reopens the
// shard within about a second. Lambda mode reads no pause: disable the function's event source
// mapping instead (README, Lambda mode).
//
// # Reset and rebuild: fencing
//
// Reset and Rebuild move cursors while workers run. For each shard they pause it, then revoke
// its lease: one conditional lease write that frees it (owner "") with the epoch raised above
// both the lease's and the cursor's. The owner loses the lease at its next renewal and stops
// the shard without saving; anything it still had in flight carries the older epoch and is
// refused: the read model's fence is raised to the new epoch (readmodel.Resetter.ResetWrites,
// which also makes the store forget which writes it applied, see below) and so is the cursor
// (cursorstore.Store.Reset, which writes the new position). A worker that takes the freed
// lease takes it at a still higher epoch and opens the shard only once the pause is lifted,
// from the new cursor. A step that meets a newer epoch (a worker opened the shard in between)
// starts over from the revoke.
//
// # Reset and the exactly-once markers
//
// The stores skip a write whose events they already applied: the embedded store by the
// shard's last applied sequence number, DynamoDB by per-item sequence markers and the
// interrupted write's high-water mark. After a cursor moves back, the events after it must be
// applied again, so ResetWrites resets those: the embedded store forgets the last applied
// number, DynamoDB starts a new marker generation for the shard (markers of a later generation
// compare above every marker of an earlier one; store/dynamo) and drops the high-water mark.
//
// A reset does not undo the read model: the handler applies the events after the new cursor
// again on top of the documents as they are (count events twice, for a counting handler). Use
// it with idempotent handlers, to skip events (forward), or use Rebuild, which clears the
// documents first.
package manage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/store"
)

// Errors callers branch on.
var (
	// ErrUnsupported: the store declares no readmodel.Resetter (store.Stores.Resetter).
	ErrUnsupported = errors.New("manage: this store cannot reset or rebuild a projection")
	// ErrNoShard: the projection has no lease for the shard (no worker ever ran it).
	ErrNoShard = errors.New("manage: the projection has no such shard")
	// ErrFinished: the shard is closed and was read to its end; Reset leaves it (Rebuild starts
	// it over).
	ErrFinished = errors.New("manage: the shard is finished (closed and read to its end)")
	// ErrTarget: a reset target that cannot be parsed or resolved on this source.
	ErrTarget = errors.New("manage: bad reset target")
	// ErrBusy: the shard's lease or fences kept changing under the reset (revokeAttempts).
	ErrBusy = errors.New("manage: the shard kept changing hands during the reset; try again")
)

// Pause pauses the projection as a whole (shardID "") or one shard. Idempotent.
func Pause(ctx context.Context, st *store.Stores, projection, shardID string) error {
	if err := st.Cursors.SetPaused(ctx, projection, shardID, true); err != nil {
		return fmt.Errorf("manage: pausing: %w", err)
	}
	return nil
}

// Resumed is what Resume changed.
type Resumed struct {
	Unpaused []string          // pauses lifted: "" is the projection's own pause
	Stopped  map[string]string // shards whose STOPPED state was cleared, with the reason
	// StillPaused: shardID was given, and the projection as a whole stays paused (resume
	// without a shard lifts it).
	StillPaused bool
}

// Resume lifts pauses and clears STOPPED states (the stop error policy): with shardID "",
// the projection's pause, every shard's pause and every stopped shard; otherwise that shard's
// pause and stopped state only.
func Resume(ctx context.Context, st *store.Stores, projection, shardID string) (Resumed, error) {
	var out Resumed
	p, err := st.Cursors.Pauses(ctx, projection)
	if err != nil {
		return out, fmt.Errorf("manage: resuming: %w", err)
	}
	lift := []string{shardID}
	ids := []string{shardID}
	if shardID == "" {
		lift = lift[:0]
		if p.All {
			lift = append(lift, "")
		}
		lift = append(lift, p.Shards...)
		leases, err := st.Leases.List(ctx, projection)
		if err != nil {
			return out, fmt.Errorf("manage: resuming: %w", err)
		}
		ids = ids[:0]
		for _, l := range leases {
			ids = append(ids, l.ShardID)
		}
	} else {
		out.StillPaused = p.All
		if !p.Paused(shardID) || (p.All && !contains(p.Shards, shardID)) {
			lift = nil
		}
	}
	for _, id := range lift {
		if err := st.Cursors.SetPaused(ctx, projection, id, false); err != nil {
			return out, fmt.Errorf("manage: resuming: %w", err)
		}
		out.Unpaused = append(out.Unpaused, id)
	}
	for _, id := range ids {
		c, err := st.Cursors.Get(ctx, projection, id)
		if err != nil {
			return out, fmt.Errorf("manage: resuming: %w", err)
		}
		if c.Stopped == "" {
			continue
		}
		if err := st.Cursors.Resume(ctx, projection, id); err != nil {
			return out, fmt.Errorf("manage: resuming shard %s: %w", id, err)
		}
		if out.Stopped == nil {
			out.Stopped = map[string]string{}
		}
		out.Stopped[id] = c.Stopped
	}
	return out, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Options tune Reset and Rebuild.
type Options struct {
	// Settle is how long they wait after pausing, so that the owners notice the pause (within
	// about container.DefaultControlCheck) and commit what they handled before their leases
	// are revoked (what they did not commit is handled again anyway). Default 2s; negative: no
	// wait.
	Settle time.Duration
	Logger *slog.Logger // default slog.Default()
}

func (o Options) withDefaults() Options {
	if o.Settle == 0 {
		o.Settle = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// revokeAttempts bounds the revoke-fence-write rounds of one shard.
const revokeAttempts = 20

// rewind fences shard l.ShardID and writes seq as its cursor (see the package documentation);
// reactivate also makes a finished lease active again (Rebuild).
func rewind(ctx context.Context, st *store.Stores, projection, shardID string, position func(context.Context) (string, error), reactivate bool) (int64, string, error) {
	for attempt := 0; ; attempt++ {
		if attempt >= revokeAttempts {
			return 0, "", fmt.Errorf("%w: shard %s", ErrBusy, shardID)
		}
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return 0, "", ctx.Err()
			case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
			}
		}
		l, err := lease(ctx, st, projection, shardID)
		if err != nil {
			return 0, "", err
		}
		if l.State == shardmap.StateFinished && !reactivate {
			return 0, "", fmt.Errorf("%w: shard %s", ErrFinished, shardID)
		}
		c, err := st.Cursors.Get(ctx, projection, shardID)
		if err != nil {
			return 0, "", fmt.Errorf("manage: reading the cursor of shard %s: %w", shardID, err)
		}
		nl := l
		nl.Owner, nl.Module, nl.Epoch, nl.State = "", "", max(l.Epoch, c.Epoch)+1, shardmap.StateActive
		stored, err := st.Leases.Update(ctx, nl)
		if errors.Is(err, shardmap.ErrConflict) {
			continue
		}
		if err != nil {
			return 0, "", fmt.Errorf("manage: revoking the lease of shard %s: %w", shardID, err)
		}
		epoch := stored.Epoch
		err = st.Resetter.ResetWrites(ctx, projection, shardID, epoch)
		if errors.Is(err, readmodel.ErrFenced) {
			continue // a worker opened the shard at a newer epoch meanwhile: revoke again
		}
		if err != nil {
			return 0, "", fmt.Errorf("manage: resetting shard %s: %w", shardID, err)
		}
		// The position is read now, with the read model fenced at epoch: no owner commits
		// past it any more, so a position such as the head is at or after everything
		// committed (read before the fence, an owner could commit past it, and the reset
		// would move its cursor back and apply those events twice).
		seq, err := position(ctx)
		if err != nil {
			return 0, "", err
		}
		err = st.Cursors.Reset(ctx, projection, shardID, epoch, seq)
		if errors.Is(err, readmodel.ErrFenced) || errors.Is(err, cursorstore.ErrFenced) {
			continue // a worker opened the shard at a newer epoch meanwhile: revoke again
		}
		if err != nil {
			return 0, "", fmt.Errorf("manage: resetting shard %s: %w", shardID, err)
		}
		return epoch, seq, nil
	}
}

// lease returns the shard's lease: ErrNoShard when there is none.
func lease(ctx context.Context, st *store.Stores, projection, shardID string) (shardmap.Lease, error) {
	ls, err := st.Leases.List(ctx, projection)
	if err != nil {
		return shardmap.Lease{}, fmt.Errorf("manage: listing the leases of %s: %w", projection, err)
	}
	for _, l := range ls {
		if l.ShardID == shardID {
			return l, nil
		}
	}
	return shardmap.Lease{}, fmt.Errorf("%w: %s has no lease for shard %q (start a worker first: it creates the leases)", ErrNoShard, projection, shardID)
}

// pauseFor pauses what Reset or Rebuild works on, unless already paused, and returns the
// function that lifts that pause again (nothing when it was paused before).
func pauseFor(ctx context.Context, st *store.Stores, projection, shardID string, o Options) (func(context.Context) error, error) {
	p, err := st.Cursors.Pauses(ctx, projection)
	if err != nil {
		return nil, fmt.Errorf("manage: reading the pauses of %s: %w", projection, err)
	}
	already := p.All || (shardID != "" && contains(p.Shards, shardID))
	if already {
		return func(context.Context) error { return nil }, nil
	}
	if err := Pause(ctx, st, projection, shardID); err != nil {
		return nil, err
	}
	if o.Settle > 0 {
		o.Logger.Info("paused: waiting for the owners to commit", "projection", projection, "shard", shardID, "settle", o.Settle)
		select {
		case <-ctx.Done():
		case <-time.After(o.Settle):
		}
	}
	return func(ctx context.Context) error {
		return st.Cursors.SetPaused(ctx, projection, shardID, false)
	}, nil
}

// ResetResult is one shard's new position.
type ResetResult struct {
	ShardID string
	Seq     string // the new cursor ("" = the start)
	Epoch   int64  // the epoch the cursor and the read model's writes are fenced at
}

// Reset moves the cursor of shardID (every unfinished shard of the projection when "") to the
// position to names, safely while workers run (package documentation): pause, revoke, fence,
// write, lift the pause (left in place when it was paused before). src resolves TrimHorizon
// (no source needed), Latest (a source.Header or source.Tailer) and Time (a TimeSeeker: the
// journal; Kinesis is refused). Errors: ErrUnsupported, ErrNoShard, ErrFinished (for
// shardID), ErrTarget, ErrBusy, store errors; when it fails half-way the pause stays (resume
// when done).
func Reset(ctx context.Context, st *store.Stores, src source.Source, projection, shardID string, to Target, o Options) ([]ResetResult, error) {
	o = o.withDefaults()
	if st.Resetter == nil {
		return nil, ErrUnsupported
	}
	var ids []string
	if shardID != "" {
		l, err := lease(ctx, st, projection, shardID)
		if err != nil {
			return nil, err
		}
		if l.State == shardmap.StateFinished {
			return nil, fmt.Errorf("%w: shard %s (reset its children, or rebuild the projection)", ErrFinished, shardID)
		}
		ids = []string{shardID}
	} else {
		ls, err := st.Leases.List(ctx, projection)
		if err != nil {
			return nil, fmt.Errorf("manage: listing the leases of %s: %w", projection, err)
		}
		for _, l := range ls {
			if l.State != shardmap.StateFinished {
				ids = append(ids, l.ShardID)
			}
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("%w: %s has no unfinished shard (start a worker first: it creates the leases)", ErrNoShard, projection)
		}
	}
	// Every target is resolved once before anything changes (a bad one changes nothing), and
	// again once the shard is fenced (rewind): a head or a time keeps moving meanwhile.
	for _, id := range ids {
		if _, err := to.resolve(ctx, src, id); err != nil {
			return nil, err
		}
	}
	unpause, err := pauseFor(ctx, st, projection, shardID, o)
	if err != nil {
		return nil, err
	}
	var out []ResetResult
	for _, id := range ids {
		ep, seq, err := rewind(ctx, st, projection, id, func(ctx context.Context) (string, error) { return to.resolve(ctx, src, id) }, false)
		if err != nil {
			return out, fmt.Errorf("%w (the pause stays: `projhost resume` once done)", err)
		}
		o.Logger.Info("shard reset", "projection", projection, "shard", id, "cursor", seq, "epoch", ep)
		out = append(out, ResetResult{ShardID: id, Seq: seq, Epoch: ep})
	}
	if err := unpause(ctx); err != nil {
		return out, fmt.Errorf("manage: lifting the reset's pause: %w", err)
	}
	return out, nil
}

// Rebuild starts the projection over from zero while workers run: it pauses the projection,
// revokes every lease (finished ones become active again, so closed shards are read again
// before their children), fences every shard's writes and sets its cursor to the start, then
// deletes every document and lifts the pause (left in place when the projection was paused
// before). Dead letters are kept (an event that fails again replaces its letter). On an empty
// projection (no lease yet) it only clears the documents. Errors: ErrUnsupported, ErrBusy,
// store errors; when it fails half-way the pause stays (run it again).
func Rebuild(ctx context.Context, st *store.Stores, projection string, o Options) error {
	o = o.withDefaults()
	if st.Resetter == nil {
		return ErrUnsupported
	}
	unpause, err := pauseFor(ctx, st, projection, "", o)
	if err != nil {
		return err
	}
	ls, err := st.Leases.List(ctx, projection)
	if err != nil {
		return fmt.Errorf("manage: listing the leases of %s: %w", projection, err)
	}
	for _, l := range ls {
		if _, _, err := rewind(ctx, st, projection, l.ShardID, func(context.Context) (string, error) { return "", nil }, true); err != nil {
			return fmt.Errorf("%w (the pause stays: run rebuild again)", err)
		}
	}
	if err := st.Resetter.ClearDocs(ctx, projection); err != nil {
		return fmt.Errorf("manage: clearing the documents of %s: %w (the pause stays: run rebuild again)", projection, err)
	}
	o.Logger.Info("projection rebuilt from the start", "projection", projection, "shards", len(ls))
	if err := unpause(ctx); err != nil {
		return fmt.Errorf("manage: lifting the rebuild's pause: %w", err)
	}
	return nil
}
