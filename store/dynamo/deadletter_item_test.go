package dynamo

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/deadletter"
)

var fuzzStates = []deadletter.State{deadletter.StateFailed, deadletter.StateReplayRequested, deadletter.StateReplayed, deadletter.StateDropped}

// FuzzHeadRoundTrip: every valid letter decodes from its head item as it was (times at ms).
func FuzzHeadRoundTrip(f *testing.F) {
	f.Add("shardId-000000000000", "49590338271490256608559692538361571095921575989136588898", "key", int64(1), []byte(`{"a":1}`),
		"fail", "bad", 1, int64(1_700_000_000_123), int64(0), uint8(0), "")
	f.Add("s", "0", "", int64(0), []byte{}, "", "", 0, int64(-5), int64(1), uint8(2), "7")
	f.Add("a#b", "10", "é", int64(-1), []byte{0, 0xff}, "trap", "x\ny", 1<<30, int64(0), int64(0), uint8(3), "12")
	f.Fuzz(func(t *testing.T, shard, seq, pkey string, arrival int64, data []byte, kind, msg string, attempts int,
		first, last int64, state uint8, replayed string) {
		l := deadletter.Letter{Projection: "p", ShardID: shard, Seq: seq, PartitionKey: pkey, ArrivalMs: arrival, Data: data,
			ErrorKind: kind, Error: msg, Attempts: attempts, State: fuzzStates[int(state)%len(fuzzStates)], ReplayedSeq: replayed}
		if first != 0 {
			l.FirstFailure = time.UnixMilli(first)
		}
		if last != 0 {
			l.LastFailure = time.UnixMilli(last).In(time.FixedZone("x", 3600))
		}
		if l.Validate() != nil {
			t.Skip()
		}
		got, ref, err := decodeHead("p", encodeHead(l, chunkRef{}))
		if err != nil {
			t.Fatalf("decode of %+v: %v", l, err)
		}
		if ref.n != 0 || !bytes.Equal(got.Data, l.Data) || !got.FirstFailure.Equal(l.FirstFailure) || !got.LastFailure.Equal(l.LastFailure) {
			t.Fatalf("decoded %+v (chunks %+v), want %+v", got, ref, l)
		}
		got.Data, got.FirstFailure, got.LastFailure = nil, time.Time{}, time.Time{}
		l.Data, l.FirstFailure, l.LastFailure = nil, time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, l) {
			t.Fatalf("decoded %+v, want %+v", got, l)
		}
		// The chunked form carries the reference instead of the data.
		want := chunkRef{n: 1 + len(data)/7, gen: "0123456789abcdef", len: len(data)}
		if _, ref, err := decodeHead("p", encodeHead(l, want)); err != nil || ref != want {
			t.Fatalf("chunked head decoded to %+v, %v; want %+v", ref, err, want)
		}
	})
}

// FuzzSplitAssemble: data split into chunk items assembles back; a missing, extra or reordered
// chunk is an error.
func FuzzSplitAssemble(f *testing.F) {
	f.Add([]byte("hello, world"), 5)
	f.Add([]byte{}, 1)
	f.Add(bytes.Repeat([]byte{1, 2, 3}, 100), 7)
	f.Fuzz(func(t *testing.T, data []byte, size int) {
		if size < 1 || size > 1<<20 {
			t.Skip()
		}
		parts := split(data, size)
		items := make([]map[string]types.AttributeValue, len(parts))
		for i, p := range parts {
			if len(p) > size || (len(p) == 0 && len(data) > 0) {
				t.Fatalf("chunk %d has %d bytes (size %d, data %d)", i, len(p), size, len(data))
			}
			items[i] = map[string]types.AttributeValue{attrLetterChunkIndex: num(int64(i)), attrLetterData: &types.AttributeValueMemberB{Value: p}}
		}
		ref := chunkRef{n: len(parts), gen: "g", len: len(data)}
		got, err := assemble(ref, items)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("assemble = %d bytes, %v; want the %d bytes", len(got), err, len(data))
		}
		if _, err := assemble(ref, items[1:]); err == nil {
			t.Fatal("assemble without the first chunk succeeded")
		}
		if len(items) > 1 {
			items[0], items[1] = items[1], items[0]
			if _, err := assemble(ref, items); err == nil {
				t.Fatal("assemble of reordered chunks succeeded")
			}
		}
	})
}

func TestDecodeHeadCorrupt(t *testing.T) {
	good := func() map[string]types.AttributeValue {
		return encodeHead(deadletter.Letter{Projection: "p", ShardID: "s", Seq: "1", State: deadletter.StateFailed}, chunkRef{})
	}
	for name, mutate := range map[string]func(map[string]types.AttributeValue){
		"no shard":       func(it map[string]types.AttributeValue) { delete(it, attrLetterShard) },
		"no state":       func(it map[string]types.AttributeValue) { delete(it, attrLetterState) },
		"state not S":    func(it map[string]types.AttributeValue) { it[attrLetterState] = num(1) },
		"unknown state":  func(it map[string]types.AttributeValue) { it[attrLetterState] = str("lost") },
		"bad seq":        func(it map[string]types.AttributeValue) { it[attrLetterSeq] = str("01") },
		"attempts not N": func(it map[string]types.AttributeValue) { it[attrLetterAttempts] = str("1") },
		"attempts too big": func(it map[string]types.AttributeValue) {
			it[attrLetterAttempts] = &types.AttributeValueMemberN{Value: "1e400"}
		},
		"data not B": func(it map[string]types.AttributeValue) { it[attrLetterData] = str("x") },
		"zero chunks": func(it map[string]types.AttributeValue) {
			it[attrLetterChunks], it[attrLetterChunkGen] = num(0), str("g")
		},
		"chunks and inline": func(it map[string]types.AttributeValue) {
			it[attrLetterChunks], it[attrLetterChunkGen], it[attrLetterData] = num(1), str("g"), &types.AttributeValueMemberB{Value: []byte{1}}
		},
		"chunks, no gen": func(it map[string]types.AttributeValue) { it[attrLetterChunks] = num(2) },
	} {
		it := good()
		mutate(it)
		if _, _, err := decodeHead("p", it); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: decode err = %v, want errCorrupt", name, err)
		}
	}
	if _, _, err := decodeHead("p", good()); err != nil {
		t.Fatalf("decode of a good item: %v", err)
	}
}

// TestDeadLetterKeys: the sort keys order numerically within a shard and never collide with another
// shard's or a chunk's.
func TestDeadLetterKeys(t *testing.T) {
	if !(headSK("s", "9") < headSK("s", "10")) || headSK("s", "10") == headSK("s1", "0") {
		t.Fatal("head sort keys do not order numerically")
	}
	h := headSK("s", "1")
	c := chunkSK(h, "0123456789abcdef", 3)
	if !strings.HasPrefix(c, chunkPrefix(h, "0123456789abcdef")) || len(c)-len(h) != len("#chunk#")+genDigits+1+4 {
		t.Fatalf("chunk key %q of head %q", c, h)
	}
}
