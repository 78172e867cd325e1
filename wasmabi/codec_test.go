package wasmabi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleEvents() []Event {
	return []Event{
		{Seq: []byte("1"), PartitionKey: []byte("DTW"), ArrivalMs: 1700000000000, Data: []byte(`{"origin":"DTW"}`)},
		{Seq: []byte("49590338271490256608559692538361571095921575989136588898"), PartitionKey: nil, ArrivalMs: -1, Data: nil},
		{Seq: []byte(strings.Repeat("9", MaxSeqLen)), PartitionKey: []byte(strings.Repeat("k", MaxKeyChars)), Data: bytes.Repeat([]byte{0}, 1000)},
		// The longest key Kinesis accepts, in bytes: 256 characters of 4 UTF-8 bytes each.
		{Seq: []byte("2"), PartitionKey: []byte(strings.Repeat("😀", MaxKeyChars)), ArrivalMs: 1, Data: []byte(`{}`)},
	}
}

// TestPartitionKeyLimit: the ABI carries every partition key Kinesis accepts (up to 256
// characters, whatever their UTF-8 width) and refuses, on encoding and decoding, a key over
// 1024 bytes.
func TestPartitionKeyLimit(t *testing.T) {
	require.Equal(t, 256, MaxKeyChars)
	require.Equal(t, 1024, MaxKeyLen)
	for _, tt := range []struct {
		name  string
		key   string
		bytes int
		msg   string // "" when the key is carried
	}{
		{"one character", "k", 1, ""},
		{"256 ASCII characters", strings.Repeat("k", 256), 256, ""},
		{"256 characters of 2 bytes", strings.Repeat("é", 256), 512, ""},
		{"256 characters of 3 bytes", strings.Repeat("✈", 256), 768, ""},
		{"256 characters of 4 bytes", strings.Repeat("😀", 256), 1024, ""},
		{"257 characters of 4 bytes", strings.Repeat("😀", 257), 1028, "partition key of 1028 bytes exceeds 1024 bytes (256 characters of up to 4 UTF-8 bytes each"},
		{"1025 bytes", strings.Repeat("😀", 256) + "k", 1025, "partition key of 1025 bytes exceeds 1024 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.bytes, len(tt.key))
			ev := Event{Seq: []byte("7"), PartitionKey: []byte(tt.key), ArrivalMs: 1700000000000, Data: []byte(`{"a":1}`)}
			buf, err := AppendBatch(nil, "shardId-000000000001", []Event{ev})
			if tt.msg != "" {
				require.ErrorIs(t, err, ErrMalformed)
				require.Contains(t, err.Error(), tt.msg)
				require.ErrorIs(t, CheckEvent(&ev), ErrMalformed)
				return
			}
			require.NoError(t, err)
			require.NoError(t, CheckEvent(&ev))
			// The length field holds the key's bytes, right after the sequence number.
			require.Equal(t, uint16(tt.bytes), binary.LittleEndian.Uint16(buf[14+20+2+1:]))
			_, got, err := DecodeBatch(buf)
			require.NoError(t, err)
			require.Len(t, got, 1)
			require.Equal(t, tt.key, string(got[0].PartitionKey))
			require.Equal(t, `{"a":1}`, string(got[0].Data))
		})
	}
}

// TestDecodeRefusesLongKey: a batch whose key length field says more than MaxKeyLen is refused
// by the decoder, even when the bytes are there.
func TestDecodeRefusesLongKey(t *testing.T) {
	for _, tt := range []struct {
		keyLen int
		ok     bool
	}{{MaxKeyLen, true}, {MaxKeyLen + 1, false}, {0xFFFF, false}} {
		t.Run(fmt.Sprint(tt.keyLen), func(t *testing.T) {
			var b []byte
			b = binary.LittleEndian.AppendUint32(b, Version)
			b = binary.LittleEndian.AppendUint32(b, 0)
			b = binary.LittleEndian.AppendUint32(b, 1)
			b = binary.LittleEndian.AppendUint16(b, 1)
			b = append(b, 's')
			b = binary.LittleEndian.AppendUint16(b, 1)
			b = append(b, '1')
			b = binary.LittleEndian.AppendUint16(b, uint16(tt.keyLen))
			b = append(b, bytes.Repeat([]byte("k"), tt.keyLen)...)
			b = binary.LittleEndian.AppendUint64(b, 0)
			b = binary.LittleEndian.AppendUint32(b, 0)
			_, got, err := DecodeBatch(b)
			if tt.ok {
				require.NoError(t, err)
				require.Len(t, got[0].PartitionKey, tt.keyLen)
				return
			}
			require.ErrorIs(t, err, ErrMalformed)
			require.Contains(t, err.Error(), "event 0: partition key truncated or too long")
		})
	}
}

func TestBatchRoundTrip(t *testing.T) {
	evs := sampleEvents()
	buf, err := AppendBatch(nil, "shardId-000000000007", evs)
	require.NoError(t, err)
	require.Len(t, buf, BatchSize("shardId-000000000007", evs))
	// The header, byte by byte (ABI.md §2).
	require.Equal(t, uint32(1), binary.LittleEndian.Uint32(buf[0:]))
	require.Equal(t, uint32(0), binary.LittleEndian.Uint32(buf[4:]))
	require.Equal(t, uint32(len(evs)), binary.LittleEndian.Uint32(buf[8:]))
	require.Equal(t, uint16(20), binary.LittleEndian.Uint16(buf[12:]))
	require.Equal(t, "shardId-000000000007", string(buf[14:34]))
	require.Equal(t, uint16(1), binary.LittleEndian.Uint16(buf[34:]))
	require.Equal(t, byte('1'), buf[36])

	shard, got, err := DecodeBatch(buf)
	require.NoError(t, err)
	require.Equal(t, "shardId-000000000007", shard)
	require.Len(t, got, len(evs))
	for i := range evs {
		require.Equal(t, string(evs[i].Seq), string(got[i].Seq))
		require.Equal(t, string(evs[i].PartitionKey), string(got[i].PartitionKey))
		require.Equal(t, evs[i].ArrivalMs, got[i].ArrivalMs)
		require.Equal(t, string(evs[i].Data), string(got[i].Data))
	}
}

func TestAppendBatchLimits(t *testing.T) {
	cases := []struct {
		name  string
		shard string
		ev    Event
		msg   string
	}{
		{"empty seq", "s", Event{}, "sequence number length 0"},
		{"long seq", "s", Event{Seq: bytes.Repeat([]byte("1"), MaxSeqLen+1)}, "sequence number length 130"},
		{"long key", "s", Event{Seq: []byte("1"), PartitionKey: make([]byte, MaxKeyLen+1)}, "partition key of 1025 bytes exceeds 1024 bytes"},
		{"big data", "s", Event{Seq: []byte("1"), Data: make([]byte, MaxDataLen+1)}, "event data of 1048577 bytes"},
		{"long shard", strings.Repeat("s", MaxShardIDLen+1), Event{Seq: []byte("1")}, "shard id of 257 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := AppendBatch(nil, c.shard, []Event{c.ev})
			require.ErrorIs(t, err, ErrMalformed)
			require.Contains(t, err.Error(), c.msg)
		})
	}
}

func TestBatchReaderRejects(t *testing.T) {
	good, err := AppendBatch(nil, "s", sampleEvents()[:1])
	require.NoError(t, err)
	bad := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		in   []byte
		msg  string
	}{
		{"short header", good[:10], "shorter than its 14-byte header"},
		{"version", bad(func(b []byte) []byte { b[0] = 2; return b }), "batch ABI version 2"},
		{"shard len", bad(func(b []byte) []byte { b[12] = 200; return b }), "shard id length 200"},
		{"truncated event", good[:len(good)-3], "data truncated"},
		{"trailing", append(append([]byte(nil), good...), 0), "1 trailing bytes"},
		{"count too high", bad(func(b []byte) []byte { b[8] = 2; return b }), "event 1: sequence number truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeBatch(c.in)
			require.ErrorIs(t, err, ErrMalformed)
			require.Contains(t, err.Error(), c.msg)
		})
	}
}

func TestOutputRoundTrip(t *testing.T) {
	var w OutputWriter
	w.Reset()
	w.Put("airports", "DTW", []byte(`{"flights":1}`))
	w.Delete("routes", "DTW-LAS")
	w.Put("airports", "DTW", []byte(`{"flights":2}`))
	require.Equal(t, 3, w.Count())
	var got []string
	err := DecodeOutput(w.Buf, validObject, func(m Mutation) error {
		got = append(got, fmt.Sprintf("%d %s/%s %s", m.Op, m.Collection, m.Key, m.Doc))
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{`1 airports/DTW {"flights":1}`, `2 routes/DTW-LAS `, `1 airports/DTW {"flights":2}`}, got)
	require.NoError(t, DecodeOutput(nil, nil, func(Mutation) error { t.Fatal("no mutation expected"); return nil }))
	w.Reset()
	require.Equal(t, []byte{1, 0, 0, 0, 0, 0, 0, 0}, w.Buf)
}

func validObject(doc []byte) error {
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return errors.New("document is not a JSON object")
	}
	return nil
}

func TestDecodeOutputRejects(t *testing.T) {
	mk := func(f func(w *OutputWriter)) []byte {
		var w OutputWriter
		w.Reset()
		f(&w)
		return w.Buf
	}
	put := mk(func(w *OutputWriter) { w.Put("c", "k", []byte(`{}`)) })
	cases := []struct {
		name string
		in   []byte
		msg  string
	}{
		{"short", []byte{1, 0, 0}, "shorter than its 8-byte header"},
		{"version", append([]byte{9, 0, 0, 0}, put[4:]...), "output ABI version 9"},
		{"bad op", func() []byte { b := append([]byte(nil), put...); b[8] = 7; return b }(), "unknown op 7"},
		{"bad collection", mk(func(w *OutputWriter) { w.Put("a b", "k", []byte(`{}`)) }), "collection name"},
		{"empty key", mk(func(w *OutputWriter) { w.Put("c", "", []byte(`{}`)) }), "key missing"},
		{"nul key", mk(func(w *OutputWriter) { w.Put("c", "a\x00", []byte(`{}`)) }), "containing NUL"},
		{"invalid UTF-8 key", mk(func(w *OutputWriter) { w.Put("c", "\xff", []byte(`{}`)) }), "not valid UTF-8"},
		{"not object", mk(func(w *OutputWriter) { w.Put("c", "k", []byte(`[1]`)) }), "not a JSON object"},
		{"truncated", put[:len(put)-1], "truncated"},
		{"trailing", append(append([]byte(nil), put...), 1), "1 trailing bytes"},
		{"count too high", func() []byte { b := append([]byte(nil), put...); b[4] = 2; return b }(), "mutation 1 of 2: output truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := DecodeOutput(c.in, validObject, func(Mutation) error { return nil })
			require.ErrorIs(t, err, ErrMalformed)
			require.Contains(t, err.Error(), c.msg)
		})
	}
}

func TestValidNames(t *testing.T) {
	require.True(t, ValidCollection([]byte("air_ports-1.v2")))
	require.False(t, ValidCollection([]byte("")))
	require.False(t, ValidCollection([]byte("a/b")))
	require.False(t, ValidCollection(bytes.Repeat([]byte("a"), 256)))
	require.True(t, ValidDocKey([]byte("DTW-LAS ü")))
	require.False(t, ValidDocKey([]byte("a\xffb")), "invalid UTF-8")
	require.False(t, ValidDocKey(bytes.Repeat([]byte("a"), 1025)))
}

func FuzzDecodeBatch(f *testing.F) {
	good, _ := AppendBatch(nil, "shard", sampleEvents())
	f.Add(good)
	f.Add(good[:20])
	f.Add([]byte{})
	f.Add(indexedBatch(f))
	f.Fuzz(func(t *testing.T, in []byte) {
		shard, evs, err := DecodeBatch(in)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		r, err := NewBatchReader(in)
		require.NoError(t, err)
		// A batch that decodes re-encodes to the same bytes, but for the reserved flags
		// (ignored by readers, written as 0).
		out, err := AppendIndexedBatch(nil, shard, evs, r.Fields())
		require.NoError(t, err)
		want := append([]byte(nil), in...)
		binary.LittleEndian.PutUint32(want[4:], binary.LittleEndian.Uint32(in[4:])&FlagFieldIndex)
		require.Equal(t, want, out)
		for _, e := range evs {
			for i := 0; e.Index != nil && i < r.Fields(); i++ {
				if start, end, _, ok := FieldEntry(e.Index, i); ok {
					require.True(t, 0 <= start && start < end && end <= len(e.Data), "entry %d: %d..%d of %d bytes", i, start, end, len(e.Data))
				}
			}
		}
	})
}

// indexedBatch is a batch of two events with a field index of two fields: the first event
// indexed (field 0 the value 66 at offset 9, field 1 absent; then the escaped string), the
// second not.
func indexedBatch(t testing.TB) []byte {
	data := []byte(`{"delay":66,"o":"a\"b"}`)
	var idx []byte
	idx = AppendFieldEntry(idx, 9, 11, false)
	idx = AppendFieldEntry(idx, -1, -1, false)
	evs := []Event{
		{Seq: []byte("1"), PartitionKey: []byte("k"), Data: data, Index: idx},
		{Seq: []byte("2"), Data: []byte("not json")},
	}
	b, err := AppendIndexedBatch(nil, "s", evs, 2)
	require.NoError(t, err)
	return b
}

// TestIndexedBatchRoundTrip: the field index's bytes (ABI.md §2.1) and their decoding.
func TestIndexedBatchRoundTrip(t *testing.T) {
	b := indexedBatch(t)
	require.Equal(t, uint32(FlagFieldIndex), binary.LittleEndian.Uint32(b[4:]))
	require.Equal(t, uint16(2), binary.LittleEndian.Uint16(b[15:]), "the field count after the 1-byte shard id")
	ev1 := 17 + 2 + 1 + 2 + 1 + 8 + 4 + 23 // where event 1's index flag is
	require.Equal(t, byte(1), b[ev1])
	require.Equal(t, []byte{9, 0, 0, 0, 2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, b[ev1+1:ev1+17])
	require.Equal(t, byte(0), b[len(b)-1], "event 2 is not indexed")

	r, err := NewBatchReader(b)
	require.NoError(t, err)
	require.Equal(t, 2, r.Fields())
	var e Event
	require.True(t, r.Next(&e))
	start, end, esc, ok := FieldEntry(e.Index, 0)
	require.Equal(t, []any{9, 11, false, true}, []any{start, end, esc, ok})
	require.Equal(t, "66", string(e.Data[start:end]))
	_, _, _, ok = FieldEntry(e.Index, 1)
	require.False(t, ok)
	require.True(t, r.Next(&e))
	require.Nil(t, e.Index)
	require.False(t, r.Next(&e))
	require.NoError(t, r.Err())

	escaped := AppendFieldEntry(nil, 16, 22, true)
	start, end, esc, ok = FieldEntry(escaped, 0)
	require.Equal(t, []any{16, 22, true, true}, []any{start, end, esc, ok})

	// Without the flag there is no count and no per-event byte: AppendBatch's encoding.
	plain, err := AppendIndexedBatch(nil, "s", []Event{{Seq: []byte("1")}}, 0)
	require.NoError(t, err)
	want, err := AppendBatch(nil, "s", []Event{{Seq: []byte("1")}})
	require.NoError(t, err)
	require.Equal(t, want, plain)
	require.Len(t, b, IndexedBatchSize("s", []Event{{Seq: []byte("1"), PartitionKey: []byte("k"), Data: make([]byte, 23), Index: make([]byte, 16)}, {Seq: []byte("2"), Data: make([]byte, 8)}}, 2))
}

// TestIndexedBatchRejects: a field index that does not fit its batch or its event's data.
func TestIndexedBatchRejects(t *testing.T) {
	good := indexedBatch(t)
	ev1 := 17 + 2 + 1 + 2 + 1 + 8 + 4 + 23
	bad := func(f func(b []byte)) []byte { b := append([]byte(nil), good...); f(b); return b }
	cases := []struct {
		name string
		in   []byte
		msg  string
	}{
		{"no field count", bad(func(b []byte) {})[:15], "field index count truncated"},
		{"zero fields", bad(func(b []byte) { b[15] = 0 }), "0 indexed fields"},
		{"65 fields", bad(func(b []byte) { b[15] = 65 }), "65 indexed fields"},
		{"flag 2", bad(func(b []byte) { b[ev1] = 2 }), "event 0: field index flag"},
		{"value past the data", bad(func(b []byte) { b[ev1+1] = 22 }), "value 22+2 outside the 23 bytes of data"},
		{"empty value", bad(func(b []byte) { b[ev1+5] = 0 }), "value 9+0 outside"},
		{"absent with a length", bad(func(b []byte) { b[ev1+13] = 1 }), "an absent field with length 1"},
		{"truncated index", good[:ev1+10], "event 0: field index truncated"},
		{"missing flag of event 1", good[:len(good)-1], "event 1: field index flag"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := DecodeBatch(c.in)
			require.ErrorIs(t, err, ErrMalformed)
			require.Contains(t, err.Error(), c.msg)
		})
	}
	_, err := AppendIndexedBatch(nil, "s", []Event{{Seq: []byte("1"), Data: []byte("{}"), Index: make([]byte, 8)}}, 2)
	require.ErrorContains(t, err, "field index of 8 bytes, want 2 fields")
	_, err = AppendIndexedBatch(nil, "s", nil, MaxIndexedFields+1)
	require.ErrorContains(t, err, "65 indexed fields")
}

func FuzzDecodeOutput(f *testing.F) {
	var w OutputWriter
	w.Reset()
	w.Put("airports", "DTW", []byte(`{"flights":1}`))
	w.Delete("routes", "A-B")
	f.Add(w.Buf)
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		var re OutputWriter
		re.Reset()
		err := DecodeOutput(in, validObject, func(m Mutation) error {
			if m.Op == OpPut {
				re.Put(string(m.Collection), string(m.Key), m.Doc)
			} else {
				re.Delete(string(m.Collection), string(m.Key))
			}
			return nil
		})
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		if len(in) > 0 {
			require.Equal(t, in, re.Buf)
		}
	})
}
