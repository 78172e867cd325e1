// Command count-go is the count projection built as a WebAssembly reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o count-go.wasm .
package main

import (
	"github.com/projhost/projhost/plugins/examples/count"
	"github.com/projhost/projhost/sdk/go/guest"
)

func init() { guest.Handle(count.Handler) }

func main() {}
