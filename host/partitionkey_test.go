package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/wasmabi"
)

// TestPartitionKeyLimit: every partition key Kinesis accepts (up to 256 characters, whatever
// their UTF-8 width: up to 1024 bytes) reaches real handlers intact, through the WAT echo module,
// the Go guest SDK (count-go) and the AssemblyScript library (count-as), which store a document
// under it and read it back in the next call; a key over 1024 bytes is refused before the guest
// runs, as wasmabi.ErrMalformed (the core's malformed_event), not as the handler's fault, and
// the handler goes on working.
func TestPartitionKeyLimit(t *testing.T) {
	keys := []string{
		"k",
		strings.Repeat("k", 256),
		strings.Repeat("é", 256), // 512 bytes
		strings.Repeat("✈", 256), // 768 bytes
		strings.Repeat("😀", 256), // 1024 bytes
	}
	if n := len(keys[len(keys)-1]); n != wasmabi.MaxKeyLen {
		t.Fatalf("longest key is %d bytes, want %d", n, wasmabi.MaxKeyLen)
	}
	batch := make([]event.Event, len(keys))
	for i, k := range keys {
		batch[i] = event.Event{ShardID: "s1", Seq: fmt.Sprint(i + 1), PartitionKey: k, Data: []byte(fmt.Sprintf(`{"i":%d}`, i))}
	}
	over := []struct {
		what, key string
		bytes     int
	}{
		{"257 characters of 4 bytes", strings.Repeat("😀", 257), 1028},
		{"1025 bytes", strings.Repeat("😀", 256) + "k", 1025},
	}
	ctx := context.Background()
	for _, name := range append([]string{testwasm.Echo, testwasm.CountGo, testwasm.CountAS}, testwasm.TinyGoModules(t, testwasm.CountTinyGo)...) {
		t.Run(name, func(t *testing.T) {
			wasm, err := os.ReadFile(testwasm.Path(t, name))
			if err != nil {
				t.Fatal(err)
			}
			rt, _ := newTestRuntime(t)
			h := load(t, rt, name, wasm).NewHandler("s1")
			defer h.Close(ctx)
			rm := NewMemReadModel()
			// Twice: count reads the document it wrote in the first call (projhost.read with
			// the long keys) and writes 2.
			for call := 1; call <= 2; call++ {
				muts, err := h.Handle(ctx, batch, rm)
				if err != nil {
					t.Fatalf("call %d: %v", call, err)
				}
				if len(muts) != len(keys) {
					t.Fatalf("call %d: %d mutations, want %d: %q", call, len(muts), len(keys), muts)
				}
				for i, k := range keys {
					coll, doc := "counts", fmt.Sprintf(`{"count":%d}`, call)
					if name == testwasm.Echo {
						coll, doc = "c", fmt.Sprintf(`{"i":%d}`, i)
					}
					if m := muts[i]; m.Collection != coll || m.Key != k || string(m.Doc) != doc {
						t.Errorf("call %d: mutation %d = %s/%.20q… (%d bytes) %s, want %s/%.20q… (%d bytes) %s",
							call, i, m.Collection, m.Key, len(m.Key), m.Doc, coll, k, len(k), doc)
					}
				}
				rm.Apply(muts)
			}
			for _, o := range over {
				long := []event.Event{{ShardID: "s1", Seq: "9", PartitionKey: o.key, Data: []byte(`{}`)}}
				_, err := h.Handle(ctx, long, rm)
				want := fmt.Sprintf("partition key of %d bytes exceeds 1024 bytes (256 characters of up to 4 UTF-8 bytes each", o.bytes)
				if !errors.Is(err, wasmabi.ErrMalformed) || !strings.Contains(err.Error(), want) {
					t.Fatalf("%s: err = %v, want ErrMalformed containing %q", o.what, err, want)
				}
				var he *HandlerError
				if errors.As(err, &he) {
					t.Fatalf("%s: an event the ABI cannot carry is reported as the handler's fault: %v", o.what, err)
				}
			}
			if _, err := h.Handle(ctx, batch[len(batch)-1:], rm); err != nil {
				t.Fatalf("after the refused events: %v", err)
			}
		})
	}
}

// TestLongestSequenceNumber: a sequence number of 129 digits (wasmabi.MaxSeqLen, the Kinesis
// API's pattern 0|([1-9]\d{0,128})) reaches the handlers of both SDKs, which take the batch.
func TestLongestSequenceNumber(t *testing.T) {
	seq := "1" + strings.Repeat("0", wasmabi.MaxSeqLen-1)
	batch := []event.Event{{ShardID: "s1", Seq: seq, PartitionKey: "k", Data: []byte(`{"i":1}`)}}
	ctx := context.Background()
	for _, name := range append([]string{testwasm.CountGo, testwasm.CountAS}, testwasm.TinyGoModules(t, testwasm.CountTinyGo)...) {
		t.Run(name, func(t *testing.T) {
			wasm, err := os.ReadFile(testwasm.Path(t, name))
			if err != nil {
				t.Fatal(err)
			}
			rt, _ := newTestRuntime(t)
			h := load(t, rt, name, wasm).NewHandler("s1")
			defer h.Close(ctx)
			muts, err := h.Handle(ctx, batch, NewMemReadModel())
			if err != nil {
				t.Fatal(err)
			}
			if len(muts) != 1 || muts[0].Key != "k" || string(muts[0].Doc) != `{"count":1}` {
				t.Fatalf("mutations %q", muts)
			}
		})
	}
}
