// Package source defines how projhost reads sharded event streams: Amazon Kinesis
// (source/kinesis) or the local journal (source/journal); source/memsource is an in-memory stream
// that splits and merges shards, for tests.
//
// A stream has shards; each shard is an ordered sequence of events with strictly increasing
// sequence numbers (decimal strings, up to 128-bit). A shard may be closed (after a Kinesis
// split or merge) and then has parent/child relations that the lease layer honours: a child
// starts only after every parent is finished (DESIGN §4).
package source

import (
	"context"
	"errors"
	"time"

	"github.com/projhost/projhost/event"
)

// ErrShardEnded is returned by ShardReader.Read once a closed shard has been read to its end.
// No more events will ever appear on it; the caller marks its lease finished.
var ErrShardEnded = errors.New("source: shard ended (closed and fully read)")

// ErrUnknownShard is returned when a shard id does not exist in the stream.
var ErrUnknownShard = errors.New("source: unknown shard")

// Event is one record of a shard (an alias of event.Event, the type every layer shares).
type Event = event.Event

// Shard describes one shard of a stream.
type Shard struct {
	ID        string
	ParentIDs []string // shards that must be finished before this one starts (0, 1 or 2)
	// HashKeyStart and HashKeyEnd are the inclusive 128-bit hash key range, as decimal strings.
	HashKeyStart, HashKeyEnd string
	Closed                   bool // no more events will be appended
}

// Batch is what one Read returns.
type Batch struct {
	Events []Event
	// MillisBehind is how far the last event read is behind the shard's tip in ms (Kinesis'
	// MillisBehindLatest); -1 when unknown.
	MillisBehind int64
	// EventsBehind is the number of events after the last one read; -1 when unknown.
	EventsBehind int64
}

// Source lists shards and opens readers on them. Implementations are safe for concurrent use.
type Source interface {
	// Shards returns every shard of the stream, open and closed, parents before children.
	Shards(ctx context.Context) ([]Shard, error)
	// Open returns a reader positioned after sequence number after ("" = the shard's start,
	// TRIM_HORIZON). Errors: ErrUnknownShard.
	Open(ctx context.Context, shardID, after string) (ShardReader, error)
}

// ShardReader reads one shard forward. It is used by one goroutine at a time.
type ShardReader interface {
	// Read returns up to max events following the last returned one. When none is available it
	// waits up to wait for the first one and then returns an empty batch (not an error).
	// At the end of a closed shard it returns ErrShardEnded. Context errors are returned as is.
	Read(ctx context.Context, max int, wait time.Duration) (Batch, error)
	Close() error
}

// ByteBoundedReader is implemented by shard readers that can also bound a read by the bytes of
// event data it returns (the local journal); container mode reads with the handler's byte
// budget (projection.Config.MaxBatchBytes), so that large events do not multiply memory by
// the batch size.
type ByteBoundedReader interface {
	ShardReader
	// ReadBytes is Read returning events while their data bytes stay within maxBytes, and
	// always at least one event when any is available (an event larger than maxBytes comes
	// alone). maxBytes <= 0 means the reader's default.
	ReadBytes(ctx context.Context, max, maxBytes int, wait time.Duration) (Batch, error)
}

// SeqWidth is event.SeqWidth (129 digits, the Kinesis sequence number pattern's maximum).
const SeqWidth = event.SeqWidth

// PadSeq is event.PadSeq: left-pads a decimal sequence number to SeqWidth.
func PadSeq(seq string) string { return event.PadSeq(seq) }

// CompareSeq is event.CompareSeq: compares two decimal sequence numbers numerically.
func CompareSeq(a, b string) int { return event.CompareSeq(a, b) }

// Header is implemented by sources that can tell a shard's last sequence number cheaply (the
// local journal). Container mode uses it for --until-caught-up and the lag in events.
type Header interface {
	// Head returns the sequence number of the last event on the shard, "" when empty.
	Head(ctx context.Context, shardID string) (string, error)
}

// Tailer is implemented by sources that can give a shard's latest events: the local journal
// (cheaply, from its head) and Kinesis (by reading back from the tip in widening windows, at
// most a bounded number of GetRecords; see source/kinesis Tail). A deploy's smoke run handles
// them (package deploy).
type Tailer interface {
	// Tail returns the last n events of the shard (fewer when it holds fewer), oldest first.
	// Errors: ErrUnknownShard.
	Tail(ctx context.Context, shardID string, n int) ([]Event, error)
}
