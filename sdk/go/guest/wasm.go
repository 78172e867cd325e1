//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/projhost/projhost/sdk/go/internal/abi"
)

// The instance's single handler and batch state: the host never enters an instance concurrently.
var (
	handler Handler
	state   = Batch{h: wasmHost{}, regGen: 1} // an instance registers fields with its one host
	current *Batch                            // &state during the handler's call, else nil
	inBuf   []byte                            // the buffer projhost_alloc handed out; kept alive here
	outBuf  []byte                            // the last output; kept alive until the next call
)

// Handle registers h as the instance's handler. Call it once, from an init function of package
// main; a later call replaces the handler.
func Handle(h Handler) { handler = h }

//go:wasmimport projhost log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport projhost fail
func hostFail(ptr unsafe.Pointer, n uint32)

//go:wasmimport projhost read
func hostRead(collPtr unsafe.Pointer, collLen uint32, keyPtr unsafe.Pointer, keyLen uint32, bufPtr unsafe.Pointer, bufCap uint32) int32

//go:wasmimport projhost read_known
func hostReadKnown(collPtr unsafe.Pointer, collLen uint32, keyPtr unsafe.Pointer, keyLen uint32, knownPtr unsafe.Pointer, knownLen uint32, bufPtr unsafe.Pointer, bufCap uint32) int32

//go:wasmimport projhost field
func hostField(namePtr unsafe.Pointer, nameLen uint32) int32

// enter, leave and currentBatch track the batch whose handler is running (Batch.call).
func enter(b *Batch)       { current = b }
func leave(*Batch)         { current = nil }
func currentBatch() *Batch { return current }

type wasmHost struct{}

func (wasmHost) log(level Level, msg string) {
	if len(msg) > abi.MaxMessageLen {
		msg = msg[:abi.MaxMessageLen]
	}
	hostLog(int32(level), unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

func (wasmHost) read(collection string, key []byte, buf []byte) int32 {
	return hostRead(unsafe.Pointer(unsafe.StringData(collection)), uint32(len(collection)),
		unsafe.Pointer(unsafe.SliceData(key)), uint32(len(key)),
		unsafe.Pointer(unsafe.SliceData(buf)), uint32(len(buf)))
}

func (wasmHost) readKnown(collection string, key, known, buf []byte) int32 {
	return hostReadKnown(unsafe.Pointer(unsafe.StringData(collection)), uint32(len(collection)),
		unsafe.Pointer(unsafe.SliceData(key)), uint32(len(key)),
		unsafe.Pointer(unsafe.SliceData(known)), uint32(len(known)),
		unsafe.Pointer(unsafe.SliceData(buf)), uint32(len(buf)))
}

func (wasmHost) field(name string) int32 {
	return hostField(unsafe.Pointer(unsafe.StringData(name)), uint32(len(name)))
}

func fail(msg string) {
	if len(msg) > abi.MaxMessageLen {
		msg = msg[:abi.MaxMessageLen]
	}
	hostFail(unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

// projhostABIv1 is the ABI v1 marker export (ABI.md §1); the host never calls it.
//
//go:wasmexport projhost_abi_v1
func projhostABIv1() {}

// projhostAlloc returns a buffer of at least size bytes, valid until the next call into the guest.
//
//go:wasmexport projhost_alloc
func projhostAlloc(size uint32) uint32 {
	if size == 0 {
		size = 1
	}
	if uint32(cap(inBuf)) < size {
		inBuf = make([]byte, size)
	}
	inBuf = inBuf[:size]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(inBuf))))
}

// projhostHandle handles the batch at ptr..ptr+n, which must lie in the buffer projhost_alloc
// returned, and returns (out_ptr << 32) | out_len.
//
//go:wasmexport projhost_handle
func projhostHandle(ptr, n uint32) uint64 {
	base := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(inBuf))))
	if len(inBuf) == 0 || ptr < base || uint64(ptr-base)+uint64(n) > uint64(len(inBuf)) {
		fail("guest: batch is not inside the buffer projhost_alloc returned")
		return 0
	}
	out, msg := state.run(handler, inBuf[ptr-base:ptr-base+n])
	if msg != "" {
		fail(msg)
		return 0
	}
	outBuf = out
	if len(out) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))<<32 | uint64(len(out))
}
