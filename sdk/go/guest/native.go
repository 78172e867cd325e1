//go:build !wasip1

package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/projhost/projhost/sdk/go/internal/abi"
)

// ErrHandlerFailed is wrapped by the error Native.Run returns when the handler failed the batch
// (returned an error, misused Put/Delete/Read, or received a malformed batch) — the native
// counterpart of the host's fail import.
var ErrHandlerFailed = errors.New("guest: handler failed the batch")

var registered Handler

// Handle registers h as the default handler of NewNative(nil). In WebAssembly builds it makes h
// the instance's handler; natively it only records it, so a handler's package main also builds
// and can be tested natively.
func Handle(h Handler) { registered = h }

// NativeOption configures a Native. Options are immutable values.
type NativeOption func(*Native)

// WithLogger sends the handler's Batch.Log messages to l (default: slog.Default()).
func WithLogger(l *slog.Logger) NativeOption { return func(n *Native) { n.logger = l } }

// WithDocValidation makes Run check that every put document is valid JSON, as the host does
// (default on; turn it off only to measure the handler alone).
func WithDocValidation(on bool) NativeOption { return func(n *Native) { n.validate = on } }

// Native runs a Handler in-process, without WebAssembly, against an in-memory read model. It goes
// through the same code path as the WebAssembly build: the events are encoded as an ABI batch,
// decoded by the SDK, and the handler's output is encoded, decoded and applied to the store. Use
// it to unit-test handlers and as the native performance baseline. A Native is not safe for
// concurrent use. Separate Natives may run batches at once in several goroutines when their
// handlers share no state: a handler's package variables (its JSONFields and States) are one
// instance's in WebAssembly, so natively they belong to one running Native at a time.
//
// A Native is one instance to the field import (ABI.md §2.1): Run and RunBatch have none, and a
// host that indexes fields passes its Imports.Field to RunBatchImports, which the Native asks
// once per name (and again after calls without a Field). Batches that carry a field index are
// read through it only while one Native alone runs a batch in the process: Natives running at
// once neither register nor read the index, and their JSONFields scan the data (the same
// answers, in more time). While a Native runs a batch alone, JSONFields.Scan looks at its current
// event: other goroutines must not call Scan then.
type Native struct {
	h        Handler
	logger   *slog.Logger
	validate bool
	store    map[string]map[string]*[]byte // collection -> key -> doc
	batch    Batch
	enc      []byte
	muts     []Mutation
	imp      Imports           // RunBatchImports's, during its call
	fieldOn  bool              // the last batch had an Imports.Field
	colls    map[string][]byte // collection names as bytes, for imp.Read
}

// Imports are the host functions a Native runs one batch with (the projhost imports, ABI.md §1).
type Imports struct {
	// Read is projhost.read: it copies the document of collection/key into buf when it fits
	// and returns its length, or -1 when there is none. nil: the Native's own store.
	Read func(collection, key, buf []byte) int
	// ReadKnown is projhost.read_known (ABI.md §5.1), which a State calls for a document it
	// kept from an earlier batch: Read, except that it returns -2, copying nothing, when the
	// document is byte-for-byte known (the import's contract: -1 when there is none, else the
	// length, copied into buf when it fits, the same document again at a repeated call). nil
	// with Read set: the Native calls Read and compares; nil with Read nil: the Native's own
	// store.
	ReadKnown func(collection, key, known, buf []byte) int
	// Field is projhost.field: it registers the top-level field name (1 to 255 bytes of UTF-8)
	// for the field index of the batches encoded after this one and returns its slot (0 for
	// the first name, the same slot for a name registered before), or -1 when it refuses the
	// name. Its registrations must last as long as the Native is used with a Field. nil: no
	// field index (JSONFields scan).
	Field func(name []byte) int
}

// regGens numbers the Natives' field registrations (Batch.regGen).
var regGens atomic.Uint64

// NewNative returns a Native running h (nil: the handler registered with Handle) over an empty
// read model.
func NewNative(h Handler, opts ...NativeOption) *Native {
	if h == nil {
		h = registered
	}
	n := &Native{h: h, logger: slog.Default(), validate: true, store: map[string]map[string]*[]byte{}}
	for _, o := range opts {
		o(n)
	}
	n.batch.h = nativeHost{n}
	n.batch.newRegGen(regGens.Add(1))
	return n
}

// Run hands events, all from shardID, to the handler as one batch and applies its output to the
// read model. It returns the mutations the handler emitted, which alias internal buffers valid
// until the next Run or RunBatch. Errors: ErrHandlerFailed (wrapped, with the handler's message)
// when the batch failed, in which case nothing is applied; ErrMalformed (wrapped) when the events
// break an ABI limit (e.g. an empty sequence number) or the output is malformed.
func (n *Native) Run(shardID string, events []Event) ([]Mutation, error) {
	var err error
	n.enc, err = abi.AppendBatch(n.enc[:0], shardID, events)
	if err != nil {
		return nil, fmt.Errorf("guest: encode batch: %w", err)
	}
	if _, err := n.RunBatch(n.enc); err != nil {
		return nil, err
	}
	return n.muts, nil
}

// RunBatch is projhost_handle without WebAssembly: it hands batch, encoded as the host encodes
// it (ABI.md §2), to the handler, applies the output to the read model and returns the output
// encoded as the host receives it (ABI.md §4; nil when there are no mutations), valid until the
// next Run or RunBatch. Errors as Run's; a malformed batch fails as in WebAssembly, with
// ErrHandlerFailed and a message starting "guest: cannot decode batch".
func (n *Native) RunBatch(batch []byte) ([]byte, error) {
	out, err := n.handle(batch)
	if err != nil {
		return nil, err
	}
	n.muts = n.muts[:0]
	var valid func([]byte) error
	if n.validate {
		valid = validObject
	}
	err = abi.DecodeOutput(out, valid, func(m Mutation) error {
		n.muts = append(n.muts, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("guest: handler output: %w", err)
	}
	for _, m := range n.muts {
		if m.Op == abi.OpPut {
			n.put(m.Collection, m.Key, m.Doc)
		} else if c := n.store[string(m.Collection)]; c != nil {
			delete(c, string(m.Key))
		}
	}
	return out, nil
}

// RunBatchWith is RunBatchImports(batch, Imports{Read: read}).
func (n *Native) RunBatchWith(batch []byte, read func(collection, key, buf []byte) int) ([]byte, error) {
	return n.RunBatchImports(batch, Imports{Read: read})
}

// RunBatchImports is RunBatch for a host that keeps the read model itself, as projhost's host does
// for a handler compiled into it (host.NewNativeModule): the handler calls the imports of imp
// (see Imports; nil ones as documented there), and its output is returned encoded (ABI.md §4;
// nil: no mutations; valid until the next call), neither decoded nor applied to this Native's
// store, which the call neither changes nor, when imp.Read is set, reads. batch may carry a field
// index (ABI.md §2.1) for the names imp.Field registered. Errors: ErrHandlerFailed (wrapped, with
// the handler's message) when the batch failed.
func (n *Native) RunBatchImports(batch []byte, imp Imports) ([]byte, error) {
	n.imp = imp
	defer func() { n.imp = Imports{} }()
	return n.handle(batch)
}

// handle runs the handler over batch with n.imp and returns its encoded output, or
// ErrHandlerFailed with its message (cut to the ABI's limit).
func (n *Native) handle(batch []byte) ([]byte, error) {
	if on := n.imp.Field != nil; on != n.fieldOn {
		// Registrations belong to the Field of the calls with one: anew with or without it.
		n.fieldOn = on
		n.batch.newRegGen(regGens.Add(1))
	}
	out, msg := n.batch.run(n.h, batch)
	if msg != "" {
		if len(msg) > abi.MaxMessageLen {
			msg = msg[:abi.MaxMessageLen]
		}
		return nil, fmt.Errorf("%w: %s", ErrHandlerFailed, msg)
	}
	return out, nil
}

func validObject(doc []byte) error {
	if !json.Valid(doc) || doc[0] != '{' {
		return errors.New("document is not one JSON object")
	}
	return nil
}

// Get returns the stored document of collection/key. It is shared with the store: do not modify
// it, and copy it if it must survive the next Run.
func (n *Native) Get(collection, key string) ([]byte, bool) {
	d, ok := n.store[collection][key]
	if !ok {
		return nil, false
	}
	return *d, true
}

// Set stores a copy of doc at collection/key, e.g. to seed the read model before a test.
func (n *Native) Set(collection, key string, doc []byte) {
	n.put([]byte(collection), []byte(key), doc)
}

// put stores a copy of doc, reusing the key's previous buffer (no allocation in steady state).
func (n *Native) put(collection, key, doc []byte) {
	c := n.store[string(collection)]
	if c == nil {
		c = map[string]*[]byte{}
		n.store[string(collection)] = c
	}
	if d, ok := c[string(key)]; ok {
		*d = append((*d)[:0], doc...)
		return
	}
	d := append([]byte(nil), doc...)
	c[string(key)] = &d
}

// Collection returns a copy of the documents of collection by key.
func (n *Native) Collection(collection string) map[string][]byte {
	m := make(map[string][]byte, len(n.store[collection]))
	for k, v := range n.store[collection] {
		m[k] = append([]byte(nil), *v...)
	}
	return m
}

type nativeHost struct{ n *Native }

func (h nativeHost) log(level Level, msg string) {
	if len(msg) > abi.MaxMessageLen {
		msg = msg[:abi.MaxMessageLen]
	}
	l := slog.LevelInfo
	switch level {
	case LevelDebug:
		l = slog.LevelDebug
	case LevelWarn:
		l = slog.LevelWarn
	case LevelError:
		l = slog.LevelError
	}
	h.n.logger.Log(context.Background(), l, msg, "source", "guest")
}

func (h nativeHost) read(collection string, key []byte, buf []byte) int32 {
	if r := h.n.imp.Read; r != nil {
		return int32(r(h.collBytes(collection), key, buf))
	}
	p, ok := h.n.store[collection][string(key)]
	if !ok {
		return -1
	}
	if d := *p; len(d) <= len(buf) {
		copy(buf, d)
	}
	return int32(len(*p))
}

func (h nativeHost) readKnown(collection string, key, known, buf []byte) int32 {
	if r := h.n.imp.ReadKnown; r != nil {
		return int32(r(h.collBytes(collection), key, known, buf))
	}
	if h.n.imp.Read != nil { // a caller that predates ReadKnown: read and compare
		n := h.read(collection, key, buf)
		if n >= 0 && int(n) <= len(buf) && bytes.Equal(buf[:n], known) {
			return abi.ReadUnchanged
		}
		return n
	}
	if p, ok := h.n.store[collection][string(key)]; ok && bytes.Equal(*p, known) {
		return abi.ReadUnchanged
	}
	return h.read(collection, key, buf)
}

// collBytes returns collection as bytes for the Imports, allocated once per name.
func (h nativeHost) collBytes(collection string) []byte {
	c, ok := h.n.colls[collection]
	if !ok {
		if h.n.colls == nil {
			h.n.colls = map[string][]byte{}
		}
		c = []byte(collection)
		h.n.colls[collection] = c
	}
	return c
}

func (h nativeHost) field(name string) int32 {
	f := h.n.imp.Field
	if f == nil {
		return -1
	}
	if s := f([]byte(name)); s >= 0 && s < abi.MaxIndexedFields {
		return int32(s)
	}
	return -1
}

// The batch whose handler runs (Batch.call) is the current one (currentBatch) only while no other
// Native runs a batch: a JSONFields reads the current batch's event, which another goroutine's
// handler must not do while the batch's own goroutine moves it on.
var (
	running atomic.Int32          // batches whose handler runs
	current atomic.Pointer[Batch] // the batch that started while no other ran, while it runs
)

func enter(b *Batch) {
	if running.Add(1) == 1 {
		current.Store(b)
	}
}

func leave(b *Batch) {
	current.CompareAndSwap(b, nil) // before the count: a Native then alone finds no other's batch
	running.Add(-1)
}

// currentBatch returns the batch whose handler runs on this goroutine when it is the only one
// running, else nil.
func currentBatch() *Batch {
	if running.Load() != 1 {
		return nil
	}
	return current.Load()
}
