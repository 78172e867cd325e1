package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/projhost/projhost/wasmabi"
)

// envModule is the module AssemblyScript imports abort from.
const envModule = "env"

// maxASStringBytes bounds how much of an AssemblyScript string abort decodes (UTF-16 bytes).
const maxASStringBytes = 2 * wasmabi.MaxMessageLen

// handlerKey is the context key under which a call into a guest carries its *Handler, so the
// host functions (shared by every instance of a wazero runtime) find the call's state.
type handlerKey struct{}

// guestTrap is panicked by host functions to stop the guest; wazero returns it wrapped from the
// call and the Handler reports it as ErrTrap.
type guestTrap struct{ msg string }

func (t *guestTrap) Error() string { return t.msg }

func trap(format string, args ...any) { panic(&guestTrap{msg: fmt.Sprintf(format, args...)}) }

// readErrorPanic stops the guest when the DocReader fails; the error is reported as is.
type readErrorPanic struct{ err error }

func (p *readErrorPanic) Error() string { return "read model read failed: " + p.err.Error() }
func (p *readErrorPanic) Unwrap() error { return p.err }

var (
	i32 = api.ValueTypeI32
)

func instantiateHostModules(ctx context.Context, rt wazero.Runtime) error {
	_, err := rt.NewHostModuleBuilder(wasmabi.ImportModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostLog), []api.ValueType{i32, i32, i32}, nil).
		WithParameterNames("level", "ptr", "len").Export(wasmabi.ImportLog).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostFail), []api.ValueType{i32, i32}, nil).
		WithParameterNames("ptr", "len").Export(wasmabi.ImportFail).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostRead), []api.ValueType{i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("coll_ptr", "coll_len", "key_ptr", "key_len", "buf_ptr", "buf_cap").Export(wasmabi.ImportRead).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostField), []api.ValueType{i32, i32}, []api.ValueType{i32}).
		WithParameterNames("name_ptr", "name_len").Export(wasmabi.ImportField).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostReadKnown), []api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("coll_ptr", "coll_len", "key_ptr", "key_len", "known_ptr", "known_len", "buf_ptr", "buf_cap").Export(wasmabi.ImportReadKnown).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("host: instantiating the projhost host module: %w", err)
	}
	_, err = rt.NewHostModuleBuilder(envModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostAbort), []api.ValueType{i32, i32, i32, i32}, nil).
		WithParameterNames("msg", "file", "line", "col").Export("abort").
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("host: instantiating the env host module: %w", err)
	}
	return nil
}

func handlerOf(ctx context.Context) *Handler {
	h, _ := ctx.Value(handlerKey{}).(*Handler)
	return h
}

// guestRange returns mem[ptr:ptr+n] or traps naming the import and the range.
func guestRange(mod api.Module, fn, what string, ptr, n uint32) []byte {
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		trap("projhost.%s: %s range %d..%d is outside guest memory (%d bytes)", fn, what, ptr, uint64(ptr)+uint64(n), mod.Memory().Size())
	}
	return b
}

func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := api.DecodeI32(stack[0]), api.DecodeU32(stack[1]), api.DecodeU32(stack[2])
	msg := guestRange(mod, wasmabi.ImportLog, "message", ptr, n)
	if len(msg) > wasmabi.MaxMessageLen {
		msg = msg[:wasmabi.MaxMessageLen]
	}
	lvl := slog.LevelInfo
	switch {
	case level <= wasmabi.LevelDebug:
		lvl = slog.LevelDebug
	case level == wasmabi.LevelWarn:
		lvl = slog.LevelWarn
	case level >= wasmabi.LevelError:
		lvl = slog.LevelError
	}
	h := handlerOf(ctx)
	if h == nil {
		trap("projhost.log called outside a call of the host")
	}
	if h.logger.Enabled(ctx, lvl) && h.logLimit.allow() {
		h.logger.Log(ctx, lvl, string(msg), "source", "guest")
	}
}

func hostFail(ctx context.Context, mod api.Module, stack []uint64) {
	ptr, n := api.DecodeU32(stack[0]), api.DecodeU32(stack[1])
	msg := guestRange(mod, wasmabi.ImportFail, "message", ptr, n)
	if len(msg) > wasmabi.MaxMessageLen {
		msg = msg[:wasmabi.MaxMessageLen]
	}
	h := handlerOf(ctx)
	if h == nil || !h.call.inHandle {
		trap("projhost.fail called outside projhost_handle")
	}
	if !h.call.failed {
		h.call.failed = true
		h.call.failMsg = strings.ToValidUTF8(string(msg), "\uFFFD")
	}
}

// hostRead is projhost.read (ABI.md §1, §5).
func hostRead(ctx context.Context, mod api.Module, stack []uint64) {
	serveRead(ctx, mod, stack, wasmabi.ImportRead, false)
}

// hostReadKnown is projhost.read_known (ABI.md §1, §5.1): read, except that it returns
// wasmabi.ReadUnchanged, copying nothing, when the document is byte-for-byte the guest's known
// bytes.
func hostReadKnown(ctx context.Context, mod api.Module, stack []uint64) {
	serveRead(ctx, mod, stack, wasmabi.ImportReadKnown, true)
}

// serveRead is the import name (read, or read_known when known) called with stack.
func serveRead(ctx context.Context, mod api.Module, stack []uint64, name string, known bool) {
	h := handlerOf(ctx)
	if h == nil || !h.call.inHandle {
		trap("projhost.%s called outside projhost_handle", name)
	}
	coll := guestRange(mod, name, "collection", api.DecodeU32(stack[0]), api.DecodeU32(stack[1]))
	key := guestRange(mod, name, "key", api.DecodeU32(stack[2]), api.DecodeU32(stack[3]))
	var kb []byte
	buf := stack[4:6]
	if known {
		kb = guestRange(mod, name, "known document", api.DecodeU32(stack[4]), api.DecodeU32(stack[5]))
		buf = stack[6:8]
	}
	doc, found := h.readDoc(ctx, coll, key)
	switch {
	case !found:
		stack[0] = api.EncodeI32(-1)
	case known && bytes.Equal(doc, kb):
		stack[0] = api.EncodeI32(wasmabi.ReadUnchanged)
	default:
		n := uint32(len(doc))
		if n <= api.DecodeU32(buf[1]) {
			copy(guestRange(mod, name, "buffer", api.DecodeU32(buf[0]), n), doc)
		}
		stack[0] = api.EncodeU32(n)
	}
}

// hostField is projhost.field (ABI.md §1, §2.1).
func hostField(ctx context.Context, mod api.Module, stack []uint64) {
	h := handlerOf(ctx)
	if h == nil || !h.call.inHandle {
		trap("projhost.field called outside projhost_handle")
	}
	n := api.DecodeU32(stack[1])
	if n == 0 || n > wasmabi.MaxFieldNameLen {
		stack[0] = api.EncodeI32(-1)
		return
	}
	name := guestRange(mod, wasmabi.ImportField, "name", api.DecodeU32(stack[0]), n)
	stack[0] = api.EncodeI32(int32(h.registerField(name)))
}

// registerField registers name for the field index of the current instance (ABI.md §2.1) and
// returns its slot, or -1 when it is refused or the instance has MaxIndexedFields already.
func (h *Handler) registerField(name []byte) int {
	if len(name) == 0 || len(name) > wasmabi.MaxFieldNameLen || !utf8.Valid(name) {
		return -1
	}
	for i, f := range h.fields {
		if f == string(name) {
			return i
		}
	}
	if len(h.fields) >= wasmabi.MaxIndexedFields {
		return -1
	}
	h.fields = append(h.fields, string(name))
	return len(h.fields) - 1
}

// readDoc serves projhost.read of the current call from its DocReader: the document of
// coll/key and whether there is one. A failing read model stops the guest (readErrorPanic).
func (h *Handler) readDoc(ctx context.Context, coll, key []byte) ([]byte, bool) {
	c := &h.call
	// The n > buf_cap retry protocol reads the same document twice in a row: serve the second
	// call from the last lookup. Nothing here allocates once the handler has seen its
	// collections: the key goes to the reader as the guest's bytes.
	if !c.lastValid || c.lastColl != string(coll) || !bytes.Equal(c.lastKey, key) {
		collS := h.collName(coll)
		var doc []byte
		found, inMemory := false, false
		if c.memory != nil {
			doc, found, inMemory = c.memory.ReadDocFromMemory(collS, key)
		}
		if !inMemory {
			// Time spent reading the read model (a DynamoDB round trip) is the host's, not the
			// guest's: it does not count against the batch deadline.
			h.intr.pause()
			var err error
			doc, found, err = c.reader.ReadDoc(ctx, collS, key)
			h.intr.resume()
			if err != nil {
				panic(&readErrorPanic{err: fmt.Errorf("projhost.read %s/%s: %w", collS, key, err)})
			}
		}
		c.lastColl, c.lastDoc, c.lastFound, c.lastValid = collS, doc, found, true
		c.lastKey = append(c.lastKey[:0], key...)
	}
	return c.lastDoc, c.lastFound
}

func hostAbort(ctx context.Context, mod api.Module, stack []uint64) {
	mem, _ := mod.Memory().Read(0, mod.Memory().Size())
	msg, ok := decodeASString(mem, api.DecodeU32(stack[0]))
	if !ok {
		msg = "(message not decodable)"
	}
	file, ok := decodeASString(mem, api.DecodeU32(stack[1]))
	if !ok {
		file = "?"
	}
	trap("abort: %s at %s:%d:%d", msg, file, api.DecodeU32(stack[2]), api.DecodeU32(stack[3]))
}

// decodeASString decodes an AssemblyScript string at ptr in mem: UTF-16LE code units preceded by
// the object header whose last u32 (at ptr-4) is the byte length. It returns false when ptr is 0,
// the string is out of bounds, has an odd length, or is longer than maxASStringBytes (the
// message is then cut and "..." appended, still returning true).
func decodeASString(mem []byte, ptr uint32) (string, bool) {
	if ptr < 4 || uint64(ptr) > uint64(len(mem)) {
		return "", false
	}
	n := binary.LittleEndian.Uint32(mem[ptr-4:])
	if n%2 != 0 || uint64(ptr)+uint64(n) > uint64(len(mem)) {
		return "", false
	}
	cut := false
	if n > maxASStringBytes {
		n, cut = maxASStringBytes, true
	}
	units := make([]uint16, n/2)
	for i := range units {
		units[i] = binary.LittleEndian.Uint16(mem[ptr+uint32(2*i):])
	}
	var sb strings.Builder
	for _, r := range utf16.Decode(units) {
		if r == 0 || !utf8.ValidRune(r) {
			r = utf8.RuneError
		}
		sb.WriteRune(r)
	}
	if cut {
		sb.WriteString("...")
	}
	return sb.String(), true
}

// collName returns coll as a string, reusing the handler's earlier string of the same name (a
// handler uses a few collections: no allocation per read).
func (h *Handler) collName(coll []byte) string {
	for _, c := range h.colls {
		if c == string(coll) {
			return c
		}
	}
	c := string(coll)
	if len(h.colls) < 16 {
		h.colls = append(h.colls, c)
	}
	return c
}
