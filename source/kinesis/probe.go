package kinesis

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/projhost/projhost/source"
)

// Probe reports how far the position after sequence number after ("" = the source's initial
// position; LATEST is then caught up by definition) is behind shardID's tip: one
// GetShardIterator there and one GetRecords of Limit 1 (which count against the shard's read
// quota of 5 calls per second like a reader's; both keep the SDK's standard retries). A
// trimmed cursor is probed at TRIM_HORIZON, which is where a reader falls back to. It counts in
// Stats().GetRecords and changes nothing. Errors: source.ErrUnknownShard; ErrInvalid for an
// after that is not a decimal sequence number; the client's errors, wrapped.
func (s *Source) Probe(ctx context.Context, shardID, after string) (source.Probe, error) {
	if after != "" && strings.Trim(after, "0123456789") != "" {
		return source.Probe{}, fmt.Errorf("kinesis: probe %s after %q: not a decimal sequence number: %w", shardID, after, ErrInvalid)
	}
	r := &reader{src: s, shardID: shardID}
	switch {
	case after != "":
		r.start = position{typ: types.ShardIteratorTypeAfterSequenceNumber, seq: after, label: "after " + after}
	default:
		r.start = position{typ: s.cfg.initial.Type, ts: s.cfg.initial.Timestamp, label: s.cfg.initial.String()}
	}
	it, err := r.iterator(ctx, r.start)
	if err != nil && after != "" && isInvalidArgument(err) {
		if uerr := r.unknownShard(ctx, err); uerr != nil {
			return source.Probe{}, uerr
		}
		r.start = position{typ: types.ShardIteratorTypeTrimHorizon, label: "TRIM_HORIZON (cursor " + after + " refused)"}
		it, err = r.iterator(ctx, r.start)
	}
	if err != nil {
		return source.Probe{}, err
	}
	in := &kinesis.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(1)}
	if s.isARN {
		in.StreamARN = aws.String(s.stream)
	}
	s.getRecords.Add(1)
	out, err := s.api.GetRecords(ctx, in)
	if err != nil {
		return source.Probe{}, fmt.Errorf("kinesis: probe %s %s: %w", shardID, r.start.label, err)
	}
	p := source.Probe{More: len(out.Records) > 0, MillisBehind: -1}
	if out.MillisBehindLatest != nil {
		p.MillisBehind = max(*out.MillisBehindLatest, 0)
	}
	p.Ended = !p.More && (out.NextShardIterator == nil || *out.NextShardIterator == "")
	return p, nil
}

var _ source.Prober = (*Source)(nil)
