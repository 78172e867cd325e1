package wasmabi_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/sdk/go/guest"
	"github.com/projhost/projhost/wasmabi"
)

// The Go SDK (module sdk/go) has its own copy of the ABI codec, internal to it, so that handlers
// need nothing of the host. These tests keep the two in agreement: batches encoded by this
// package are decoded by the SDK exactly (guest.Native.RunBatch is projhost_handle without
// WebAssembly), the SDK's outputs are decoded by this package, and both reject the same bytes.
// plugins/examples' module tests do the same through real WebAssembly builds.

// echo puts, for every event, a document holding its fields (base64, so any bytes survive) under
// collection "ev", key = its position; and one "batch" document with the shard id and the count.
func echo(b *guest.Batch) error {
	i := 0
	var doc []byte
	for b.Next() {
		ev := b.Event()
		o := guest.NewObject(doc[:0])
		o.Str("seq", base64.StdEncoding.EncodeToString(ev.Seq)).Str("key", base64.StdEncoding.EncodeToString(ev.PartitionKey)).
			Int("arrival", ev.ArrivalMs).Str("data", base64.StdEncoding.EncodeToString(ev.Data))
		doc = o.Bytes()
		b.Put("ev", []byte(strconv.Itoa(i)), doc)
		i++
	}
	o := guest.NewObject(doc[:0])
	o.Str("shard", base64.StdEncoding.EncodeToString(b.ShardID())).Int("len", int64(b.Len())).Int("seen", int64(i))
	b.Put("batch", []byte("b"), o.Bytes())
	b.Delete("gone", []byte("x"))
	return nil
}

// runSDK hands batch to the SDK through echo and decodes its output with this package's
// decoder: the events the SDK saw, or the SDK's failure.
func runSDK(t *testing.T, batch []byte) (shard string, evs []wasmabi.Event, failed error) {
	t.Helper()
	out, err := guest.NewNative(echo).RunBatch(batch)
	if err != nil {
		return "", nil, err
	}
	var sawDelete bool
	err = wasmabi.DecodeOutput(out, nil, func(m wasmabi.Mutation) error {
		switch string(m.Collection) {
		case "ev":
			var e wasmabi.Event
			e.Seq = b64Field(t, m.Doc, "seq")
			e.PartitionKey = b64Field(t, m.Doc, "key")
			e.ArrivalMs, _ = guest.JSONInt(m.Doc, "arrival")
			e.Data = b64Field(t, m.Doc, "data")
			require.Equal(t, strconv.Itoa(len(evs)), string(m.Key), "events in order")
			evs = append(evs, e)
		case "batch":
			shard = string(b64Field(t, m.Doc, "shard"))
			n, _ := guest.JSONInt(m.Doc, "len")
			require.EqualValues(t, len(evs), n)
		case "gone":
			require.Equal(t, byte(wasmabi.OpDelete), m.Op)
			sawDelete = true
		}
		return nil
	})
	require.NoError(t, err, "the host decodes the SDK's output")
	require.True(t, sawDelete)
	return shard, evs, nil
}

func strField(t *testing.T, doc []byte, k string) string {
	s, ok := guest.JSONString(doc, k)
	require.True(t, ok, "%s in %s", k, doc)
	return string(s)
}

func b64Field(t *testing.T, doc []byte, k string) []byte {
	b, err := base64.StdEncoding.DecodeString(strField(t, doc, k))
	require.NoError(t, err)
	return b
}

func TestSDKCodecAgrees(t *testing.T) {
	evs := []wasmabi.Event{
		{Seq: []byte("1"), PartitionKey: []byte("DTW"), ArrivalMs: 1700000000000, Data: []byte(`{"origin":"DTW"}`)},
		{Seq: []byte("49590338271490256608559692538361571095921575989136588898"), ArrivalMs: -1},
		{Seq: []byte(strings.Repeat("9", wasmabi.MaxSeqLen)), PartitionKey: []byte(strings.Repeat("k", wasmabi.MaxKeyChars)), Data: bytes.Repeat([]byte{0, 0xff}, 500)},
		{Seq: []byte("2"), PartitionKey: []byte(strings.Repeat("😀", wasmabi.MaxKeyChars)), ArrivalMs: 1, Data: []byte(`{}`)},
	}
	batch, err := wasmabi.AppendBatch(nil, "shardId-000000000007", evs)
	require.NoError(t, err)
	shard, got, err := runSDK(t, batch)
	require.NoError(t, err)
	require.Equal(t, "shardId-000000000007", shard)
	require.Len(t, got, len(evs))
	for i := range evs {
		require.Equal(t, fmt.Sprintf("%q %q %d %q", evs[i].Seq, evs[i].PartitionKey, evs[i].ArrivalMs, evs[i].Data),
			fmt.Sprintf("%q %q %d %q", got[i].Seq, got[i].PartitionKey, got[i].ArrivalMs, got[i].Data), "event %d", i)
	}

	// The limits are the same numbers: a document of MaxDocLen bytes is accepted, one more not.
	for _, size := range []int{wasmabi.MaxDocLen, wasmabi.MaxDocLen + 1} {
		_, err = guest.NewNative(func(b *guest.Batch) error {
			b.Put("c", []byte("k"), []byte(`{"x":"`+strings.Repeat("a", size-8)+`"}`))
			return nil
		}).Run("s", nil)
		if size > wasmabi.MaxDocLen {
			require.ErrorIs(t, err, guest.ErrHandlerFailed, "a document of %d bytes", size)
		} else {
			require.NoError(t, err, "a document of %d bytes", size)
		}
	}
	_, err = guest.NewNative(echo).Run("s", []guest.Event{{Seq: []byte("1"), PartitionKey: make([]byte, wasmabi.MaxKeyLen+1)}})
	require.ErrorIs(t, err, guest.ErrMalformed, "a partition key of MaxKeyLen+1 bytes")
}

// FuzzSDKDecodesHostBatches: on any bytes, the SDK accepts a batch exactly when this package's
// decoder does, and sees the same shard id and events.
func FuzzSDKDecodesHostBatches(f *testing.F) {
	good, err := wasmabi.AppendBatch(nil, "shard", []wasmabi.Event{
		{Seq: []byte("1"), PartitionKey: []byte("DTW"), ArrivalMs: 5, Data: []byte(`{"a":1}`)},
		{Seq: []byte("22"), Data: []byte{0xff}},
	})
	require.NoError(f, err)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(append(append([]byte(nil), good...), 0))
	f.Add([]byte{2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, batch []byte) {
		if len(batch) > 64<<10 {
			t.Skip("echo's output would pass the per-call output limits")
		}
		wantShard, want, decErr := wasmabi.DecodeBatch(batch)
		shard, got, err := runSDK(t, batch)
		if decErr != nil {
			require.ErrorIs(t, err, guest.ErrHandlerFailed, "host rejects (%v), SDK accepts", decErr)
			require.Contains(t, err.Error(), "guest: cannot decode batch")
			return
		}
		require.NoError(t, err, "host accepts, SDK rejects")
		require.Equal(t, wantShard, shard)
		require.Len(t, got, len(want))
		for i := range want {
			require.Equal(t, string(want[i].Seq), string(got[i].Seq))
			require.Equal(t, string(want[i].PartitionKey), string(got[i].PartitionKey))
			require.Equal(t, want[i].ArrivalMs, got[i].ArrivalMs)
			require.Equal(t, string(want[i].Data), string(got[i].Data))
		}
	})
}
