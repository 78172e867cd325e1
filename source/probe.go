package source

import "context"

// Prober is implemented by sources that cannot tell a shard's head cheaply (no Header) but can
// tell, from any process, whether a cursor is caught up (Kinesis: one GetShardIterator
// AFTER_SEQUENCE_NUMBER the cursor and one GetRecords of Limit 1). `projhost status` and
// container mode's UntilCaughtUp use it for the shards of other workers.
type Prober interface {
	// Probe reports how far the position after sequence number after ("" = where a reader
	// without a cursor starts) is behind the shard's tip. It reads no more than one record and
	// changes nothing. Errors: ErrUnknownShard; the source's errors.
	Probe(ctx context.Context, shardID, after string) (Probe, error)
}

// Probe is what Prober.Probe found.
type Probe struct {
	// More: at least one record follows the position.
	More bool
	// MillisBehind is the source's lag of the position in ms (Kinesis' MillisBehindLatest of the
	// probing read); -1 when the source did not say.
	MillisBehind int64
	// Ended: the shard is closed and nothing follows the position (a reader would get
	// ErrShardEnded).
	Ended bool
}

// CaughtUp reports whether nothing follows the position and the source does not say it is
// behind (MillisBehind 0, or -1: not said); an empty read with MillisBehind above 0 is a
// stretch of a shard without records, not its tip.
func (p Probe) CaughtUp() bool { return !p.More && p.MillisBehind <= 0 }
