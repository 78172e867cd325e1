package host

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/wasmabi"
)

// TestOutputLimits: an output of wasmabi.MaxOutputMutations mutations is taken, one more is
// bad output naming the limit, and the instance is replaced.
func TestOutputLimits(t *testing.T) {
	rt, _ := newTestRuntime(t, WithMemoryLimitPages(1024))
	h := load(t, rt, "fanout", fixture(t, testwasm.Fanout)).NewHandler("s1")
	defer h.Close(context.Background())
	ctx := context.Background()
	per := wasmabi.MaxOutputMutations / 100 // fanout writes 100 puts per byte of event data
	muts, err := h.Handle(ctx, evs("s1", 1, "k", strings.Repeat("x", per)), NewMemReadModel())
	if err != nil || len(muts) != wasmabi.MaxOutputMutations {
		t.Fatalf("output of %d mutations: got %d, %v", wasmabi.MaxOutputMutations, len(muts), err)
	}
	_, err = h.Handle(ctx, evs("s1", 2, "k", strings.Repeat("x", per/2), "k", strings.Repeat("x", per/2+1)), NewMemReadModel())
	var he *HandlerError
	if !errors.As(err, &he) || !errors.Is(err, ErrBadOutput) || !he.Poisoned || !he.TooLarge ||
		!strings.Contains(he.Message, "output of 50100 mutations exceeds the limit of 50000 per handler call") ||
		!strings.Contains(he.Message, "--batch-size") {
		t.Fatalf("output of 50100 mutations: err = %v, want ErrBadOutput naming the limit", err)
	}
	if h.Instances() != 1 {
		t.Fatalf("instances = %d before the next call", h.Instances())
	}
	if _, err := h.Handle(ctx, evs("s1", 4, "k", "x"), NewMemReadModel()); err != nil || h.Instances() != 2 {
		t.Fatalf("after the refused output: %v, %d instances (want a fresh one)", err, h.Instances())
	}
}

// TestOutputByteLimit: decodeMutations refuses an output over wasmabi.MaxOutputBytes before
// copying it, and takes one at the limit.
func TestOutputByteLimit(t *testing.T) {
	doc := append(append([]byte(`{"s":"`), bytes.Repeat([]byte("x"), wasmabi.MaxDocLen-8)...), `"}`...)
	var w wasmabi.OutputWriter
	w.Reset()
	for len(w.Buf)+len(doc)+20 <= wasmabi.MaxOutputBytes {
		w.Put("c", "k", doc)
	}
	if _, err := decodeMutations(w.Buf); err != nil {
		t.Fatalf("output of %d bytes: %v", len(w.Buf), err)
	}
	w.Put("c", "k", doc)
	_, err := decodeMutations(w.Buf)
	if !errors.Is(err, wasmabi.ErrMalformed) || !strings.Contains(err.Error(), "exceeds the limit of 33554432 bytes per handler call") {
		t.Fatalf("output of %d bytes: err = %v", len(w.Buf), err)
	}
}

// TestDocumentRule: documents breaking the document rule (event.CheckDoc) are the handler's bad
// output whatever the store, among them the five of issue 8 only DynamoDB refused; valid ones
// at the limits pass.
func TestDocumentRule(t *testing.T) {
	rt, _ := newTestRuntime(t)
	h := load(t, rt, "echo", fixture(t, testwasm.Echo)).NewHandler("s1")
	defer h.Close(context.Background())
	tests := []struct {
		name, doc, want string // want "": accepted
	}{
		{"flight", `{"flights":3,"total_delay":-17.5}`, ""},
		{"38 digits", `{"x":12345678901234567890123456789012345678}`, ""},
		{"1e125", `{"x":1e125}`, ""},
		{"31 levels", strings.Repeat(`{"a":`, 30) + `1` + strings.Repeat(`}`, 30), ""},
		{"1e300", `{"x":1e300}`, `at .x: number "1e300" is outside the range 1E-130 .. 9.99E+125`},
		{"45-digit integer", `{"x":123456789012345678901234567890123456789012345}`, "at .x: number \"123456789012345678901234567890123456789012345\" has 45 significant digits"},
		{"40 levels", strings.Repeat(`{"a":`, 39) + `1` + strings.Repeat(`}`, 39), "at " + strings.Repeat(".a", 31) + ": objects and arrays nested more than 31 deep"},
		{"empty field name", `{"":1}`, "at .: an empty object key"},
		{"duplicate field names", `{"a":1,"b":2,"a":3}`, "at .a: the key appears twice in one object"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			muts, err := h.Handle(context.Background(), evs("s1", i+1, "k", tt.doc), NewMemReadModel())
			if tt.want == "" {
				if err != nil || len(muts) != 1 || string(muts[0].Doc) != tt.doc {
					t.Fatalf("Handle = %q, %v; want the document back", muts, err)
				}
				return
			}
			var he *HandlerError
			if !errors.As(err, &he) || !errors.Is(err, ErrBadOutput) || !strings.Contains(he.Message, "mutation 0 (c/k): bad document: "+tt.want) {
				t.Fatalf("Handle = %v, want ErrBadOutput with %q", err, tt.want)
			}
		})
	}
}
