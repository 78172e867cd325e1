// Command flightdelays-go-tuned is the hand-tuned flightdelays handler (the benchmark baseline of
// the documented example) built as a WebAssembly reactor: build/wasm/flightdelays-go-tuned.wasm.
package main

import (
	"github.com/projhost/projhost/internal/bench/tuned/flightdelays"
	"github.com/projhost/projhost/sdk/go/guest"
)

func init() { guest.Handle(flightdelays.Handler) }

func main() {}
