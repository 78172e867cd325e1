// Package count is the smallest projection example: the number of events per partition key,
// kept in collection "counts" as {"count":N} under the partition key. Its Handler runs in
// WebAssembly (./go, built as build/wasm/count-go.wasm, or count-tinygo.wasm with TinyGo) and
// natively through guest.Native; the AssemblyScript version (./as) writes byte-identical
// documents.
package count

import (
	"errors"
	"fmt"

	"github.com/projhost/projhost/sdk/go/guest"
)

// Collection is the collection the handler writes.
const Collection = "counts"

// Count is the document of counts/<partition key>.
type Count struct{ N int64 }

// Decode reads a stored counts document.
func (c *Count) Decode(doc []byte) error {
	var ok bool
	if c.N, ok = guest.JSONInt(doc, "count"); !ok {
		return errors.New(`no integer "count"`)
	}
	return nil
}

// Append appends the counts document of c to dst.
func (c *Count) Append(dst []byte) []byte {
	o := guest.NewObject(dst)
	o.Int("count", c.N)
	return o.Bytes()
}

// counts holds the batch's documents (one instance runs one batch at a time; natively, run one
// guest.Native at a time with Handler).
var counts = guest.NewState(Collection, (*Count).Decode, (*Count).Append)

// Handler is the projection's batch handler.
func Handler(b *guest.Batch) error {
	for b.Next() {
		ev := b.Event()
		if len(ev.PartitionKey) == 0 {
			return fmt.Errorf("count: event seq %s has an empty partition key", ev.Seq)
		}
		c, _ := counts.Get(b, ev.PartitionKey)
		c.N++
	}
	return nil
}
