// Package count is the smallest projection example: the number of events per partition key,
// kept in collection "counts" as {"count":N} under the partition key. Its Handler runs in
// WebAssembly (./go, built as build/wasm/count-go.wasm) and natively through guest.Native; the
// AssemblyScript version (./as) writes byte-identical documents.
package count

import (
	"fmt"

	"github.com/projhost/projhost/wasmabi/guest"
)

// Collection is the collection the handler writes.
const Collection = "counts"

var docBuf []byte

// Handler is the projection's batch handler.
func Handler(b *guest.Batch) error {
	for b.Next() {
		ev := b.Event()
		if len(ev.PartitionKey) == 0 {
			return fmt.Errorf("count: event seq %s has an empty partition key", ev.Seq)
		}
		var n int64
		if doc, ok := b.Read(Collection, ev.PartitionKey); ok {
			if n, ok = guest.JSONInt(doc, "count"); !ok {
				return fmt.Errorf("count: stored document %s/%s has no integer \"count\": %.200s", Collection, ev.PartitionKey, doc)
			}
		}
		o := guest.NewObject(docBuf[:0])
		o.Int("count", n+1)
		docBuf = o.Bytes()
		b.Put(Collection, ev.PartitionKey, docBuf)
	}
	return nil
}
