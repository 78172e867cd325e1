package guest

import (
	"fmt"
	"unsafe"

	"github.com/projhost/projhost/sdk/go/internal/abi"
)

// pageLen is the number of values in one page of a State's storage. Pages never move, so a
// value's pointer stays valid for the whole batch however many documents the batch touches.
const pageLen = 128

// StateKeepLimit is the number of documents a State keeps from one batch to the next (see
// State): when a batch begins with the State keeping that many, or a batch that succeeded held
// more, the State drops them all and fills up again from the batches that follow.
const StateKeepLimit = 16384

// State holds the documents of one collection as typed Go values:
//
//   - Get loads a document at its first touch in the batch (the batch's Read: the read model,
//     or the batch's own earlier Put) and returns a pointer to its value; later Gets of the
//     same key in the batch return the same pointer, and plain Go code changes the value;
//   - when the handler returns nil, every value is encoded once and written (as Put would), in
//     the order the batch first touched the documents (with Read, Put, Delete or any State);
//     when it returns an error, nothing is written.
//
// Between batches a State keeps each value it wrote, with a copy of the document it wrote for it
// (at most StateKeepLimit documents). At the next batch's first Get of such a key it asks the host
// with the read_known import (ABI.md §5.1) whether the stored document is still byte-for-byte the
// one it wrote: if so, Get returns the kept value as it is, without reading or decoding the
// document again; if anything else wrote the document since (another handler, a batch the host
// refused, a replay), the document is read and decoded as at a first touch, and when it is gone
// Get returns a zero value and found false. A batch that fails in any way (the handler's error,
// a misuse Batch.Err reports, a document that does not decode or encode, a batch that never
// returned, such as a panic) makes every State it used drop all it keeps, as does using the State
// with another Native than the one it kept values from. Kept values live as long as the
// WebAssembly instance (natively, as long as the State and its Native are used).
//
// Keeping relies on a contract between decode and encode: decoding the document that encode wrote
// for a value must give that value back, field by field. A field encode does not write (a cache,
// a counter of the current batch) is not reset between batches for a kept value: it keeps what
// the last batch left in it. Values the encoder cannot write break the contract too: Object.Float
// writes NaN and ±Inf as null, so a kept value keeps its NaN where a decoded one would not. Call
// DecodeEveryBatch on a State whose type does not meet the contract; its values are then zeroed
// and decoded at their first Get in every batch.
//
// Values are kept in pages that never move, keys in arenas, and the encoded documents in the
// batch's per-document buffers and the State's kept copies, all reused from batch to batch: once
// the batches stop growing and touch known keys, Get allocates nothing (decode and encode
// allocate only if they do).
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
	every  bool // DecodeEveryBatch: keep nothing between batches

	gen     uint64        // the batch whose values the State holds
	ci      int32         // the collection's index in that batch's colls
	id      int32         // 1 + the State's index in that batch's states
	pages   []*[pageLen]T // values by slot, never moved: pointers into them stay valid
	held    []int32       // the entries indexes of the batch's values, in the order of their first Get
	scratch T             // returned by Get when the key is invalid

	// Slots, kept across the batches of one Batch: slot i holds keys[i]'s value in pages.
	batch   *Batch  // the Batch whose batches the slots belong to
	pending bool    // a batch began with the State and has not finished
	keys    []kept  // per slot; cap beyond len: doc buffers to reuse
	table   []int32 // open addressing over keys: slot + 1, 0 empty; at most half full
	arena   []byte  // backing bytes of the keys
}

// kept is a key a State has a value slot for.
type kept struct {
	key  string // aliases State.arena
	hash uint32 // hashKey of the key in the collection's index of the State's Batch
	ok   bool   // the slot's value is what decode gives for doc, the document the host had
	doc  []byte // the document the value was last written as (or decoded from), when ok
}

// NewState returns a State of the documents of collection (1..255 bytes of [A-Za-z0-9_.-]; an
// invalid name fails every batch that uses the State).
//
// decode fills v, a zero T, from a stored JSON document (e.g. with JSONInt or JSONFields); an
// error fails the batch with a message naming the document. encode appends v's document, one
// JSON object of at most 256 KiB, to dst and returns the extended slice (e.g. with NewObject);
// anything else fails the batch. decode(encode(v)) must give v back (see State; otherwise use
// DecodeEveryBatch). Both may be method expressions such as (*Total).Decode. encode is called
// once per document and batch, when the handler returns; decode at the first Get of a stored
// document in a batch, unless the State kept the document from the batch before.
func NewState[T any](collection string, decode func(v *T, doc []byte) error, encode func(v *T, dst []byte) []byte) *State[T] {
	return &State[T]{coll: collection, decode: decode, encode: encode}
}

// DecodeEveryBatch makes s keep nothing between batches (it drops what it keeps when the batch
// that uses it next begins): every batch then reads each document it touches and decodes it
// into a zero T, for a type whose decode and encode do not meet State's contract. It returns s,
// so it can follow NewState:
//
//	var totals = guest.NewState("totals", decodeTotal, appendTotal).DecodeEveryBatch()
func (s *State[T]) DecodeEveryBatch() *State[T] {
	s.every = true
	return s
}

// Collection returns the collection the State holds.
func (s *State[T]) Collection() string { return s.coll }

// Get returns the value of the document key for this batch, and found: whether the document
// exists, i.e. it is stored in the read model or this batch created it at an earlier Get (so
// found is false only at the Get that creates a document; the value is then a zero T, to be
// initialised by the caller). A document the State kept from the batch before and nothing else
// wrote since is neither read nor decoded: its value is the kept one (see State). key is 1..1024
// bytes of UTF-8 without NUL; it is copied, so the caller may reuse its buffer at once (compose
// keys such as origin+"-"+dest in one reused []byte with append).
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
	}
	slot := s.lookup(key, h)
	var known []byte
	if slot >= 0 && s.keys[slot].ok {
		known = s.keys[slot].doc
	}
	unchanged := false
	if i >= 0 { // the batch read or wrote it before: compare what it has
		e := &b.entries[i]
		unchanged = known != nil && e.state == statePresent && bytesString(e.doc) == bytesString(known)
	} else {
		// A key with a slot was checked when the slot was made.
		if slot < 0 && !b.checkKey(s.ci, key) {
			return s.discard()
		}
		i, unchanged = b.loadKnown(s.ci, key, h, known)
	}
	return s.take(b, i, slot, unchanged)
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

// begin makes s hold values of b's current batch, dropping what it keeps unless it kept it from
// the last batch of b, which succeeded.
func (s *State[T]) begin(b *Batch) bool {
	ci := b.collIndex(s.coll)
	if ci < 0 {
		return false
	}
	if s.every || s.pending || s.batch != b || len(s.keys) >= StateKeepLimit {
		s.drop()
	}
	s.batch, s.pending = b, true
	s.gen, s.ci = b.gen, ci
	s.held = s.held[:0]
	b.states = append(b.states, s)
	s.id = int32(len(b.states))
	return true
}

// drop forgets every slot (keeping the buffers for reuse).
func (s *State[T]) drop() {
	clear(s.table)
	s.keys = s.keys[:0]
	s.arena = s.arena[:0]
}

func (s *State[T]) value(slot int32) *T { return &s.pages[slot/pageLen][slot%pageLen] }

// lookup returns the slot of key, whose hash is h, or -1 when it has none.
func (s *State[T]) lookup(key []byte, h uint32) int32 {
	if s.every || len(s.table) == 0 {
		return -1
	}
	mask := uint32(len(s.table) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		t := s.table[p]
		if t == 0 {
			return -1
		}
		if k := &s.keys[t-1]; k.hash == h && k.key == bytesString(key) {
			return t - 1
		}
	}
}

// newSlot gives key (valid, with hash h, not in s) a slot: in the table unless s keeps nothing.
func (s *State[T]) newSlot(key string, h uint32) int32 {
	slot := int32(len(s.keys))
	if int(slot/pageLen) == len(s.pages) {
		s.pages = append(s.pages, new([pageLen]T))
	}
	if len(s.keys) < cap(s.keys) {
		s.keys = s.keys[:slot+1] // reuse the doc buffer of a dropped slot
	} else {
		s.keys = append(s.keys, kept{})
	}
	k := &s.keys[slot]
	k.ok, k.doc = false, k.doc[:0]
	if s.every {
		return slot
	}
	start := len(s.arena)
	s.arena = append(s.arena, key...) // strings in the table keep an old array alive
	k.key, k.hash = unsafe.String(unsafe.SliceData(s.arena[start:]), len(key)), h
	if 2*len(s.keys) > len(s.table) {
		s.table = make([]int32, max(minIndexSlots, 2*len(s.table)))
		for i := range s.keys {
			s.put(int32(i))
		}
	} else {
		s.put(slot)
	}
	return slot
}

func (s *State[T]) put(slot int32) {
	mask := uint32(len(s.table) - 1)
	p := s.keys[slot].hash & mask
	for s.table[p] != 0 {
		p = (p + 1) & mask
	}
	s.table[p] = slot + 1
}

// take gives entry i (not held by s) a value: slot's (-1: a new slot), kept as it is when
// unchanged, else decoded from the entry's document if it has one.
func (s *State[T]) take(b *Batch, i, slot int32, unchanged bool) (*T, bool) {
	e := &b.entries[i]
	if e.owner != 0 {
		b.setErr(fmt.Errorf("guest: %s/%s is held by two States in one batch", s.coll, e.key))
		return s.discard()
	}
	if slot < 0 {
		slot = s.newSlot(e.key, e.hash)
	}
	s.keys[slot].ok = false // the batch changes it; done keeps it again
	s.held = append(s.held, i)
	e.owner, e.slot = s.id, slot
	v := s.value(slot)
	if unchanged {
		return v, true
	}
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
	for _, i := range s.held {
		e := &b.entries[i]
		e.doc = s.encode(s.value(e.slot), e.doc[:0])
		e.state, e.dirty = statePresent, true
		if len(e.doc) > abi.MaxDocLen {
			b.setErr(fmt.Errorf("guest: %s/%s: encoded document of %d bytes exceeds %d", s.coll, e.key, len(e.doc), abi.MaxDocLen))
		} else if len(e.doc) < 2 || e.doc[0] != '{' || e.doc[len(e.doc)-1] != '}' {
			b.setErr(fmt.Errorf("guest: %s/%s: encoded document is not a JSON object (want {...}): %.200s", s.coll, e.key, e.doc))
		}
	}
}

// done ends s's part in b's batch: when it succeeded (the entries hold the documents written),
// s keeps each value with a copy of its document; otherwise it drops everything.
func (s *State[T]) done(b *Batch, ok bool) {
	s.pending = false
	if !ok || s.every || len(s.keys) > StateKeepLimit {
		s.drop()
		return
	}
	for _, i := range s.held {
		// The entry's document is not read again in this batch: the slot takes its buffer,
		// and the entry the slot's, to reuse.
		e := &b.entries[i]
		k := &s.keys[e.slot]
		k.doc, e.doc = e.doc, k.doc[:0]
		k.ok = true
	}
}
