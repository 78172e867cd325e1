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

// Attribute names of a dead letter's head item besides the keys (see the package
// documentation, Dead letters).
const (
	attrLetterShard        = "shard"
	attrLetterSeq          = "seq"
	attrLetterPartitionKey = "partition_key"
	attrLetterArrivalMs    = "arrival_ms"
	attrLetterData         = "data" // also on chunk items
	attrLetterChunks       = "chunks"
	attrLetterChunkGen     = "chunk_gen"
	attrLetterDataLen      = "data_len"
	attrLetterErrorKind    = "error_kind"
	attrLetterError        = "error"
	attrLetterAttempts     = "attempts"
	attrLetterFirstFailure = "first_failure_ms"
	attrLetterLastFailure  = "last_failure_ms"
	attrLetterState        = "state"
	attrLetterReplayedSeq  = "replayed_seq"
	attrLetterChunkIndex   = "chunk" // only on chunk items
	// attrLetterToken is the request token of the Put or Transition that wrote the head last
	// (requestToken): how a write retried after an applied attempt tells its own write. Not
	// part of the Letter.
	attrLetterToken = "token"
)

// optionalAttrs are the head attributes left out when their field is zero; Put removes them from
// the stored item then. first_failure_ms is not among them: an unknown first failure keeps the
// stored one.
var optionalAttrs = []string{attrLetterPartitionKey, attrLetterData, attrLetterChunks,
	attrLetterChunkGen, attrLetterDataLen, attrLetterErrorKind, attrLetterError,
	attrLetterLastFailure, attrLetterReplayedSeq}

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

// encodeHead returns a head item's attributes besides the keys: zero optional fields are left
// out, Data is inline unless ref.n > 0 (then ref describes the chunks).
func encodeHead(l deadletter.Letter, ref chunkRef) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{
		attrLetterShard:     str(l.ShardID),
		attrLetterSeq:       str(l.Seq),
		attrLetterArrivalMs: num(l.ArrivalMs),
		attrLetterAttempts:  num(int64(l.Attempts)),
		attrLetterState:     str(string(l.State)),
	}
	opt := func(name, v string) {
		if v != "" {
			it[name] = str(v)
		}
	}
	opt(attrLetterPartitionKey, l.PartitionKey)
	opt(attrLetterErrorKind, l.ErrorKind)
	opt(attrLetterError, l.Error)
	opt(attrLetterReplayedSeq, l.ReplayedSeq)
	if !l.FirstFailure.IsZero() {
		it[attrLetterFirstFailure] = num(l.FirstFailure.UnixMilli())
	}
	if !l.LastFailure.IsZero() {
		it[attrLetterLastFailure] = num(l.LastFailure.UnixMilli())
	}
	switch {
	case ref.n > 0:
		it[attrLetterChunks], it[attrLetterChunkGen], it[attrLetterDataLen] = num(int64(ref.n)), str(ref.gen), num(int64(ref.len))
	case len(l.Data) > 0:
		it[attrLetterData] = &types.AttributeValueMemberB{Value: l.Data}
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
		x, ok, err := intAttr(it, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", errCorrupt, err))
		}
		return x, ok
	}
	ms := func(name string) time.Time {
		if x, ok := n(name); ok {
			return time.UnixMilli(x).UTC()
		}
		return time.Time{}
	}
	l.ShardID, l.Seq, l.State = s(attrLetterShard, true), s(attrLetterSeq, true), deadletter.State(s(attrLetterState, true))
	l.PartitionKey, l.ErrorKind, l.Error, l.ReplayedSeq = s(attrLetterPartitionKey, false), s(attrLetterErrorKind, false),
		s(attrLetterError, false), s(attrLetterReplayedSeq, false)
	l.ArrivalMs, _ = n(attrLetterArrivalMs)
	attempts, _ := n(attrLetterAttempts)
	l.Attempts = int(attempts)
	l.FirstFailure, l.LastFailure = ms(attrLetterFirstFailure), ms(attrLetterLastFailure)
	switch v := it[attrLetterData].(type) {
	case *types.AttributeValueMemberB:
		l.Data = v.Value
	case nil:
	default:
		errs = append(errs, fmt.Errorf("%w: attribute %s is %T, want B", errCorrupt, attrLetterData, v))
	}
	if chunks, ok := n(attrLetterChunks); ok {
		size, _ := n(attrLetterDataLen)
		ref = chunkRef{n: int(chunks), gen: s(attrLetterChunkGen, true), len: int(size)}
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
		idx, ok := it[attrLetterChunkIndex].(*types.AttributeValueMemberN)
		b, okb := it[attrLetterData].(*types.AttributeValueMemberB)
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
