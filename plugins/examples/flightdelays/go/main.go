// Command flightdelays-go is the flightdelays projection built as a WebAssembly reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o flightdelays-go.wasm .
package main

import (
	"github.com/projhost/projhost/plugins/examples/flightdelays"
	"github.com/projhost/projhost/sdk/go/guest"
)

func init() { guest.Handle(flightdelays.Handler) }

func main() {}
