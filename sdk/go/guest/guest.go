// Package guest is the Go SDK for projhost projection handlers compiled to WebAssembly
// (ABI v1, wasmabi/ABI.md in the projhost repository). It is its own module,
// github.com/projhost/projhost/sdk/go, with no dependency outside the standard library, so a
// handler's go.mod pulls in nothing of the host.
//
// A handler is a package main that registers one function and is built as a WASI reactor:
//
//	package main
//
//	import (
//		"errors"
//		"fmt"
//
//		"github.com/projhost/projhost/sdk/go/guest"
//	)
//
//	// Total is the document totals/<partition key>: {"n":N}.
//	type Total struct{ N int64 }
//
//	func (t *Total) Decode(doc []byte) error {
//		var ok bool
//		if t.N, ok = guest.JSONInt(doc, "n"); !ok {
//			return errors.New(`no integer "n"`)
//		}
//		return nil
//	}
//
//	func (t *Total) Append(dst []byte) []byte {
//		o := guest.NewObject(dst)
//		o.Int("n", t.N)
//		return o.Bytes()
//	}
//
//	var totals = guest.NewState("totals", (*Total).Decode, (*Total).Append)
//
//	func init() {
//		guest.Handle(func(b *guest.Batch) error {
//			for b.Next() {
//				ev := b.Event()
//				amount, ok := guest.JSONInt(ev.Data, "amount")
//				if !ok {
//					return fmt.Errorf("event seq %s: no integer amount", ev.Seq)
//				}
//				t, _ := totals.Get(b, ev.PartitionKey)
//				t.N += amount
//			}
//			return nil
//		})
//	}
//
//	func main() {}
//
// built with either toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o handler.wasm .
//	tinygo build -target=wasip1 -buildmode=c-shared -no-debug -scheduler=none -opt=2 -o handler.wasm .
//
// The package implements the ABI exports (projhost_abi_v1, projhost_alloc, projhost_handle) and
// calls the host imports (projhost.log, projhost.fail, projhost.read, projhost.read_known,
// projhost.field) when built for wasip1, so its modules need a host that has the field and
// read_known imports (ABI.md §7). Built for any other target it compiles against an in-process
// fake host (Native) so the same handler code can be unit-tested and benchmarked natively.
//
// # The field index
//
// A JSONFields that scans event data registers its keys with the host's field import during the
// first batch that scans with it; from the next batch on the host finds those fields in every
// event's data while it encodes the batch (ABI.md §2.1), and JSONFields.Scan of an event's data
// reads where the index points instead of scanning the JSON text. The answers are the same
// either way; handlers do nothing for it.
//
// # Two ways to keep documents
//
// State (see NewState) is the way to write a handler that aggregates: each document a batch
// touches is read and decoded into a Go value once, at its first State.Get in the batch, changed
// by plain Go code on every event, and encoded and written once when the handler returns, in the
// order the batch first touched the documents. Between batches a State keeps the values it wrote
// with their documents (at most StateKeepLimit): a later batch reuses a kept value without
// reading or decoding the document when the host's read_known import finds it unchanged
// (ABI.md §5.1), and a failed batch drops them all. Storage is reused from batch to batch, so a
// handler written this way allocates nothing per event once its batches stop growing.
//
// Batch.Read, Batch.Put and Batch.Delete work on JSON bytes, one call per document access.
// Put and Delete go into a per-batch cache keyed by collection/key; only the final value of each
// key is emitted, in the order keys were first touched. Read consults the cache first
// (read-your-writes, ABI.md §5) and asks the host only for keys the batch has not seen yet.
//
// # Failures
//
// A handler returning a non-nil error fails the batch through the host's fail import (ABI.md
// §6): the host discards the batch's output and keeps the instance. Misuse (an invalid
// collection name or key, a document that is not a JSON object or is too large, a stored
// document a State cannot decode) is recorded and fails the batch when the handler returns;
// Batch.Err reports it earlier. A panic is not recovered: in WebAssembly it exits the instance,
// which the host then discards.
//
// The handler is never called concurrently (one instance per shard); nothing in this package is
// safe for concurrent use.
package guest

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/projhost/projhost/sdk/go/internal/abi"
)

// Event is one stream record: Seq (the decimal sequence number), PartitionKey, ArrivalMs (the
// approximate arrival time in ms since the Unix epoch, 0 when unknown), Data (the record's
// payload, for the examples a JSON object) and Index (the host's field index of Data, ABI.md
// §2.1, which JSONFields reads: nil when the host did not index the data; Native.Run does not
// encode it). When a Batch hands it out, its byte slices alias the batch buffer and are valid only
// until the handler returns; copy what must outlive the batch.
type Event = abi.Event

// Mutation is one read-model write of a handler's output, as Native.Run returns it: Op (OpPut
// or OpDelete), Collection, Key and, for OpPut, Doc.
type Mutation = abi.Mutation

// Mutation ops.
const (
	OpPut    = abi.OpPut
	OpDelete = abi.OpDelete
)

// ErrMalformed is wrapped by the errors about encodings that break ABI v1: events over a limit
// given to Native.Run, a malformed batch given to Native.Handle, malformed output.
var ErrMalformed = abi.ErrMalformed

// Handler processes one batch. A non-nil error fails the whole batch (none of its Puts and
// Deletes are applied); its message is passed to the host, at most 4096 bytes of it.
type Handler func(b *Batch) error

// Level is a log level of Batch.Log.
type Level int32

// Log levels (ABI.md §1, the log import).
const (
	LevelDebug Level = abi.LevelDebug
	LevelInfo  Level = abi.LevelInfo
	LevelWarn  Level = abi.LevelWarn
	LevelError Level = abi.LevelError
)

// host is what a batch needs from its host: the ABI imports but fail.
type host interface {
	log(level Level, msg string)
	// read implements the read import: it returns -1 when there is no document, else the
	// document's length n, written into buf only when n <= len(buf).
	read(collection string, key []byte, buf []byte) int32
	// readKnown implements the read_known import (ABI.md §5.1): read, except that it returns
	// abi.ReadUnchanged, writing nothing, when the document is byte-for-byte known.
	readKnown(collection string, key, known, buf []byte) int32
	// field implements the field import: it registers name for the field index of the batches
	// after this one and returns its slot, or -1 when the host refused it.
	field(name string) int32
}

// initialReadBuf is the first size in bytes of the buffer passed to the read import; it grows to
// the largest document read.
const initialReadBuf = 4096

// entry states.
const (
	stateAbsent  = iota // known not to exist (read -1, or deleted)
	statePresent        // doc holds the document
)

// entry is one document the batch touched.
type entry struct {
	key   string // aliases Batch.arena
	coll  int32  // index in Batch.colls
	hash  uint32 // hashKey(coll, key)
	pos   int32  // its slot in Batch.index
	owner int32  // 1 + index in Batch.states of the State holding it; 0: none
	slot  int32  // the owner's value slot
	state uint8
	dirty bool // written by this batch (Put or Delete, or held by a State)
	doc   []byte
}

// maxScanColls is the number of collections looked up by scanning Batch.colls; beyond, a map.
const maxScanColls = 8

// batchGen numbers the batches of every Batch of the process, so that a State can tell a new
// batch from the one it holds values of.
var batchGen atomic.Uint64 // Natives may run batches at once

// Batch is one call's worth of events and the handler's view of the read model. It is valid only
// during the Handler call that received it.
type Batch struct {
	r   abi.BatchReader
	ev  Event
	h   host
	err error // first misuse; fails the batch
	gen uint64

	// regGen numbers the hosts' field registrations: a JSONFields registered for another
	// regGen registers again (ABI.md §2.1: registrations belong to an instance). fieldNames
	// are the names asked of this regGen's host, fieldSlots its answers.
	regGen     uint64
	fieldNames []string
	fieldSlots []int8

	colls    []string // every collection name seen by this Batch, kept across batches
	collIdx  map[string]int32
	lastColl int32
	index    keyIndex // (collection, key) -> entries index, for this batch
	last     int32    // entries index of the last lookup, -1: none

	entries []entry
	arena   []byte       // backing bytes of entry keys for this batch
	readBuf []byte       // scratch for the read import, grown on demand
	states  []batchState // States holding values of this batch, in the order of their first Get
	out     abi.OutputWriter
}

// batchState is a State seen by the batch: flush writes its values into their entries when the
// handler returned nil; done tells it, once per batch, whether the batch succeeded (ok: its
// output is the entries' documents) or failed.
type batchState interface {
	flush(b *Batch)
	done(b *Batch, ok bool)
}

// ShardID returns the shard all events of the batch came from (aliases the batch buffer).
func (b *Batch) ShardID() []byte { return b.r.ShardID() }

// Len returns the number of events in the batch.
func (b *Batch) Len() int { return b.r.Len() }

// Next advances to the next event and reports whether there is one. A malformed batch stops the
// iteration early and fails the batch after the handler returns.
func (b *Batch) Next() bool { return b.r.Next(&b.ev) }

// Event returns the current event (after Next returned true). The pointer and the slices in it
// are reused by the next call to Next.
func (b *Batch) Event() *Event { return &b.ev }

// Log writes msg to the host log at level (messages over 4096 bytes are truncated by the host).
func (b *Batch) Log(level Level, msg string) { b.h.log(level, msg) }

// Err returns the first misuse recorded in this batch (an invalid collection name or key, a
// document that is not a JSON object or is too large, a stored document a State could not
// decode, a host read that returned an invalid length), or nil. Such a batch fails when the
// handler returns, whatever the handler returns; a handler may check Err to stop early.
func (b *Batch) Err() error { return b.err }

// Put sets the document of collection/key to doc, which must be one JSON object of at most
// 256 KiB. Collection names are 1..255 bytes of [A-Za-z0-9_.-]; keys 1..1024 bytes of UTF-8
// without NUL. doc and key are copied: the caller may reuse them at once. An invalid name, key or
// document fails the batch when the handler returns. A key a State holds in this batch is
// written with the State's value at the end of the batch: the State's value wins.
func (b *Batch) Put(collection string, key []byte, doc []byte) {
	e := b.entry(collection, key)
	if e == nil {
		return
	}
	if !b.checkDoc(collection, key, doc) {
		return
	}
	e.doc = append(e.doc[:0], doc...)
	e.state = statePresent
	e.dirty = true
}

// checkDoc reports whether doc is acceptable as a put document, recording the error if not.
func (b *Batch) checkDoc(collection string, key []byte, doc []byte) bool {
	if len(doc) > abi.MaxDocLen {
		b.setErr(fmt.Errorf("guest: Put %s/%s: document of %d bytes exceeds %d", collection, key, len(doc), abi.MaxDocLen))
		return false
	}
	if len(doc) < 2 || doc[0] != '{' || doc[len(doc)-1] != '}' {
		b.setErr(fmt.Errorf("guest: Put %s/%s: document is not a JSON object (want {...})", collection, key))
		return false
	}
	return true
}

// Delete removes the document of collection/key (a no-op for the read model when there is none).
func (b *Batch) Delete(collection string, key []byte) {
	e := b.entry(collection, key)
	if e == nil {
		return
	}
	e.doc = e.doc[:0]
	e.state = stateAbsent
	e.dirty = true
}

// Read returns the current document of collection/key and whether there is one: this batch's own
// latest Put or Delete of it if any, otherwise the host's read model (asked once per key and
// batch). The returned slice is valid until the next Put or Delete of the same key or the end of
// the batch; do not modify it. For a key a State holds, Read returns the document as it was
// before the State took it, not the State's value.
func (b *Batch) Read(collection string, key []byte) ([]byte, bool) {
	ci := b.collIndex(collection)
	if ci < 0 {
		return nil, false
	}
	i, h := b.find(ci, key)
	if i < 0 {
		if i = b.load(ci, key, h); i < 0 {
			return nil, false
		}
	}
	e := &b.entries[i]
	return e.doc, e.state == statePresent
}

func (b *Batch) setErr(err error) {
	if b.err == nil {
		b.err = err
	}
}

// collIndex returns the index of collection in b.colls, adding it; -1 when the name is invalid
// (the batch then fails).
func (b *Batch) collIndex(name string) int32 {
	if int(b.lastColl) < len(b.colls) && sameString(b.colls[b.lastColl], name) {
		return b.lastColl
	}
	ci := int32(-1)
	if b.collIdx != nil {
		if i, ok := b.collIdx[name]; ok {
			ci = i
		}
	} else {
		for i := range b.colls {
			if sameString(b.colls[i], name) {
				ci = int32(i)
				break
			}
		}
	}
	if ci < 0 {
		if !abi.ValidCollection(name) {
			b.setErr(fmt.Errorf("guest: invalid collection name %q: want 1..%d bytes of [A-Za-z0-9_.-]", name, abi.MaxCollectionLen))
			return -1
		}
		ci = int32(len(b.colls))
		b.colls = append(b.colls, name)
		if b.collIdx == nil && len(b.colls) > maxScanColls {
			b.collIdx = make(map[string]int32, len(b.colls))
			for i, c := range b.colls {
				b.collIdx[c] = int32(i)
			}
		} else if b.collIdx != nil {
			b.collIdx[name] = ci
		}
	}
	b.lastColl = ci
	return ci
}

// sameString reports a == b, comparing the data pointers first: collection names are usually
// the same constant on every call.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// bytesString returns b's bytes as a string without copying them, for comparisons and parsing
// that must not allocate: TinyGo copies string(b) even in a comparison, a heap allocation that
// feeds its GC on every call. The string must not be kept: it changes with b.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// find returns the entries index of key in collection ci, or -1 when the batch has not touched
// it, and the key's hash.
func (b *Batch) find(ci int32, key []byte) (int32, uint32) {
	if b.last >= 0 {
		if e := &b.entries[b.last]; e.coll == ci && e.key == bytesString(key) {
			return b.last, e.hash
		}
	}
	h := hashKey(ci, key)
	if len(b.index.slots) == 0 {
		return -1, h
	}
	mask := uint32(len(b.index.slots) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		s := b.index.slots[p]
		if s == 0 {
			return -1, h
		}
		if e := &b.entries[s-1]; e.hash == h && e.coll == ci && e.key == bytesString(key) {
			b.last = s - 1
			return s - 1, h
		}
	}
}

// entry returns the cache entry of collection/key, creating it (absent, clean) when there is
// none; nil when collection or key is invalid (the batch then fails).
func (b *Batch) entry(collection string, key []byte) *entry {
	ci := b.collIndex(collection)
	if ci < 0 {
		return nil
	}
	i, h := b.find(ci, key)
	if i < 0 {
		if !b.checkKey(ci, key) {
			return nil
		}
		i = b.add(ci, key, h)
	}
	return &b.entries[i]
}

func (b *Batch) checkKey(ci int32, key []byte) bool {
	if !abi.ValidDocKey(key) {
		b.setErr(fmt.Errorf("guest: collection %s: invalid key %q: want 1..%d bytes of UTF-8 without NUL", b.colls[ci], key, abi.MaxDocKeyLen))
		return false
	}
	return true
}

// load validates key, reads the document of collection ci / key from the host and returns the
// index of its new entry (clean); -1 when the key is invalid (the batch then fails). The key must
// not be in the batch yet.
func (b *Batch) load(ci int32, key []byte, h uint32) int32 {
	if !b.checkKey(ci, key) {
		return -1
	}
	i, _ := b.loadKnown(ci, key, h, nil)
	return i
}

// loadKnown is load for a caller that holds a copy of the document, known (nil: none), and has
// checked the key (checkKey): it reads with read_known, and when the host's document is
// byte-for-byte known, the entry's document is a copy of known and unchanged is true.
func (b *Batch) loadKnown(ci int32, key []byte, h uint32, known []byte) (i int32, unchanged bool) {
	if b.readBuf == nil {
		b.readBuf = make([]byte, initialReadBuf)
	}
	coll := b.colls[ci]
	n := b.hostRead(coll, key, known)
	if n > int32(len(b.readBuf)) {
		b.readBuf = make([]byte, n)
		n = b.hostRead(coll, key, known)
	}
	i = b.add(ci, key, h)
	e := &b.entries[i]
	switch {
	case n == abi.ReadUnchanged && known != nil:
		e.doc = append(e.doc[:0], known...)
		e.state = statePresent
		unchanged = true
	case n < -1 || n > int32(len(b.readBuf)):
		b.setErr(fmt.Errorf("guest: Read %s/%s: host returned invalid length %d", coll, key, n))
	case n >= 0:
		e.doc = append(e.doc[:0], b.readBuf[:n]...)
		e.state = statePresent
	}
	return i, unchanged
}

// hostRead calls the read import into b.readBuf, or read_known when known is not nil.
func (b *Batch) hostRead(coll string, key, known []byte) int32 {
	if known != nil {
		return b.h.readKnown(coll, key, known, b.readBuf)
	}
	return b.h.read(coll, key, b.readBuf)
}

// add creates the entry (absent, clean) of key in collection ci, whose hash is h; it must not be
// in the batch.
func (b *Batch) add(ci int32, key []byte, h uint32) int32 {
	// Copy the key bytes to the arena. When append reallocates, strings already in the indexes
	// keep pointing at the old array, which stays alive through them.
	start := len(b.arena)
	b.arena = append(b.arena, key...)
	k := unsafe.String(unsafe.SliceData(b.arena[start:]), len(key))
	n := len(b.entries)
	if n < cap(b.entries) {
		b.entries = b.entries[:n+1] // reuse the doc buffer of a previous batch's entry
	} else {
		b.entries = append(b.entries, entry{})
	}
	e := &b.entries[n]
	e.key, e.coll, e.hash, e.owner, e.slot, e.doc, e.state, e.dirty = k, ci, h, 0, 0, e.doc[:0], stateAbsent, false
	b.index.insert(b.entries, int32(n))
	b.last = int32(n)
	return int32(n)
}

// reset prepares b for the next batch.
func (b *Batch) reset() {
	b.gen = batchGen.Add(1)
	b.index.reset(b.entries)
	b.entries = b.entries[:0]
	b.arena = b.arena[:0]
	clear(b.states)
	b.states = b.states[:0]
	b.last = -1
	b.err = nil
	b.ev = Event{}
}

// call calls h with b as the current batch (currentBatch), which it is only during the call.
func (b *Batch) call(h Handler) error {
	enter(b)
	defer leave(b)
	return h(b)
}

// fieldSlot returns the field index slot of name with b's host, registering it on its first use
// with this host: 0..63, or -1 when the host refused it.
func (b *Batch) fieldSlot(name string) int {
	for i := range b.fieldNames {
		if sameString(b.fieldNames[i], name) {
			return int(b.fieldSlots[i])
		}
	}
	s := int8(-1)
	if name != "" { // the host refuses it: spare the call
		if r := b.h.field(name); r >= 0 && r < abi.MaxIndexedFields {
			s = int8(r)
		}
	}
	b.fieldNames = append(b.fieldNames, name)
	b.fieldSlots = append(b.fieldSlots, s)
	return int(s)
}

// newRegGen makes b's host one with no field registrations, numbered gen.
func (b *Batch) newRegGen(gen uint64) {
	b.regGen = gen
	b.fieldNames = b.fieldNames[:0]
	b.fieldSlots = b.fieldSlots[:0]
}

// eventData reports whether data is the current event's data: the same bytes of the batch
// buffer, not a copy or a part of them.
func (b *Batch) eventData(data []byte) bool {
	return len(data) != 0 && len(data) == len(b.ev.Data) && &data[0] == &b.ev.Data[0]
}

// run decodes batch, calls h and returns the encoded output, or a failure message for the fail
// import. The output aliases b's buffers until the next run.
func (b *Batch) run(h Handler, batch []byte) (out []byte, failMsg string) {
	b.reset()
	r, err := abi.NewBatchReader(batch)
	if err != nil {
		return nil, fmt.Sprintf("guest: cannot decode batch: %v", err)
	}
	b.r = r
	if h == nil {
		return nil, "guest: no handler registered: call guest.Handle in an init function"
	}
	herr := b.call(h)
	out, failMsg = b.finish(herr)
	for _, s := range b.states {
		s.done(b, herr == nil && failMsg == "")
	}
	return out, failMsg
}

// finish ends a batch whose handler returned err: it returns the encoded output, or a failure
// message for the fail import.
func (b *Batch) finish(err error) (out []byte, failMsg string) {
	if err != nil {
		if msg := err.Error(); msg != "" {
			return nil, msg
		}
		// An empty message would read as success: the batch would pass with no output.
		return nil, fmt.Sprintf("guest: the handler returned an error with an empty message (%T)", err)
	}
	if err := b.r.Err(); err != nil {
		return nil, fmt.Sprintf("guest: cannot decode batch: %v", err)
	}
	for _, s := range b.states {
		s.flush(b)
	}
	if b.err != nil {
		return nil, b.err.Error()
	}
	b.out.Reset()
	for i := range b.entries {
		e := &b.entries[i]
		if !e.dirty {
			continue
		}
		if e.state == statePresent {
			b.out.Put(b.colls[e.coll], e.key, e.doc)
		} else {
			b.out.Delete(b.colls[e.coll], e.key)
		}
	}
	if b.out.Count() == 0 {
		return nil, ""
	}
	return b.out.Buf, ""
}
