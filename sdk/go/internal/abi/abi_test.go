package abi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
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

func decodeAll(buf []byte) (string, []Event, error) {
	shard, evs, _, err := decodeIndexed(buf)
	return shard, evs, err
}

// decodeIndexed is decodeAll with the number of fields of the batch's field index.
func decodeIndexed(buf []byte) (shard string, evs []Event, fields int, err error) {
	r, err := NewBatchReader(buf)
	if err != nil {
		return "", nil, 0, err
	}
	var e Event
	for r.Next(&e) {
		evs = append(evs, e)
	}
	return string(r.ShardID()), evs, r.Fields(), r.Err()
}

func wantMalformed(t *testing.T, err error, msg string) {
	t.Helper()
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("err = %v, want ErrMalformed with %q", err, msg)
	}
}

func TestBatchRoundTrip(t *testing.T) {
	evs := sampleEvents()
	buf, err := AppendBatch(nil, "shardId-000000000007", evs)
	if err != nil {
		t.Fatal(err)
	}
	// The header, byte by byte (ABI.md §2).
	for _, c := range []struct {
		name      string
		got, want uint32
	}{
		{"version", binary.LittleEndian.Uint32(buf[0:]), 1},
		{"flags", binary.LittleEndian.Uint32(buf[4:]), 0},
		{"count", binary.LittleEndian.Uint32(buf[8:]), uint32(len(evs))},
		{"shard id length", uint32(binary.LittleEndian.Uint16(buf[12:])), 20},
		{"first seq length", uint32(binary.LittleEndian.Uint16(buf[34:])), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if string(buf[14:34]) != "shardId-000000000007" || buf[36] != '1' {
		t.Fatalf("shard id / first seq bytes %q %q", buf[14:34], buf[36])
	}
	shard, got, err := decodeAll(buf)
	if err != nil || shard != "shardId-000000000007" || len(got) != len(evs) {
		t.Fatalf("decode: shard %q, %d events, %v", shard, len(got), err)
	}
	for i := range evs {
		if string(evs[i].Seq) != string(got[i].Seq) || string(evs[i].PartitionKey) != string(got[i].PartitionKey) ||
			evs[i].ArrivalMs != got[i].ArrivalMs || string(evs[i].Data) != string(got[i].Data) {
			t.Errorf("event %d: got %+v, want %+v", i, got[i], evs[i])
		}
	}
}

func TestIndexedBatchRoundTrip(t *testing.T) {
	evs := []Event{
		{Seq: []byte("1"), PartitionKey: []byte("DTW"), Data: []byte(`{"delay":66,"origin":"D\u0054W"}`)},
		{Seq: []byte("2"), Data: []byte(`not JSON`)},
		{Seq: []byte("3"), Data: []byte(`{"delay":-5}`)},
	}
	evs[0].Index = AppendFieldEntry(AppendFieldEntry(nil, 9, 11, false), 20, 30, true) // 66, "D\u0054W"
	evs[2].Index = AppendFieldEntry(AppendFieldEntry(nil, 9, 11, false), -1, 0, false) // -5, no "origin"
	buf, err := AppendIndexedBatch(nil, "s7", evs, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The header and the first event's index, byte by byte (ABI.md §2).
	if got := binary.LittleEndian.Uint32(buf[4:]); got != FlagFieldIndex {
		t.Errorf("flags = %d, want %d", got, FlagFieldIndex)
	}
	if got := binary.LittleEndian.Uint16(buf[16:]); got != 2 {
		t.Errorf("field count = %d, want 2", got)
	}
	first := 18 + 2 + 1 + 2 + 3 + 8 + 4 + len(evs[0].Data) // header, shard, seq, key, arrival, data
	want := []byte{1, 9, 0, 0, 0, 2, 0, 0, 0, 20, 0, 0, 0, 10, 0, 0, 0x80, 1}
	if !bytes.Equal(buf[first:first+18], want) {
		t.Fatalf("first event's index % x, want % x (then the next seq length)", buf[first:first+18], want)
	}
	shard, got, fields, err := decodeIndexed(buf)
	if err != nil || shard != "s7" || fields != 2 || len(got) != len(evs) {
		t.Fatalf("decode: shard %q, %d fields, %d events, %v", shard, fields, len(got), err)
	}
	for i := range evs {
		if string(got[i].Seq) != string(evs[i].Seq) || string(got[i].Data) != string(evs[i].Data) ||
			!bytes.Equal(got[i].Index, evs[i].Index) || (got[i].Index == nil) != (evs[i].Index == nil) {
			t.Errorf("event %d: got %q %q % x, want %q %q % x", i, got[i].Seq, got[i].Data, got[i].Index, evs[i].Seq, evs[i].Data, evs[i].Index)
		}
	}
	for _, c := range []struct {
		ev, field       int
		start, end      int
		escaped, exists bool
	}{{0, 0, 9, 11, false, true}, {0, 1, 20, 30, true, true}, {2, 0, 9, 11, false, true}, {2, 1, 0, 0, false, false}} {
		start, end, escaped, ok := FieldEntry(got[c.ev].Index, c.field)
		if start != c.start || end != c.end || escaped != c.escaped || ok != c.exists {
			t.Errorf("event %d field %d: FieldEntry = %d, %d, %v, %v; want %d, %d, %v, %v",
				c.ev, c.field, start, end, escaped, ok, c.start, c.end, c.escaped, c.exists)
		}
	}
	// Without the flag, the same events encode as AppendBatch encodes them, and decode without
	// their index.
	plain, _ := AppendBatch(nil, "s7", evs)
	if noIndex, _ := AppendIndexedBatch(nil, "s7", evs, 0); !bytes.Equal(noIndex, plain) {
		t.Errorf("AppendIndexedBatch with 0 fields differs from AppendBatch")
	}
	if _, got, fields, err := decodeIndexed(plain); err != nil || fields != 0 || got[0].Index != nil {
		t.Errorf("batch without index: %d fields, index % x, %v", fields, got[0].Index, err)
	}
}

func TestAppendIndexedBatchRejects(t *testing.T) {
	data := []byte(`{"a":1}`)
	for _, c := range []struct {
		name   string
		fields int
		index  []byte
		msg    string
	}{
		{"65 fields", 65, nil, "65 indexed fields, want 0 to 64"},
		{"short entries", 2, AppendFieldEntry(nil, 5, 6, false), "event 0: wasmabi: malformed encoding: field index of 8 bytes, want 2 fields of 8"},
		{"empty entries", 1, []byte{}, "event 0: wasmabi: malformed encoding: field index of 0 bytes"},
		{"value past the data", 1, AppendFieldEntry(nil, 5, 8, false), "field index entry 0: value 5+3 outside the 7 bytes of data"},
		{"empty value", 1, AppendFieldEntry(nil, 5, 5, true), "field index entry 0: value 5+0 outside"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := AppendIndexedBatch(nil, "s", []Event{{Seq: []byte("1"), Data: data, Index: c.index}}, c.fields)
			wantMalformed(t, err, c.msg)
		})
	}
}

func TestAppendBatchLimits(t *testing.T) {
	for _, c := range []struct {
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
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := AppendBatch(nil, c.shard, []Event{c.ev})
			wantMalformed(t, err, c.msg)
		})
	}
}

func TestBatchReaderRejects(t *testing.T) {
	good, err := AppendBatch(nil, "s", sampleEvents()[:1])
	if err != nil {
		t.Fatal(err)
	}
	bad := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	longKey := func() []byte {
		var b []byte
		b = binary.LittleEndian.AppendUint32(b, Version)
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint32(b, 1)
		b = binary.LittleEndian.AppendUint16(b, 1)
		b = append(b, 's')
		b = binary.LittleEndian.AppendUint16(b, 1)
		b = append(b, '1')
		b = binary.LittleEndian.AppendUint16(b, MaxKeyLen+1)
		b = append(b, bytes.Repeat([]byte("k"), MaxKeyLen+1)...)
		b = binary.LittleEndian.AppendUint64(b, 0)
		return binary.LittleEndian.AppendUint32(b, 0)
	}()
	for _, c := range []struct {
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
		{"key over 1024 bytes", longKey, "event 0: partition key truncated or too long"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := decodeAll(c.in)
			wantMalformed(t, err, c.msg)
		})
	}
}

func TestBatchReaderRejectsIndex(t *testing.T) {
	data := []byte(`{"a":1,"b":"x"}`) // 15 bytes: "a" at 5 (1 byte), "b" at 11 (3 bytes)
	evs := []Event{{Seq: []byte("1"), Data: data, Index: AppendFieldEntry(AppendFieldEntry(nil, 5, 6, false), 11, 14, false)}, {Seq: []byte("1"), Data: data}}
	good, err := AppendIndexedBatch(nil, "s", evs, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := decodeAll(good); err != nil {
		t.Fatalf("good batch: %v", err)
	}
	flag := 15 + 2 + 3 + 2 + 8 + 4 + len(data) // header and shard, field count, seq, key, arrival, data
	patched := func(at int, v uint32, size int) []byte {
		b := append([]byte(nil), good...)
		switch size {
		case 1:
			b[at] = byte(v)
		case 2:
			binary.LittleEndian.PutUint16(b[at:], uint16(v))
		default:
			binary.LittleEndian.PutUint32(b[at:], v)
		}
		return b
	}
	entry := func(f int) int { return flag + 1 + 8*f } // event 0's entry of field f
	for _, c := range []struct {
		name string
		in   []byte
		msg  string
	}{
		{"no field count", good[:15], "field index count truncated"},
		{"0 fields", patched(15, 0, 2), "0 indexed fields, want 1 to 64"},
		{"65 fields", patched(15, 65, 2), "65 indexed fields, want 1 to 64"},
		{"more fields than entries", patched(15, 3, 2), "event 0: wasmabi: malformed encoding: field index entry 2: value 3211265+0 outside"}, // the next event's bytes
		{"index flag 2", patched(flag, 2, 1), "event 0: field index flag truncated or too long"},
		{"truncated flag", good[:flag], "event 0: field index flag truncated"},
		{"truncated entries", good[:flag+9], "event 0: field index truncated"},
		{"value past the data", patched(entry(1)+4, 5, 4), "event 0: wasmabi: malformed encoding: field index entry 1: value 11+5 outside the 15 bytes of data"},
		{"offset past the data", patched(entry(0), 15, 4), "field index entry 0: value 15+1 outside"},
		{"empty value", patched(entry(0)+4, 0, 4), "field index entry 0: value 5+0 outside"},
		{"empty escaped value", patched(entry(0)+4, fieldEscaped, 4), "field index entry 0: value 5+0 outside"},
		{"the escape flag is not length", patched(entry(1)+4, fieldEscaped|5, 4), "field index entry 1: value 11+5 outside"},
		{"absent with a length", patched(entry(0), FieldAbsent, 4), "field index entry 0: an absent field with length 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := decodeAll(c.in)
			wantMalformed(t, err, c.msg)
		})
	}
}

func validObject(doc []byte) error {
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return errors.New("document is not a JSON object")
	}
	return nil
}

func TestOutputRoundTrip(t *testing.T) {
	var w OutputWriter
	w.Reset()
	w.Put("airports", "DTW", []byte(`{"flights":1}`))
	w.Delete("routes", "DTW-LAS")
	w.Put("airports", "DTW", []byte(`{"flights":2}`))
	if w.Count() != 3 {
		t.Fatalf("Count = %d", w.Count())
	}
	var got []string
	err := DecodeOutput(w.Buf, validObject, func(m Mutation) error {
		got = append(got, fmt.Sprintf("%d %s/%s %s", m.Op, m.Collection, m.Key, m.Doc))
		return nil
	})
	want := `1 airports/DTW {"flights":1}|2 routes/DTW-LAS |1 airports/DTW {"flights":2}`
	if err != nil || strings.Join(got, "|") != want {
		t.Fatalf("decoded %q, %v; want %q", strings.Join(got, "|"), err, want)
	}
	if err := DecodeOutput(nil, nil, func(Mutation) error { return errors.New("no mutation expected") }); err != nil {
		t.Fatal(err)
	}
	w.Reset()
	if !bytes.Equal(w.Buf, []byte{1, 0, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("reset buffer %v", w.Buf)
	}
}

func TestDecodeOutputRejects(t *testing.T) {
	mk := func(f func(w *OutputWriter)) []byte {
		var w OutputWriter
		w.Reset()
		f(&w)
		return w.Buf
	}
	put := mk(func(w *OutputWriter) { w.Put("c", "k", []byte(`{}`)) })
	for _, c := range []struct {
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
		{"delete with document", func() []byte {
			b := mk(func(w *OutputWriter) { w.Delete("c", "k") })
			binary.LittleEndian.PutUint32(b[len(b)-4:], 2)
			return append(b, '{', '}')
		}(), "delete carries a 2-byte document"},
		{"truncated", put[:len(put)-1], "truncated"},
		{"trailing", append(append([]byte(nil), put...), 1), "1 trailing bytes"},
		{"count too high", func() []byte { b := append([]byte(nil), put...); b[4] = 2; return b }(), "mutation 1 of 2: output truncated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := DecodeOutput(c.in, validObject, func(Mutation) error { return nil })
			wantMalformed(t, err, c.msg)
		})
	}
}

func TestValidNames(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		got  bool
	}{
		{"collection air_ports-1.v2", true, ValidCollection("air_ports-1.v2")},
		{"empty collection", false, ValidCollection("")},
		{"collection with /", false, ValidCollection([]byte("a/b"))},
		{"collection of 256 bytes", false, ValidCollection(strings.Repeat("a", 256))},
		{"key with space and ü", true, ValidDocKey([]byte("DTW-LAS ü"))},
		{"key with invalid UTF-8", false, ValidDocKey([]byte("a\xffb"))},
		{"key of 1025 bytes", false, ValidDocKey(bytes.Repeat([]byte("a"), 1025))},
		{"key with NUL", false, ValidDocKey([]byte("a\x00"))},
	} {
		if c.got != c.ok {
			t.Errorf("%s: valid = %v, want %v", c.name, c.got, c.ok)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	good, _ := AppendBatch(nil, "shard", sampleEvents())
	f.Add(good)
	f.Add(good[:20])
	f.Add([]byte{})
	indexed, _ := AppendIndexedBatch(nil, "shard", []Event{
		{Seq: []byte("1"), Data: []byte(`{"a":1,"b":"\n"}`), Index: AppendFieldEntry(AppendFieldEntry(nil, 5, 6, false), 11, 15, true)},
		{Seq: []byte("2"), Data: []byte(`[]`)},
		{Seq: []byte("3"), Data: []byte(`{"b":"x"}`), Index: AppendFieldEntry(AppendFieldEntry(nil, -1, 0, false), 5, 8, false)},
	}, 2)
	f.Add(indexed)
	f.Add(indexed[:40])
	f.Fuzz(func(t *testing.T, in []byte) {
		shard, evs, fields, err := decodeIndexed(in)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// A decoded index has an entry per field, whose value is not empty and lies within its
		// event's data.
		for i, e := range evs {
			if e.Index == nil {
				continue
			}
			if len(e.Index) != FieldEntryLen*fields {
				t.Fatalf("event %d: index of %d bytes for %d fields", i, len(e.Index), fields)
			}
			for j := range fields {
				if start, end, _, ok := FieldEntry(e.Index, j); ok && (start >= end || end > len(e.Data)) {
					t.Fatalf("event %d: field %d at %d:%d: empty or past %d bytes of data", i, j, start, end, len(e.Data))
				}
			}
		}
		// A batch that decodes re-encodes to the same bytes, but for the reserved flags
		// (ignored by readers, written as 0).
		out, err := AppendIndexedBatch(nil, shard, evs, fields)
		if err != nil {
			t.Fatal(err)
		}
		want := append([]byte(nil), in...)
		binary.LittleEndian.PutUint32(want[4:], binary.LittleEndian.Uint32(in[4:])&FlagFieldIndex)
		if !bytes.Equal(want, out) {
			t.Fatalf("re-encoded %x, want %x", out, want)
		}
	})
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
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if len(in) > 0 && !bytes.Equal(in, re.Buf) {
			t.Fatalf("re-encoded %x, want %x", re.Buf, in)
		}
	})
}
