//go:build wasip1

// Command gopanic is a minimal Go handler (ABI v1) with hostile behaviours, used by the host
// tests with both Go toolchains: for each event it puts events/<partition key> = data, except
// that an event whose data is
//   - {"panic":true} makes it panic;
//   - {"print":true} makes it print a line to stdout;
//   - {"index":N} indexes a 3-element slice with N (a runtime error panic when N > 2);
//   - {"loop":true} makes it loop forever (the batch deadline stops it);
//   - {"grow":true} makes it allocate and keep 1 MiB blocks until memory runs out.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared, or tinygo build -target=wasip1
// -buildmode=c-shared.
package main

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/projhost/projhost/wasmabi"
)

var (
	in    []byte
	out   wasmabi.OutputWriter
	spin  int64    // the loop's counter (a global, so the loop is not optimized away)
	kept  [][]byte // what "grow" allocates
	small = []byte{'{', '}', ' '}
)

//go:wasmexport projhost_abi_v1
func abiV1() {}

//go:wasmexport projhost_alloc
func alloc(size int32) int32 {
	if cap(in) < int(size) {
		in = make([]byte, size)
	}
	in = in[:size]
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(in))))
}

//go:wasmexport projhost_handle
func handle(ptr, n int32) int64 {
	r, err := wasmabi.NewBatchReader(in[:n])
	if err != nil {
		panic(err)
	}
	out.Reset()
	var e wasmabi.Event
	for r.Next(&e) {
		switch string(e.Data) {
		case `{"panic":true}`:
			panic("boom at seq " + string(e.Seq))
		case `{"print":true}`:
			fmt.Println("hello from seq", string(e.Seq))
		case `{"loop":true}`:
			for { // not `for spin >= 0 { spin++ }`: LLVM (TinyGo) computes where that ends and drops the loop
				spin++
			}
		case `{"grow":true}`:
			for {
				kept = append(kept, make([]byte, 1<<20))
			}
		default:
			if i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(string(e.Data), `{"index":`), "}")); err == nil {
				spin += int64(small[i])
			}
		}
		out.Put("events", string(e.PartitionKey), e.Data)
	}
	if err := r.Err(); err != nil {
		panic(err)
	}
	return int64(uintptr(unsafe.Pointer(unsafe.SliceData(out.Buf))))<<32 | int64(len(out.Buf))
}

func main() {}
