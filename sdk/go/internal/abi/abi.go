// Package abi is the Go SDK's copy of projhost's WebAssembly ABI v1 codec (wasmabi/ABI.md in the
// projhost repository): the batch the host writes into a guest and the mutation output a guest
// returns. It is internal so that the SDK module needs nothing of the host: the host keeps its own
// codec (package wasmabi of the main module), with the same names, limits and error texts. Tests
// of the main module keep the two in agreement: wasmabi's TestSDKCodecAgrees and
// FuzzSDKDecodesHostBatches (host-encoded batches decoded by this package through guest.Native),
// and plugins/examples' module tests (host-encoded batches into Go guests, their outputs decoded
// by the host).
//
// Decoders never panic on any input: they return an error wrapping ErrMalformed. Encoders append
// to a caller-supplied slice and do not allocate beyond growing it. The functions are safe for
// concurrent use; the types they fill are not.
package abi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Version is the ABI version this package implements.
const Version = 1

// Limits of ABI v1, in bytes unless stated otherwise (wasmabi/ABI.md §2 and §4).
const (
	MaxSeqLen          = 129
	MaxShardIDLen      = 256
	MaxKeyChars        = 256 // partition key, in characters (Kinesis's limit)
	MaxKeyLen          = 4 * MaxKeyChars
	MaxDataLen         = 1 << 20
	MaxCollectionLen   = 255
	MaxDocKeyLen       = 1024
	MaxDocLen          = 256 << 10
	MaxMessageLen      = 4096 // log and fail messages
	MaxOutputMutations = 50000
	MaxOutputBytes     = 32 << 20
	// MaxIndexedFields is how many fields one instance may register with the field import
	// for the batch field index (ABI.md §2.1), and MaxFieldNameLen the longest name (bytes).
	MaxIndexedFields = 64
	MaxFieldNameLen  = 255
)

// ImportReadKnown is the name of the optional import read_known (ABI.md §1, §5.1), module
// projhost: read for a guest that holds a copy of the document.
const ImportReadKnown = "read_known"

// ReadUnchanged is what read_known returns when the stored document is byte-for-byte the
// guest's known one (ABI.md §1, §5.1); read and read_known return -1 when there is no document.
const ReadUnchanged = -2

// Batch flags (ABI.md §2).
const (
	FlagFieldIndex = 1 // the events carry a field index (ABI.md §2.1)
)

// FieldAbsent is the offset of a field index entry whose field the event does not have.
const FieldAbsent = 0xFFFFFFFF

// fieldEscaped is the bit of an index entry's length set for a string value with an escape.
const fieldEscaped = 1 << 31

// FieldEntryLen is the size of one field index entry: u32 offset, u32 length (ABI.md §2.1).
const FieldEntryLen = 8

// Log levels of the log import.
const (
	LevelDebug = 0
	LevelInfo  = 1
	LevelWarn  = 2
	LevelError = 3
)

// Mutation ops in the output encoding.
const (
	OpPut    = 1
	OpDelete = 2
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("wasmabi: malformed encoding")

// Event is one stream record as the ABI carries it. Byte slices returned by decoders alias the
// decoded buffer.
type Event struct {
	Seq          []byte // decimal sequence number
	PartitionKey []byte
	ArrivalMs    int64 // approximate arrival time, ms since the Unix epoch (0 = unknown)
	Data         []byte
	// Index is the event's field index as encoded (ABI.md §2.1): one FieldEntryLen-byte entry
	// per indexed field (AppendFieldEntry, FieldEntry); nil when the data is not indexed.
	Index []byte
}

// AppendFieldEntry appends the field index entry of a value at data[start:end] to dst (escaped:
// a string value with a backslash escape), or of an absent field when start < 0.
func AppendFieldEntry(dst []byte, start, end int, escaped bool) []byte {
	if start < 0 {
		dst = binary.LittleEndian.AppendUint32(dst, FieldAbsent)
		return binary.LittleEndian.AppendUint32(dst, 0)
	}
	n := uint32(end - start)
	if escaped {
		n |= fieldEscaped
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(start))
	return binary.LittleEndian.AppendUint32(dst, n)
}

// FieldEntry decodes entry i of an event's field index: its value is data[start:end], escaped
// when it is a string with a backslash escape; ok is false when the field is absent. The
// decoder (BatchReader) has checked that every present value lies within the event's data.
func FieldEntry(index []byte, i int) (start, end int, escaped, ok bool) {
	e := index[i*FieldEntryLen:]
	off, n := binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
	if off == FieldAbsent {
		return 0, 0, false, false
	}
	return int(off), int(off) + int(n&^fieldEscaped), n&fieldEscaped != 0, true
}

// Mutation is one read-model write. Doc is nil for OpDelete.
type Mutation struct {
	Op         byte
	Collection []byte
	Key        []byte
	Doc        []byte
}

const batchHeaderLen = 14 // version, flags, count, shard id length

// CheckEvent returns an error wrapping ErrMalformed when e exceeds an ABI v1 limit.
func CheckEvent(e *Event) error {
	switch {
	case len(e.Seq) == 0 || len(e.Seq) > MaxSeqLen:
		return fmt.Errorf("%w: sequence number length %d not in 1..%d", ErrMalformed, len(e.Seq), MaxSeqLen)
	case len(e.PartitionKey) > MaxKeyLen:
		return fmt.Errorf("%w: partition key of %d bytes exceeds %d bytes (%d characters of up to 4 UTF-8 bytes each, the Kinesis limit): the producer must use a shorter key",
			ErrMalformed, len(e.PartitionKey), MaxKeyLen, MaxKeyChars)
	case len(e.Data) > MaxDataLen:
		return fmt.Errorf("%w: event data of %d bytes exceeds %d", ErrMalformed, len(e.Data), MaxDataLen)
	}
	return nil
}

// AppendBatch appends the encoding of a batch (ABI.md §2) without a field index to dst. It
// returns an error wrapping ErrMalformed when an event or the shard id exceeds an ABI limit; dst
// is then unspecified.
func AppendBatch(dst []byte, shardID string, events []Event) ([]byte, error) {
	return AppendIndexedBatch(dst, shardID, events, 0)
}

// AppendIndexedBatch appends the encoding of a batch whose events carry a field index of fields
// fields (ABI.md §2.1; 0 to MaxIndexedFields, 0 meaning no index, as AppendBatch): each event's
// Index is nil (not indexed) or fields entries (fields*FieldEntryLen bytes) whose values lie
// within its data. Errors wrap ErrMalformed; dst is then unspecified. The host encodes the
// batches a guest gets; the SDK's tests use this one.
func AppendIndexedBatch(dst []byte, shardID string, events []Event, fields int) ([]byte, error) {
	if len(shardID) > MaxShardIDLen {
		return dst, fmt.Errorf("%w: shard id of %d bytes exceeds %d", ErrMalformed, len(shardID), MaxShardIDLen)
	}
	if fields < 0 || fields > MaxIndexedFields {
		return dst, fmt.Errorf("%w: %d indexed fields, want 0 to %d", ErrMalformed, fields, MaxIndexedFields)
	}
	var flags uint32
	if fields > 0 {
		flags |= FlagFieldIndex
	}
	dst = binary.LittleEndian.AppendUint32(dst, Version)
	dst = binary.LittleEndian.AppendUint32(dst, flags)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(events)))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(shardID)))
	dst = append(dst, shardID...)
	if fields > 0 {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(fields))
	}
	for i := range events {
		e := &events[i]
		if err := CheckEvent(e); err != nil {
			return dst, fmt.Errorf("event %d: %w", i, err)
		}
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(e.Seq)))
		dst = append(dst, e.Seq...)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(e.PartitionKey)))
		dst = append(dst, e.PartitionKey...)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(e.ArrivalMs))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(e.Data)))
		dst = append(dst, e.Data...)
		if fields == 0 {
			continue
		}
		if e.Index == nil {
			dst = append(dst, 0)
			continue
		}
		if err := checkIndex(e.Index, fields, len(e.Data)); err != nil {
			return dst, fmt.Errorf("event %d: %w", i, err)
		}
		dst = append(dst, 1)
		dst = append(dst, e.Index...)
	}
	return dst, nil
}

// checkIndex returns an error wrapping ErrMalformed unless index is fields entries whose values
// lie within data of n bytes.
func checkIndex(index []byte, fields, n int) error {
	if len(index) != fields*FieldEntryLen {
		return fmt.Errorf("%w: field index of %d bytes, want %d fields of %d", ErrMalformed, len(index), fields, FieldEntryLen)
	}
	for f := 0; f < fields; f++ {
		e := index[f*FieldEntryLen:]
		off, l := binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
		if off == FieldAbsent {
			if l != 0 {
				return fmt.Errorf("%w: field index entry %d: an absent field with length %d", ErrMalformed, f, l)
			}
			continue
		}
		if l&^fieldEscaped == 0 || uint64(off)+uint64(l&^fieldEscaped) > uint64(n) {
			return fmt.Errorf("%w: field index entry %d: value %d+%d outside the %d bytes of data", ErrMalformed, f, off, l&^fieldEscaped, n)
		}
	}
	return nil
}

// BatchReader iterates over an encoded batch without allocating:
//
//	r, err := abi.NewBatchReader(buf)
//	for r.Next(&ev) { ... }
//	if err := r.Err(); err != nil { ... }
type BatchReader struct {
	buf     []byte
	off     int
	left    uint32
	count   uint32
	fields  int // indexed fields (ABI.md §2.1); 0: no index
	shardID []byte
	err     error
}

// NewBatchReader validates the batch header of buf. Errors wrap ErrMalformed.
func NewBatchReader(buf []byte) (BatchReader, error) {
	var r BatchReader
	if len(buf) < batchHeaderLen {
		return r, fmt.Errorf("%w: batch of %d bytes is shorter than its %d-byte header", ErrMalformed, len(buf), batchHeaderLen)
	}
	if v := binary.LittleEndian.Uint32(buf); v != Version {
		return r, fmt.Errorf("%w: batch ABI version %d, want %d", ErrMalformed, v, Version)
	}
	r.count = binary.LittleEndian.Uint32(buf[8:])
	sl := int(binary.LittleEndian.Uint16(buf[12:]))
	if sl > MaxShardIDLen || batchHeaderLen+sl > len(buf) {
		return r, fmt.Errorf("%w: shard id length %d out of range", ErrMalformed, sl)
	}
	r.shardID = buf[batchHeaderLen : batchHeaderLen+sl]
	r.buf = buf
	r.off = batchHeaderLen + sl
	if binary.LittleEndian.Uint32(buf[4:])&FlagFieldIndex != 0 {
		if len(buf)-r.off < 2 {
			return BatchReader{}, fmt.Errorf("%w: field index count truncated", ErrMalformed)
		}
		r.fields = int(binary.LittleEndian.Uint16(buf[r.off:]))
		if r.fields == 0 || r.fields > MaxIndexedFields {
			return BatchReader{}, fmt.Errorf("%w: %d indexed fields, want 1 to %d", ErrMalformed, r.fields, MaxIndexedFields)
		}
		r.off += 2
	}
	r.left = r.count
	return r, nil
}

// ShardID returns the batch's shard id (aliases the buffer).
func (r *BatchReader) ShardID() []byte { return r.shardID }

// Len returns the number of events the header declares.
func (r *BatchReader) Len() int { return int(r.count) }

// Fields returns the number of fields the batch's field index covers (ABI.md §2.1): slots 0 to
// Fields()-1; 0 when the batch has no index.
func (r *BatchReader) Fields() int { return r.fields }

// Next decodes the next event into e and reports whether there was one. After it returns false,
// Err reports whether the batch ended cleanly.
func (r *BatchReader) Next(e *Event) bool {
	if r.err != nil {
		return false
	}
	if r.left == 0 {
		if r.off != len(r.buf) {
			r.err = fmt.Errorf("%w: %d trailing bytes after the last event", ErrMalformed, len(r.buf)-r.off)
		}
		return false
	}
	var ok bool
	if e.Seq, ok = r.str16(MaxSeqLen); !ok || len(e.Seq) == 0 {
		return r.fail("sequence number")
	}
	if e.PartitionKey, ok = r.str16(MaxKeyLen); !ok {
		return r.fail("partition key")
	}
	if len(r.buf)-r.off < 12 {
		return r.fail("arrival time")
	}
	e.ArrivalMs = int64(binary.LittleEndian.Uint64(r.buf[r.off:]))
	dl := binary.LittleEndian.Uint32(r.buf[r.off+8:])
	r.off += 12
	if dl > MaxDataLen || int(dl) > len(r.buf)-r.off {
		return r.fail("data")
	}
	e.Data = r.buf[r.off : r.off+int(dl)]
	r.off += int(dl)
	e.Index = nil
	if r.fields != 0 && !r.readIndex(e) {
		return false
	}
	r.left--
	return true
}

// readIndex reads the field index of e, whose data ends at r.off (ABI.md §2.1), checking it as
// checkIndex does; outside Next, which stays small.
func (r *BatchReader) readIndex(e *Event) bool {
	if r.off >= len(r.buf) || r.buf[r.off] > 1 {
		return r.fail("field index flag")
	}
	r.off++
	if r.buf[r.off-1] == 0 {
		return true
	}
	n := r.fields * FieldEntryLen
	if len(r.buf)-r.off < n {
		return r.fail("field index")
	}
	e.Index = r.buf[r.off : r.off+n]
	if err := checkIndex(e.Index, r.fields, len(e.Data)); err != nil {
		r.err = fmt.Errorf("event %d: %w", r.count-r.left, err)
		return false
	}
	r.off += n
	return true
}

// Err returns the first decoding error, wrapping ErrMalformed, or nil.
func (r *BatchReader) Err() error { return r.err }

func (r *BatchReader) fail(field string) bool {
	r.err = fmt.Errorf("%w: event %d: %s truncated or too long", ErrMalformed, r.count-r.left, field)
	return false
}

// str16 reads a length-prefixed string; small enough to be inlined into Next.
func (r *BatchReader) str16(max int) ([]byte, bool) {
	off := r.off + 2
	if off > len(r.buf) {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint16(r.buf[off-2:]))
	if n > max || n > len(r.buf)-off {
		return nil, false
	}
	r.off = off + n
	return r.buf[off:r.off], true
}

// OutputWriter appends mutations to an output buffer (ABI.md §4). The zero value is not ready:
// call Reset first. It is not safe for concurrent use.
type OutputWriter struct {
	Buf   []byte
	count uint32
}

// Reset empties the writer, keeping its buffer's capacity.
func (w *OutputWriter) Reset() {
	w.Buf = append(w.Buf[:0], 0, 0, 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(w.Buf, Version)
	w.count = 0
}

// Put appends a put of doc (a JSON object) at collection/key. Limits are checked by the host.
func (w *OutputWriter) Put(collection, key string, doc []byte) {
	// Room for the whole mutation at once, then written in place: fewer calls and branches
	// than an append per part, which WebAssembly makes expensive.
	n, size := len(w.Buf), 1+2+len(collection)+2+len(key)+4+len(doc)
	w.Buf = slices.Grow(w.Buf, size)[:n+size]
	m := w.Buf[n:]
	m[0] = OpPut
	binary.LittleEndian.PutUint16(m[1:], uint16(len(collection)))
	p := 3 + copy(m[3:], collection)
	binary.LittleEndian.PutUint16(m[p:], uint16(len(key)))
	p += 2
	p += copy(m[p:], key)
	binary.LittleEndian.PutUint32(m[p:], uint32(len(doc)))
	copy(m[p+4:], doc)
	w.count++
	binary.LittleEndian.PutUint32(w.Buf[4:], w.count)
}

// Delete appends a delete of collection/key.
func (w *OutputWriter) Delete(collection, key string) {
	w.Buf = append(w.Buf, OpDelete)
	w.Buf = binary.LittleEndian.AppendUint16(w.Buf, uint16(len(collection)))
	w.Buf = append(w.Buf, collection...)
	w.Buf = binary.LittleEndian.AppendUint16(w.Buf, uint16(len(key)))
	w.Buf = append(w.Buf, key...)
	w.Buf = binary.LittleEndian.AppendUint32(w.Buf, 0)
	w.count++
	binary.LittleEndian.PutUint32(w.Buf[4:], w.count)
}

// Count returns the number of mutations written since Reset.
func (w *OutputWriter) Count() int { return int(w.count) }

// ValidCollection reports whether c is a legal collection name: 1..255 bytes of [A-Za-z0-9_.-].
func ValidCollection[T string | []byte](c T) bool {
	if len(c) == 0 || len(c) > MaxCollectionLen {
		return false
	}
	for i := 0; i < len(c); i++ {
		b := c[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '.' || b == '-') {
			return false
		}
	}
	return true
}

// ValidDocKey reports whether k is a legal document key: 1..1024 bytes of valid UTF-8, no NUL.
func ValidDocKey(k []byte) bool {
	if len(k) == 0 || len(k) > MaxDocKeyLen {
		return false
	}
	for _, c := range k { // ASCII without NUL, the usual key: one pass, no calls
		if c-1 >= utf8.RuneSelf-1 { // NUL or not ASCII
			return bytes.IndexByte(k, 0) < 0 && utf8.Valid(k)
		}
	}
	return true
}

// DecodeOutput decodes and validates a guest's output (ABI.md §4), calling visit for each
// mutation in order. Slices passed to visit alias buf. An empty buf is a valid empty output.
// Structural errors wrap ErrMalformed; checking that documents are JSON objects is left to
// validDoc (nil skips the check), whose error is wrapped as well.
func DecodeOutput(buf []byte, validDoc func([]byte) error, visit func(m Mutation) error) error {
	if len(buf) == 0 {
		return nil
	}
	if len(buf) < 8 {
		return fmt.Errorf("%w: output of %d bytes is shorter than its 8-byte header", ErrMalformed, len(buf))
	}
	if v := binary.LittleEndian.Uint32(buf); v != Version {
		return fmt.Errorf("%w: output ABI version %d, want %d", ErrMalformed, v, Version)
	}
	n := binary.LittleEndian.Uint32(buf[4:])
	if len(buf) > MaxOutputBytes {
		return fmt.Errorf("%w: output of %d bytes exceeds the limit of %d bytes per handler call", ErrMalformed, len(buf), MaxOutputBytes)
	}
	if n > MaxOutputMutations {
		return fmt.Errorf("%w: output of %d mutations exceeds the limit of %d per handler call", ErrMalformed, n, MaxOutputMutations)
	}
	off := 8
	for i := uint32(0); i < n; i++ {
		var m Mutation
		if off >= len(buf) {
			return fmt.Errorf("%w: mutation %d of %d: output truncated", ErrMalformed, i, n)
		}
		m.Op = buf[off]
		off++
		if m.Op != OpPut && m.Op != OpDelete {
			return fmt.Errorf("%w: mutation %d: unknown op %d (want 1 put or 2 delete)", ErrMalformed, i, m.Op)
		}
		var ok bool
		if m.Collection, off, ok = str16(buf, off); !ok || !ValidCollection(m.Collection) {
			return fmt.Errorf("%w: mutation %d: collection name missing, too long or not [A-Za-z0-9_.-]{1,255}", ErrMalformed, i)
		}
		if m.Key, off, ok = str16(buf, off); !ok || !ValidDocKey(m.Key) {
			return fmt.Errorf("%w: mutation %d: key missing, longer than %d bytes, containing NUL or not valid UTF-8", ErrMalformed, i, MaxDocKeyLen)
		}
		if len(buf)-off < 4 {
			return fmt.Errorf("%w: mutation %d: document length truncated", ErrMalformed, i)
		}
		dl := binary.LittleEndian.Uint32(buf[off:])
		off += 4
		if dl > MaxDocLen || int(dl) > len(buf)-off {
			return fmt.Errorf("%w: mutation %d: document of %d bytes truncated or over %d", ErrMalformed, i, dl, MaxDocLen)
		}
		if m.Op == OpDelete {
			if dl != 0 {
				return fmt.Errorf("%w: mutation %d: delete carries a %d-byte document", ErrMalformed, i, dl)
			}
		} else {
			m.Doc = buf[off : off+int(dl)]
			off += int(dl)
			if validDoc != nil {
				if err := validDoc(m.Doc); err != nil {
					return fmt.Errorf("%w: mutation %d (%s/%s): %w", ErrMalformed, i, m.Collection, m.Key, err)
				}
			}
		}
		if err := visit(m); err != nil {
			return err
		}
	}
	if off != len(buf) {
		return fmt.Errorf("%w: %d trailing bytes after %d mutations", ErrMalformed, len(buf)-off, n)
	}
	return nil
}

func str16(buf []byte, off int) ([]byte, int, bool) {
	if len(buf)-off < 2 {
		return nil, off, false
	}
	n := int(binary.LittleEndian.Uint16(buf[off:]))
	off += 2
	if n > len(buf)-off {
		return nil, off, false
	}
	return buf[off : off+n], off + n, true
}
