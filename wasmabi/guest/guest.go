// Package guest is the Go SDK for projhost projection handlers compiled to WebAssembly
// (ABI v1, wasmabi/ABI.md).
//
// A handler is a package main that registers one function and is built as a WASI reactor:
//
//	package main
//
//	import "github.com/projhost/projhost/wasmabi/guest"
//
//	func init() {
//		guest.Handle(func(b *guest.Batch) error {
//			for b.Next() {
//				ev := b.Event()
//				n, _ := guest.JSONInt(ev.Data, "amount")
//				...
//				b.Put("totals", ev.PartitionKey, doc)
//			}
//			return nil
//		})
//	}
//
//	func main() {}
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o handler.wasm .
//
// The package implements the ABI exports (projhost_abi_v1, projhost_alloc, projhost_handle) and
// calls the host imports (projhost.log, projhost.fail, projhost.read) when built for wasip1. Built
// for any other target it compiles against an in-process fake host (Native) so the same handler
// code can be unit-tested and benchmarked natively.
//
// Batch semantics: Put and Delete go into a per-batch cache keyed by collection/key; only the final
// value of each key is emitted, in the order keys were first written. Read consults the cache first
// (read-your-writes, ABI.md §5) and asks the host only for keys the batch has not seen yet. A handler
// returning a non-nil error fails the batch through the host's fail import (ABI.md §6): the host
// discards the batch's output and keeps the instance. A panic is not recovered: in WebAssembly it
// exits the instance, which the host then discards.
//
// The handler is never called concurrently (one instance per shard); nothing in this package is
// safe for concurrent use.
package guest

import (
	"fmt"
	"unsafe"

	"github.com/projhost/projhost/wasmabi"
)

// Event is one stream record. Its byte slices alias the batch buffer and are valid only until the
// handler returns; copy what must outlive the batch.
type Event = wasmabi.Event

// Handler processes one batch. A non-nil error fails the whole batch (none of its Puts and
// Deletes are applied); its message is passed to the host, at most 4096 bytes of it.
type Handler func(b *Batch) error

// Level is a log level of Batch.Log.
type Level int32

// Log levels (ABI.md §1, the log import).
const (
	LevelDebug Level = wasmabi.LevelDebug
	LevelInfo  Level = wasmabi.LevelInfo
	LevelWarn  Level = wasmabi.LevelWarn
	LevelError Level = wasmabi.LevelError
)

// host is what a batch needs from its host: the three ABI imports.
type host interface {
	log(level Level, msg string)
	// read implements the read import: it returns -1 when there is no document, else the
	// document's length n, written into buf only when n <= len(buf).
	read(collection string, key []byte, buf []byte) int32
}

// initialReadBuf is the first size in bytes of the buffer passed to the read import; it grows to
// the largest document read.
const initialReadBuf = 4096

// entry states.
const (
	stateAbsent  = iota // known not to exist (read -1, or deleted)
	statePresent        // doc holds the document
)

type entry struct {
	ck      string // collection + "\x00" + key, aliases Batch.arena
	collLen int
	doc     []byte
	state   uint8
	dirty   bool // written by this batch (Put or Delete)
}

// Batch is one call's worth of events and the handler's view of the read model. It is valid only
// during the Handler call that received it.
type Batch struct {
	r   wasmabi.BatchReader
	ev  Event
	h   host
	err error // first Put/Delete/Read misuse; fails the batch

	index   map[string]int32 // collection\x00key -> entries index
	entries []entry
	arena   []byte // backing bytes of entry keys for this batch
	readBuf []byte // scratch for the read import, grown on demand
	out     wasmabi.OutputWriter
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

// Put sets the document of collection/key to doc, which must be one JSON object of at most
// 256 KiB. Collection names are 1..255 bytes of [A-Za-z0-9_.-]; keys 1..1024 bytes without NUL.
// doc and key are copied: the caller may reuse them at once. An invalid name, key or document
// size fails the batch when the handler returns.
func (b *Batch) Put(collection string, key []byte, doc []byte) {
	e := b.entry(collection, key)
	if e == nil {
		return
	}
	if len(doc) > wasmabi.MaxDocLen {
		b.setErr(fmt.Errorf("guest: Put %s/%s: document of %d bytes exceeds %d", collection, key, len(doc), wasmabi.MaxDocLen))
		return
	}
	if len(doc) < 2 || doc[0] != '{' || doc[len(doc)-1] != '}' {
		b.setErr(fmt.Errorf("guest: Put %s/%s: document is not a JSON object (want {...})", collection, key))
		return
	}
	e.doc = append(e.doc[:0], doc...)
	e.state = statePresent
	e.dirty = true
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
// the batch; do not modify it.
func (b *Batch) Read(collection string, key []byte) ([]byte, bool) {
	if i, ok := b.index[b.tmpKey(collection, key)]; ok { // validated when it was added
		e := &b.entries[i]
		return e.doc, e.state == statePresent
	}
	if !b.check(collection, key) {
		return nil, false
	}
	if b.readBuf == nil {
		b.readBuf = make([]byte, initialReadBuf)
	}
	n := b.h.read(collection, key, b.readBuf[:cap(b.readBuf)])
	if n > int32(len(b.readBuf[:cap(b.readBuf)])) {
		b.readBuf = make([]byte, n)
		n = b.h.read(collection, key, b.readBuf)
	}
	e := b.add(collection, key)
	switch {
	case n < -1 || n > int32(len(b.readBuf[:cap(b.readBuf)])):
		b.setErr(fmt.Errorf("guest: Read %s/%s: host returned invalid length %d", collection, key, n))
		e.state = stateAbsent
	case n == -1:
		e.state = stateAbsent
	default:
		e.doc = append(e.doc[:0], b.readBuf[:n]...)
		e.state = statePresent
	}
	return e.doc, e.state == statePresent
}

func (b *Batch) check(collection string, key []byte) bool {
	if !wasmabi.ValidCollection(unsafe.Slice(unsafe.StringData(collection), len(collection))) {
		b.setErr(fmt.Errorf("guest: invalid collection name %q: want 1..%d bytes of [A-Za-z0-9_.-]", collection, wasmabi.MaxCollectionLen))
		return false
	}
	if !wasmabi.ValidDocKey(key) {
		b.setErr(fmt.Errorf("guest: collection %s: invalid key %q: want 1..%d bytes without NUL", collection, key, wasmabi.MaxDocKeyLen))
		return false
	}
	return true
}

func (b *Batch) setErr(err error) {
	if b.err == nil {
		b.err = err
	}
}

// tmpKey returns collection\x00key in the free tail of the arena without committing it; the
// string is valid for a map lookup only.
func (b *Batch) tmpKey(collection string, key []byte) string {
	start := len(b.arena)
	b.arena = append(b.arena, collection...)
	b.arena = append(b.arena, 0)
	b.arena = append(b.arena, key...)
	s := b.arena[start:]
	b.arena = b.arena[:start]
	return unsafe.String(unsafe.SliceData(s), len(s))
}

// entry returns the cache entry of collection/key, creating it (absent, clean) when there is
// none; nil when collection or key is invalid (the batch then fails). Keys already in the cache
// were validated when they were added.
func (b *Batch) entry(collection string, key []byte) *entry {
	if i, ok := b.index[b.tmpKey(collection, key)]; ok {
		return &b.entries[i]
	}
	if !b.check(collection, key) {
		return nil
	}
	return b.add(collection, key)
}

// add creates the entry (absent, clean) of collection/key, which must not be in the cache.
func (b *Batch) add(collection string, key []byte) *entry {
	k := b.tmpKey(collection, key)
	// Commit the key bytes to the arena. When append reallocates, strings already in the map keep
	// pointing at the old array, which stays alive through them.
	start := len(b.arena)
	b.arena = append(b.arena, k...)
	k = unsafe.String(&b.arena[start], len(k))
	n := len(b.entries)
	if n < cap(b.entries) {
		b.entries = b.entries[:n+1] // reuse the doc buffer of a previous batch's entry
	} else {
		b.entries = append(b.entries, entry{})
	}
	e := &b.entries[n]
	e.ck, e.collLen, e.doc, e.state, e.dirty = k, len(collection), e.doc[:0], stateAbsent, false
	b.index[k] = int32(n)
	return e
}

// run decodes batch, calls h and returns the encoded output, or a failure message for the fail
// import. The output aliases b's buffers until the next run.
func (b *Batch) run(h Handler, batch []byte) (out []byte, failMsg string) {
	if b.index == nil {
		b.index = make(map[string]int32)
	}
	clear(b.index)
	b.entries = b.entries[:0]
	// Keep the arena's array only if no string from the previous batch can still be reached: the
	// map was cleared and entries are overwritten before use, so reuse is safe.
	b.arena = b.arena[:0]
	b.err = nil
	b.ev = Event{}
	r, err := wasmabi.NewBatchReader(batch)
	if err != nil {
		return nil, fmt.Sprintf("guest: cannot decode batch: %v", err)
	}
	b.r = r
	if h == nil {
		return nil, "guest: no handler registered: call guest.Handle in an init function"
	}
	if err := h(b); err != nil {
		return nil, err.Error()
	}
	if err := b.r.Err(); err != nil {
		return nil, fmt.Sprintf("guest: cannot decode batch: %v", err)
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
		coll, key := e.ck[:e.collLen], e.ck[e.collLen+1:]
		if e.state == statePresent {
			b.out.Put(coll, key, e.doc)
		} else {
			b.out.Delete(coll, key)
		}
	}
	if b.out.Count() == 0 {
		return nil, ""
	}
	return b.out.Buf, ""
}
