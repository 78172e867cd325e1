//go:build wasip1

// Command gopanic is a minimal Go handler (ABI v1) used by the host tests: for each event it puts
// events/<partition key> = data, except that an event whose data is {"panic":true} makes it
// panic (a Go guest then exits with code 2) and one whose data is {"print":true} makes it print
// a line to stdout. Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"fmt"
	"unsafe"

	"github.com/projhost/projhost/wasmabi"
)

var (
	in  []byte
	out wasmabi.OutputWriter
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
		}
		out.Put("events", string(e.PartitionKey), e.Data)
	}
	if err := r.Err(); err != nil {
		panic(err)
	}
	return int64(uintptr(unsafe.Pointer(unsafe.SliceData(out.Buf))))<<32 | int64(len(out.Buf))
}

func main() {}
