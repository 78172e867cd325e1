package host

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/wasmabi"
)

// NativeGuest is a projection handler compiled into the host process: what a guest instance
// does in projhost_handle, without WebAssembly. NewNativeModule runs one in place of a module,
// through the same Handler, so that the WebAssembly cost of a whole pipeline can be measured
// (projhost bench e2e --native) and a Go handler can run natively where a module would.
type NativeGuest interface {
	// HandleBatch handles one batch encoded as projhost_handle receives it (ABI.md §2) and
	// returns the output encoded as projhost_handle returns it (ABI.md §4; empty: no
	// mutations), which the host copies before the next call. A non-empty failMsg fails the
	// batch as projhost.fail does (the output is ignored, the guest kept). imp are the
	// projhost imports, valid during the call. batch is valid only during the call. A panic is
	// a trap: the guest is discarded and a new one made for the next batch.
	HandleBatch(batch []byte, imp NativeImports) (out []byte, failMsg string)
}

// NativeImports are the projhost imports of a NativeGuest (ABI.md §1), callable during
// HandleBatch only.
type NativeImports struct {
	// Read is projhost.read.
	Read NativeRead
	// Field is projhost.field (ABI.md §2.1): it registers a top-level field name for the
	// batch field index, from the next batch on, and returns its slot, or -1 when the name is
	// refused (empty, over wasmabi.MaxFieldNameLen bytes, not UTF-8) or
	// wasmabi.MaxIndexedFields names are registered. A new guest starts with none.
	Field func(name []byte) int
	// ReadKnown is projhost.read_known (ABI.md §5.1): Read, except that it returns
	// wasmabi.ReadUnchanged, copying nothing, when the document is byte-for-byte known.
	ReadKnown func(collection, key, known, buf []byte) int
}

// NativeRead is the projhost.read import of a NativeGuest (ABI.md §1, §5): it looks up the
// document of collection/key, copies it into buf when it fits, and returns its length, or -1
// when there is none. Like the import, it answers a repeated lookup of the same key from the
// last one; a failing read model ends the batch (HandleBatch does not return normally, and
// Handle returns the read model's error).
type NativeRead func(collection, key, buf []byte) int

// NewNativeModule returns a Module whose handlers run the guests newGuest makes (one per
// Handler, at its first Handle and again after a panic or a bad output) instead of WebAssembly
// instances. name labels logs and errors; logger defaults to slog.Default().
//
// Handle does for a native guest what it does for an instance: it checks and encodes the batch
// (ABI.md §2), serves reads from its DocReader, and decodes and validates the output (the
// document rule, the output limits) into copied mutations, with the same errors. There is no
// Runtime, sandbox, memory limit or deadline: the guest is trusted code in the host process
// (the module reports itself trusted), and nothing interrupts a batch it does not return from.
// MemorySize is 0. Close does nothing. newGuest must be safe for concurrent use, and must
// return a new guest at every call: a Handler calls it at its first Handle and again after
// discarding its guest, and the guest's field registrations (NativeImports.Field) belong to that
// Handler and that guest's life, as an instance's do. A guest kept across calls (say, one
// guest.Native shared by two Handlers) would read slots another Handler assigned to other names.
func NewNativeModule(name string, newGuest func(shardID string) NativeGuest, logger *slog.Logger) *Module {
	if logger == nil {
		logger = slog.Default()
	}
	return &Module{name: name, cfg: moduleConfig{trusted: true}, native: newGuest, logger: logger.With("module", name)}
}

// handleNative is Handle for a native module, once the events are checked and in h.events and
// indexed for nf fields.
func (h *Handler) handleNative(ctx context.Context, reader DocReader, first, last string, nf int) ([]event.Mutation, error) {
	if h.native == nil {
		h.native = h.mod.native(h.shard)
		h.instances++
	}
	var err error
	if h.nbatch, err = wasmabi.AppendIndexedBatch(h.nbatch[:0], h.shard, h.events, nf); err != nil {
		return nil, fmt.Errorf("host: encoding batch for shard %s: %w", h.shard, err)
	}
	h.call = newCallState(reader, h.call.lastKey)
	h.call.ctx = ctx
	out, failMsg, err := h.runNative(ctx, first, last)
	h.call = callState{lastKey: h.call.lastKey[:0]}
	if err != nil {
		return nil, err
	}
	if failMsg != "" {
		if len(failMsg) > wasmabi.MaxMessageLen {
			failMsg = failMsg[:wasmabi.MaxMessageLen]
		}
		return nil, &HandlerError{Module: h.mod.name, Shard: h.shard, FirstSeq: first, LastSeq: last, Kind: ErrHandlerFailed,
			Message: strings.ToValidUTF8(failMsg, "\uFFFD") + " (the native handler failed the batch; its output was discarded, the handler kept)"}
	}
	return h.output(ctx, out, first, last)
}

// runNative calls the native guest, turning its panics into errors: a failed read into the
// read model's error, any other into ErrTrap.
func (h *Handler) runNative(ctx context.Context, first, last string) (out []byte, failMsg string, err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if rp, ok := p.(*readErrorPanic); ok {
			h.native = nil
			h.fields = h.fields[:0]
			err = fmt.Errorf("host: module %q shard %s: %w (the native handler was interrupted and discarded; retry the batch)", h.mod.name, h.shard, rp.err)
			return
		}
		err = h.poison(ctx, ErrTrap, first, last, fmt.Sprintf("the native handler panicked: %v; it was discarded", p))
	}()
	if h.imports.Read == nil {
		h.imports = NativeImports{Read: h.nativeRead, Field: h.nativeField, ReadKnown: h.nativeReadKnown}
	}
	out, failMsg = h.native.HandleBatch(h.nbatch, h.imports)
	return out, failMsg, nil
}

// nativeRead is the NativeRead of the handler's guest.
func (h *Handler) nativeRead(collection, key, buf []byte) int {
	if !h.call.inHandle {
		panic("host: NativeRead called outside HandleBatch")
	}
	doc, found := h.readDoc(h.call.ctx, collection, key)
	if !found {
		return -1
	}
	if len(doc) <= len(buf) {
		copy(buf, doc)
	}
	return len(doc)
}

// nativeReadKnown is the ReadKnown import of the handler's guest.
func (h *Handler) nativeReadKnown(collection, key, known, buf []byte) int {
	if !h.call.inHandle {
		panic("host: NativeImports.ReadKnown called outside HandleBatch")
	}
	doc, found := h.readDoc(h.call.ctx, collection, key)
	switch {
	case !found:
		return -1
	case bytes.Equal(doc, known):
		return wasmabi.ReadUnchanged
	}
	if len(doc) <= len(buf) {
		copy(buf, doc)
	}
	return len(doc)
}

// nativeField is the Field import of the handler's guest.
func (h *Handler) nativeField(name []byte) int {
	if !h.call.inHandle {
		panic("host: NativeImports.Field called outside HandleBatch")
	}
	return h.registerField(name)
}
