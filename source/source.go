// Package source defines how projhost reads sharded event streams: Amazon Kinesis
// (source/kinesis) or the local journal (source/journal).
//
// A stream has shards; each shard is an ordered sequence of events with strictly increasing
// sequence numbers (decimal strings, up to 128-bit). A shard may be closed (after a Kinesis
// split or merge) and then has parent/child relations that the lease layer honours: a child
// starts only after every parent is finished (DESIGN §4).
package source

import (
	"context"
	"errors"
	"strings"
	"time"
)

// ErrShardEnded is returned by ShardReader.Read once a closed shard has been read to its end.
// No more events will ever appear on it; the caller marks its lease finished.
var ErrShardEnded = errors.New("source: shard ended (closed and fully read)")

// ErrUnknownShard is returned when a shard id does not exist in the stream.
var ErrUnknownShard = errors.New("source: unknown shard")

// Event is one record of a shard.
type Event struct {
	ShardID      string
	Seq          string // decimal sequence number, strictly increasing within a shard
	PartitionKey string
	ArrivalMs    int64 // approximate arrival time, ms since the Unix epoch (0 = unknown)
	Data         []byte
}

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

// SeqWidth is the width sequence numbers are zero-padded to for string comparison: the Kinesis
// API pattern for sequence numbers is 0|([1-9]\d{0,128}), at most 129 digits.
const SeqWidth = 129

// PadSeq left-pads a decimal sequence number with zeros to SeqWidth so that padded numbers
// compare as strings in numeric order. "" stays "" (no sequence: before everything).
func PadSeq(seq string) string {
	if seq == "" || len(seq) >= SeqWidth {
		return seq
	}
	return strings.Repeat("0", SeqWidth-len(seq)) + seq
}

// CompareSeq compares two decimal sequence numbers numerically: -1, 0 or +1. "" sorts first.
func CompareSeq(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}
