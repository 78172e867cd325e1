package dynamo

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/event"
)

// Attribute names of a letter's head item besides the keys (see the package documentation).
const (
	attrShard        = "shard"
	attrSeq          = "seq"
	attrPartitionKey = "partition_key"
	attrArrivalMs    = "arrival_ms"
	attrData         = "data" // also on chunk items
	attrChunks       = "chunks"
	attrChunkGen     = "chunk_gen"
	attrDataLen      = "data_len"
	attrErrorKind    = "error_kind"
	attrError        = "error"
	attrAttempts     = "attempts"
	attrFirstFailure = "first_failure_ms"
	attrLastFailure  = "last_failure_ms"
	attrState        = "state"
	attrReplayedSeq  = "replayed_seq"
	attrChunkIndex   = "chunk" // only on chunk items
)

// optionalAttrs are the head attributes left out when their field is zero; Put removes them from
// the stored item then. first_failure_ms is not among them: an unknown first failure keeps the
// stored one.
var optionalAttrs = []string{attrPartitionKey, attrData, attrChunks, attrChunkGen, attrDataLen,
	attrErrorKind, attrError, attrLastFailure, attrReplayedSeq}

// headSK is the sort key of a letter's head item: shard id, "#", the sequence number zero-padded
// to event.SeqWidth digits (so a shard's letters sort numerically).
func headSK(shardID, seq string) string { return shardID + "#" + event.PadSeq(seq) }

// chunkPrefix is the sort key prefix of the chunk items of one generation of a letter's data.
func chunkPrefix(headSK, gen string) string { return headSK + "#chunk#" + gen + "#" }

func chunkSK(headSK, gen string, i int) string {
	return fmt.Sprintf("%s%04d", chunkPrefix(headSK, gen), i)
}

// chunkRef says where a head item's data is when it is not inline.
type chunkRef struct {
	n   int    // chunk items; 0 = data inline (or none)
	gen string // generation: part of the chunk items' sort keys
	len int    // total data bytes
}

func str(s string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// encodeHead returns a head item's attributes besides the keys: zero optional fields are left
// out, Data is inline unless ref.n > 0 (then ref describes the chunks).
func encodeHead(l deadletter.Letter, ref chunkRef) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{
		attrShard:     str(l.ShardID),
		attrSeq:       str(l.Seq),
		attrArrivalMs: num(l.ArrivalMs),
		attrAttempts:  num(int64(l.Attempts)),
		attrState:     str(string(l.State)),
	}
	opt := func(name, v string) {
		if v != "" {
			it[name] = str(v)
		}
	}
	opt(attrPartitionKey, l.PartitionKey)
	opt(attrErrorKind, l.ErrorKind)
	opt(attrError, l.Error)
	opt(attrReplayedSeq, l.ReplayedSeq)
	if !l.FirstFailure.IsZero() {
		it[attrFirstFailure] = num(l.FirstFailure.UnixMilli())
	}
	if !l.LastFailure.IsZero() {
		it[attrLastFailure] = num(l.LastFailure.UnixMilli())
	}
	switch {
	case ref.n > 0:
		it[attrChunks], it[attrChunkGen], it[attrDataLen] = num(int64(ref.n)), str(ref.gen), num(int64(ref.len))
	case len(l.Data) > 0:
		it[attrData] = &types.AttributeValueMemberB{Value: l.Data}
	}
	return it
}

// errCorrupt is wrapped by decode errors: an item projhost did not write, or a damaged one.
var errCorrupt = errors.New("not a dead-letter item")

// decodeHead reads a head item (keys included or not). The data is inline in the letter, or
// described by the returned chunkRef.
func decodeHead(projection string, it map[string]types.AttributeValue) (deadletter.Letter, chunkRef, error) {
	l := deadletter.Letter{Projection: projection}
	var ref chunkRef
	var errs []error
	s := func(name string, required bool) string {
		switch v := it[name].(type) {
		case *types.AttributeValueMemberS:
			return v.Value
		case nil:
			if required {
				errs = append(errs, fmt.Errorf("%w: attribute %s missing", errCorrupt, name))
			}
		default:
			errs = append(errs, fmt.Errorf("%w: attribute %s is %T, want S", errCorrupt, name, v))
		}
		return ""
	}
	n := func(name string) (int64, bool) {
		switch v := it[name].(type) {
		case *types.AttributeValueMemberN:
			x, err := strconv.ParseInt(v.Value, 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%w: attribute %s: %w", errCorrupt, name, err))
			}
			return x, err == nil
		case nil:
		default:
			errs = append(errs, fmt.Errorf("%w: attribute %s is %T, want N", errCorrupt, name, v))
		}
		return 0, false
	}
	ms := func(name string) time.Time {
		if x, ok := n(name); ok {
			return time.UnixMilli(x).UTC()
		}
		return time.Time{}
	}
	l.ShardID, l.Seq, l.State = s(attrShard, true), s(attrSeq, true), deadletter.State(s(attrState, true))
	l.PartitionKey, l.ErrorKind, l.Error, l.ReplayedSeq = s(attrPartitionKey, false), s(attrErrorKind, false),
		s(attrError, false), s(attrReplayedSeq, false)
	l.ArrivalMs, _ = n(attrArrivalMs)
	attempts, _ := n(attrAttempts)
	l.Attempts = int(attempts)
	l.FirstFailure, l.LastFailure = ms(attrFirstFailure), ms(attrLastFailure)
	switch v := it[attrData].(type) {
	case *types.AttributeValueMemberB:
		l.Data = v.Value
	case nil:
	default:
		errs = append(errs, fmt.Errorf("%w: attribute %s is %T, want B", errCorrupt, attrData, v))
	}
	if chunks, ok := n(attrChunks); ok {
		size, _ := n(attrDataLen)
		ref = chunkRef{n: int(chunks), gen: s(attrChunkGen, true), len: int(size)}
		if chunks <= 0 || size < 0 || l.Data != nil {
			errs = append(errs, fmt.Errorf("%w: %d chunks of %d bytes (inline data: %v)", errCorrupt, chunks, size, l.Data != nil))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return deadletter.Letter{}, chunkRef{}, err
	}
	if err := l.Validate(); err != nil {
		return deadletter.Letter{}, chunkRef{}, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	return l, ref, nil
}

// split cuts data into pieces of at most size bytes (sharing data's memory).
func split(data []byte, size int) [][]byte {
	var out [][]byte
	for len(data) > size {
		out = append(out, data[:size])
		data = data[size:]
	}
	return append(out, data)
}

// assemble joins the chunk items of ref (ordered by sort key) into the data, checking that they
// are exactly chunks 0..n-1 with ref.len bytes in all.
func assemble(ref chunkRef, items []map[string]types.AttributeValue) ([]byte, error) {
	if len(items) != ref.n {
		return nil, fmt.Errorf("%d of %d data chunks found", len(items), ref.n)
	}
	data := make([]byte, 0, ref.len)
	for i, it := range items {
		idx, ok := it[attrChunkIndex].(*types.AttributeValueMemberN)
		b, okb := it[attrData].(*types.AttributeValueMemberB)
		if !ok || !okb || idx.Value != strconv.Itoa(i) {
			return nil, fmt.Errorf("%w: chunk item %d of %d", errCorrupt, i, ref.n)
		}
		data = append(data, b.Value...)
	}
	if len(data) != ref.len {
		return nil, fmt.Errorf("%w: chunks hold %d bytes, the letter %d", errCorrupt, len(data), ref.len)
	}
	return data, nil
}

// itemSize estimates the stored size of an item's attributes as DynamoDB counts it (name bytes
// plus value bytes; numbers at their largest, 21 bytes). Only S, N and B occur.
func itemSize(it map[string]types.AttributeValue) int {
	n := 0
	for name, v := range it {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberB:
			n += len(v.Value)
		default:
			n += 21
		}
	}
	return n
}
