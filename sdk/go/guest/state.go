package guest

import (
	"fmt"
	"unsafe"

	"github.com/projhost/projhost/sdk/go/internal/abi"
)

// pageLen is the number of values in one page of a State's storage. Pages never move, so a
// value's pointer stays valid for the whole batch however many documents the batch touches.
const pageLen = 128

// State holds the documents of one collection as typed Go values for the duration of a batch:
//
//   - Get decodes a document at its first touch in the batch (the batch's Read: the read model,
//     or the batch's own earlier Put) and returns a pointer to its value; later Gets of the
//     same key in the batch return the same pointer, and plain Go code changes the value;
//   - when the handler returns nil, every value is encoded once and written (as Put would), in
//     the order the batch first touched the documents (with Read, Put, Delete or any State);
//     when it returns an error, nothing is written.
//
// Values are kept in pages reused from batch to batch, keys in the batch's key arena, and the
// encoded documents in the batch's per-document buffers: once the batches stop growing, Get
// allocates nothing (decode and encode allocate only if they do).
//
// Declare one State per collection, usually as a package variable next to the handler, and use
// it from that handler only: a State is not safe for concurrent use (the host never calls an
// instance concurrently; natively, run one Native at a time with it). Two States of one
// collection must not Get the same key in one batch (the batch fails), and a key a State holds
// should not also be written with Batch.Put or Batch.Delete in that batch (the State's value is
// written last and wins).
type State[T any] struct {
	coll   string
	decode func(v *T, doc []byte) error
	encode func(v *T, dst []byte) []byte

	gen     uint64        // the batch whose values the State holds
	ci      int32         // the collection's index in that batch's colls
	id      int32         // 1 + the State's index in that batch's states
	n       int32         // values in use
	pages   []*[pageLen]T // never moved: pointers into them stay valid
	entries []int32       // per value: its entries index in the batch
	scratch T             // returned by Get when the key is invalid
}

// NewState returns a State of the documents of collection (1..255 bytes of [A-Za-z0-9_.-]; an
// invalid name fails every batch that uses the State).
//
// decode fills v, a zero T, from a stored JSON document (e.g. with JSONInt or JSONFields); an
// error fails the batch with a message naming the document. encode appends v's document, one
// JSON object of at most 256 KiB, to dst and returns the extended slice (e.g. with NewObject);
// anything else fails the batch. Both may be method expressions such as (*Total).Decode. They
// are called once per document and batch: decode at the first Get of a stored document, encode
// when the handler returns.
func NewState[T any](collection string, decode func(v *T, doc []byte) error, encode func(v *T, dst []byte) []byte) *State[T] {
	return &State[T]{coll: collection, decode: decode, encode: encode}
}

// Collection returns the collection the State holds.
func (s *State[T]) Collection() string { return s.coll }

// Get returns the value of the document key for this batch, and found: whether the document
// exists, i.e. it is stored in the read model or this batch created it at an earlier Get (so
// found is false only at the Get that creates a document; the value is then a zero T, to be
// initialised by the caller). key is 1..1024 bytes of UTF-8 without NUL; it is copied, so the
// caller may reuse its buffer at once (compose keys such as origin+"-"+dest in one reused
// []byte with append).
//
// The pointer stays valid, and keeps pointing at key's value, until the handler returns. When
// key or the collection name is invalid, Get returns a scratch value that is never written (and
// found false); when the stored document does not decode, the value holds what decode left. In
// both cases the batch fails when the handler returns, and Batch.Err reports it at once.
func (s *State[T]) Get(b *Batch, key []byte) (v *T, found bool) {
	if s.gen != b.gen && !s.begin(b) {
		return s.discard()
	}
	i, h := b.find(s.ci, key)
	if i >= 0 {
		if e := &b.entries[i]; e.owner == s.id {
			return s.value(e.slot), true
		}
	} else if i = b.load(s.ci, key, h); i < 0 {
		return s.discard()
	}
	return s.take(b, i)
}

// GetString is Get with a string key.
func (s *State[T]) GetString(b *Batch, key string) (v *T, found bool) {
	return s.Get(b, unsafe.Slice(unsafe.StringData(key), len(key))) // read only: Get copies the key
}

func (s *State[T]) discard() (*T, bool) {
	var zero T
	s.scratch = zero
	return &s.scratch, false
}

// begin makes s hold values of b's current batch.
func (s *State[T]) begin(b *Batch) bool {
	ci := b.collIndex(s.coll)
	if ci < 0 {
		return false
	}
	s.gen, s.ci, s.n = b.gen, ci, 0
	s.entries = s.entries[:0]
	b.states = append(b.states, s)
	s.id = int32(len(b.states))
	return true
}

func (s *State[T]) value(slot int32) *T { return &s.pages[slot/pageLen][slot%pageLen] }

// take gives entry i (not held by s) a value, decoded from its document if it has one.
func (s *State[T]) take(b *Batch, i int32) (*T, bool) {
	e := &b.entries[i]
	if e.owner != 0 {
		b.setErr(fmt.Errorf("guest: %s/%s is held by two States in one batch", s.coll, e.key))
		return s.discard()
	}
	slot := s.n
	if int(slot/pageLen) == len(s.pages) {
		s.pages = append(s.pages, new([pageLen]T))
	}
	s.n++
	s.entries = append(s.entries, i)
	e.owner, e.slot = s.id, slot
	v := s.value(slot)
	var zero T
	*v = zero
	found := e.state == statePresent
	if found {
		if err := s.decode(v, e.doc); err != nil {
			b.setErr(fmt.Errorf("guest: stored document %s/%s does not decode: %w (document: %.200s)", s.coll, e.key, err, e.doc))
		}
	}
	return v, found
}

// flush encodes every value into its entry's document.
func (s *State[T]) flush(b *Batch) {
	for slot, i := range s.entries {
		e := &b.entries[i]
		e.doc = s.encode(s.value(int32(slot)), e.doc[:0])
		e.state, e.dirty = statePresent, true
		if len(e.doc) > abi.MaxDocLen {
			b.setErr(fmt.Errorf("guest: %s/%s: encoded document of %d bytes exceeds %d", s.coll, e.key, len(e.doc), abi.MaxDocLen))
		} else if len(e.doc) < 2 || e.doc[0] != '{' || e.doc[len(e.doc)-1] != '}' {
			b.setErr(fmt.Errorf("guest: %s/%s: encoded document is not a JSON object (want {...}): %.200s", s.coll, e.key, e.doc))
		}
	}
}
