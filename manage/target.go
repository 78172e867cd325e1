package manage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/source"
)

// TargetKind is where Reset moves a cursor.
type TargetKind int

const (
	// ToSeq: the cursor becomes Target.Seq: the shard goes on after that event (which is not
	// handled again), as from any saved cursor.
	ToSeq TargetKind = iota + 1
	// ToTrimHorizon: no cursor: the shard starts where a shard without a cursor starts (its
	// first event on the journal; on Kinesis run's --initial-position, TRIM_HORIZON by
	// default).
	ToTrimHorizon
	// ToLatest: the shard's last event now: only events appended later are handled.
	ToLatest
	// ToTime: just before the shard's first event that arrived at or after Target.Time.
	ToTime
)

// Target is a parsed --to value.
type Target struct {
	Kind TargetKind
	Seq  string    // ToSeq
	Time time.Time // ToTime
}

// ParseTarget parses a reset target: a sequence number (decimal digits, canonical: no leading
// zeros), "trim-horizon" (or TRIM_HORIZON), "latest" (LATEST), or an RFC 3339 time
// (2026-01-02T15:04:05Z, fractions of a second allowed). Errors wrap ErrTarget. The one place
// the CLI and library accept targets.
func ParseTarget(s string) (Target, error) {
	switch strings.ToLower(strings.ReplaceAll(s, "_", "-")) {
	case "trim-horizon":
		return Target{Kind: ToTrimHorizon}, nil
	case "latest":
		return Target{Kind: ToLatest}, nil
	}
	if event.ValidSeq(s) {
		return Target{Kind: ToSeq, Seq: s}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Target{Kind: ToTime, Time: t}, nil
	}
	return Target{}, fmt.Errorf("%w: %q: want a sequence number (decimal digits, no leading zeros), trim-horizon, latest, or an RFC 3339 time such as 2026-01-02T15:04:05Z", ErrTarget, s)
}

func (t Target) String() string {
	switch t.Kind {
	case ToSeq:
		return t.Seq
	case ToTrimHorizon:
		return "trim-horizon"
	case ToLatest:
		return "latest"
	case ToTime:
		return t.Time.Format(time.RFC3339Nano)
	}
	return "?"
}

// TimeSeeker is implemented by sources that record when each event arrived (the local
// journal): SeqBefore returns the position just before the shard's first event that arrived at
// or after t (the shard's head when none did).
type TimeSeeker interface {
	SeqBefore(ctx context.Context, shardID string, t time.Time) (string, error)
}

// resolve returns the cursor the target means for shardID.
func (t Target) resolve(ctx context.Context, src source.Source, shardID string) (string, error) {
	switch t.Kind {
	case ToSeq:
		// A cursor past the shard's last event would have the owner wait for the head to reach
		// it, then skip every event appended up to it.
		last, known, err := lastSeq(ctx, src, shardID)
		if err != nil {
			return "", err
		}
		if known && event.CompareSeq(t.Seq, last) > 0 {
			return "", fmt.Errorf("%w: %s is beyond the last event of shard %s (%s): a cursor there would skip the events appended up to it; use latest for the head", ErrTarget, t.Seq, shardID, or(last, "none yet"))
		}
		return t.Seq, nil
	case ToTrimHorizon:
		return "", nil
	case ToLatest:
		last, known, err := lastSeq(ctx, src, shardID)
		if err != nil {
			return "", err
		}
		if !known {
			return "", fmt.Errorf("%w: latest needs the source (give the same source flags as run)", ErrTarget)
		}
		return last, nil
	case ToTime:
		ts, ok := src.(TimeSeeker)
		if !ok {
			return "", fmt.Errorf("%w: this source does not record arrival times per event in a way reset can search (the local journal does; on Kinesis, reset to a sequence number)", ErrTarget)
		}
		seq, err := ts.SeqBefore(ctx, shardID, t.Time)
		if err != nil {
			return "", fmt.Errorf("manage: finding shard %s's position at %s: %w", shardID, t.Time.Format(time.RFC3339), err)
		}
		return seq, nil
	}
	return "", fmt.Errorf("%w: no target", ErrTarget)
}

// lastSeq returns the sequence number of the shard's last event ("" when it has none) when the
// source can tell (a source.Header, or a source.Tailer); known false otherwise.
func lastSeq(ctx context.Context, src source.Source, shardID string) (last string, known bool, err error) {
	if hd, ok := src.(source.Header); ok {
		seq, err := hd.Head(ctx, shardID)
		if err != nil {
			return "", false, fmt.Errorf("manage: reading the head of shard %s: %w", shardID, err)
		}
		return seq, true, nil
	}
	if tl, ok := src.(source.Tailer); ok {
		evs, err := tl.Tail(ctx, shardID, 1)
		if err != nil {
			return "", false, fmt.Errorf("manage: reading the last event of shard %s: %w", shardID, err)
		}
		if len(evs) == 0 {
			return "", true, nil
		}
		return evs[len(evs)-1].Seq, true, nil
	}
	return "", false, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
