package host

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/wasmabi"
)

// counter is a NativeGuest written against the ABI directly: each event adds one to the
// document counts/<partition key> ({"n":N}), read through the read import with a 4-byte
// buffer first (the n > buf_cap retry). An event whose data is "fail", "panic" or "bad"
// fails the batch, panics, or writes a document that is not JSON.
type counter struct {
	reads int
	w     wasmabi.OutputWriter
	n     map[string]int // this batch's counts, read once per key
}

func (c *counter) HandleBatch(batch []byte, imp NativeImports) ([]byte, string) {
	r, err := wasmabi.NewBatchReader(batch)
	if err != nil {
		return nil, err.Error()
	}
	c.w.Reset()
	c.n = map[string]int{}
	var ev wasmabi.Event
	for r.Next(&ev) {
		switch string(ev.Data) {
		case "fail":
			return nil, "the event says fail"
		case "panic":
			panic("the event says panic")
		case "bad":
			c.w.Put("counts", string(ev.PartitionKey), []byte("{not json"))
			continue
		}
		k := string(ev.PartitionKey)
		n, ok := c.n[k]
		if !ok {
			buf := make([]byte, 4)
			l := imp.Read([]byte("counts"), ev.PartitionKey, buf)
			if l > len(buf) {
				buf = make([]byte, l)
				l = imp.Read([]byte("counts"), ev.PartitionKey, buf)
			}
			c.reads++
			if l >= 0 {
				s := strings.TrimSuffix(strings.TrimPrefix(string(buf[:l]), `{"n":`), "}")
				if n, err = strconv.Atoi(s); err != nil {
					return nil, fmt.Sprintf("document %q: %v", buf[:l], err)
				}
			}
		}
		c.n[k] = n + 1
		c.w.Put("counts", k, fmt.Appendf(nil, `{"n":%d}`, n+1))
	}
	if err := r.Err(); err != nil {
		return nil, err.Error()
	}
	return c.w.Buf, ""
}

// failingReader is a read model that cannot be read.
type failingReader struct{}

func (failingReader) ReadDoc(context.Context, string, []byte) ([]byte, bool, error) {
	return nil, false, errors.New("store unreachable")
}

// TestNativeModule: a native guest runs through Handle as an instance does: the batch encoded,
// reads served by the DocReader (the retry from the last lookup), the output validated and
// copied; its failures are the instance's (ErrHandlerFailed keeps it, a panic is ErrTrap and
// a bad document ErrBadOutput, each making a new guest; a failing read model is an
// infrastructure error); the module is trusted and Close ends its handlers.
func TestNativeModule(t *testing.T) {
	var made []*counter
	m := NewNativeModule("counter", func(shard string) NativeGuest {
		if shard != "s1" {
			t.Errorf("guest made for shard %q", shard)
		}
		c := &counter{}
		made = append(made, c)
		return c
	}, nil)
	if m.Name() != "counter" || !m.Trusted() {
		t.Fatalf("name %q, trusted %v", m.Name(), m.Trusted())
	}
	ctx := context.Background()
	h := m.NewHandler("s1")
	defer h.Close(ctx)
	rm := &countingReader{MemReadModel: NewMemReadModel()}

	muts, err := h.Handle(ctx, evs("s1", 1, "A", "x", "B", "x", "A", "x"), rm)
	want := []event.Mutation{put("counts", "A", `{"n":1}`), put("counts", "B", `{"n":1}`), put("counts", "A", `{"n":2}`)}
	if err != nil || !reflect.DeepEqual(muts, want) {
		t.Fatalf("batch 1: %q, %v; want %q", muts, err, want)
	}
	rm.Apply(muts)
	rm.calls = 0
	// A's document ({"n":2}) is longer than the 4-byte buffer: read again, from the last lookup.
	muts2, err := h.Handle(ctx, evs("s1", 4, "A", "x", "C", "x"), rm)
	want2 := []event.Mutation{put("counts", "A", `{"n":3}`), put("counts", "C", `{"n":1}`)}
	if err != nil || !reflect.DeepEqual(muts2, want2) {
		t.Fatalf("batch 2: %q, %v; want %q", muts2, err, want2)
	}
	if rm.calls != 2 || made[0].reads != 4 {
		t.Errorf("batch 2: %d ReadDoc calls, %d guest reads in all; want 2 and 4", rm.calls, made[0].reads)
	}
	if !reflect.DeepEqual(muts, want) {
		t.Errorf("batch 1's mutations changed with batch 2: %q", muts)
	}

	var he *HandlerError
	_, err = h.Handle(ctx, evs("s1", 6, "A", "fail"), rm)
	if !errors.As(err, &he) || !errors.Is(err, ErrHandlerFailed) || he.Poisoned || !strings.Contains(he.Message, "the event says fail") {
		t.Fatalf("fail: %v", err)
	}
	if h.Instances() != 1 {
		t.Fatalf("after a failed batch: %d guests, want 1", h.Instances())
	}
	_, err = h.Handle(ctx, evs("s1", 6, "A", "panic"), rm)
	if !errors.As(err, &he) || !errors.Is(err, ErrTrap) || !he.Poisoned || !strings.Contains(he.Message, "panicked: the event says panic") || he.FirstSeq != "6" {
		t.Fatalf("panic: %v", err)
	}
	_, err = h.Handle(ctx, evs("s1", 6, "A", "bad"), rm)
	if !errors.As(err, &he) || !errors.Is(err, ErrBadOutput) || !he.Poisoned || !strings.Contains(he.Message, "not a JSON object") {
		t.Fatalf("bad output: %v", err)
	}
	_, err = h.Handle(ctx, evs("s1", 6, "Z", "x"), failingReader{})
	if err == nil || errors.As(err, &he) || !strings.Contains(err.Error(), "store unreachable") {
		t.Fatalf("failing read model: %v, want its error, not a HandlerError", err)
	}
	muts3, err := h.Handle(ctx, evs("s1", 6, "A", "x"), rm)
	if err != nil || !reflect.DeepEqual(muts3, []event.Mutation{put("counts", "A", `{"n":3}`)}) {
		t.Fatalf("after the failures: %q, %v", muts3, err)
	}
	if h.Instances() != 4 || len(made) != 4 || h.MemorySize() != 0 {
		t.Errorf("%d instances, %d guests made, memory %d; want 4, 4, 0", h.Instances(), len(made), h.MemorySize())
	}
	if _, err := h.Handle(ctx, evs("s2", 7, "A", "x"), rm); err == nil {
		t.Error("an event of another shard was handled")
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(ctx, evs("s1", 7, "A", "x"), rm); !errors.Is(err, ErrClosed) {
		t.Errorf("after the module's Close: %v, want ErrClosed", err)
	}
}

// splitReader is a MemoryDocReader with some documents in memory and the others in a "store"
// that only ReadDoc reaches; it counts the calls of each.
type splitReader struct {
	memory, store        map[string][]byte // by key
	memCalls, storeCalls int
}

func (r *splitReader) ReadDocFromMemory(_ string, key []byte) ([]byte, bool, bool) {
	r.memCalls++
	d, ok := r.memory[string(key)]
	return d, ok, ok
}

func (r *splitReader) ReadDoc(_ context.Context, _ string, key []byte) ([]byte, bool, error) {
	r.storeCalls++
	d, ok := r.store[string(key)]
	return d, ok, nil
}

// TestMemoryDocReader: a read a MemoryDocReader answers from memory does not reach ReadDoc; the
// others do, and both answers reach the guest.
func TestMemoryDocReader(t *testing.T) {
	m := NewNativeModule("counter", func(string) NativeGuest { return &counter{} }, nil)
	h := m.NewHandler("s1")
	defer h.Close(context.Background())
	r := &splitReader{memory: map[string][]byte{"A": []byte(`{"n":10}`)}, store: map[string][]byte{"B": []byte(`{"n":20}`)}}
	muts, err := h.Handle(context.Background(), evs("s1", 1, "A", "x", "B", "x", "C", "x"), r)
	want := []event.Mutation{put("counts", "A", `{"n":11}`), put("counts", "B", `{"n":21}`), put("counts", "C", `{"n":1}`)}
	if err != nil || !reflect.DeepEqual(muts, want) {
		t.Fatalf("mutations %q, %v; want %q", muts, err, want)
	}
	if r.memCalls != 3 || r.storeCalls != 2 {
		t.Errorf("%d reads from memory, %d from the store; want 3 (A, B, C) and 2 (B, C)", r.memCalls, r.storeCalls)
	}
}

// indexer is a NativeGuest that registers fields with the field import (batch 1 registers
// names, from register) and records, per batch, the field count and each event's indexed
// values: "-" for an event without an index, else the texts of its fields ("_" absent, a
// trailing "!" escaped).
type indexer struct {
	register []string
	slots    []int
	batches  [][]string
	fields   []int
}

func (g *indexer) HandleBatch(batch []byte, imp NativeImports) ([]byte, string) {
	r, err := wasmabi.NewBatchReader(batch)
	if err != nil {
		return nil, err.Error()
	}
	var seen []string
	var ev wasmabi.Event
	for r.Next(&ev) {
		if string(ev.Data) == "panic" {
			panic("the event says panic")
		}
		if ev.Index == nil {
			seen = append(seen, "-")
			continue
		}
		var vals []string
		for i := range r.Fields() {
			start, end, esc, ok := wasmabi.FieldEntry(ev.Index, i)
			switch {
			case !ok:
				vals = append(vals, "_")
			case esc:
				vals = append(vals, string(ev.Data[start:end])+"!")
			default:
				vals = append(vals, string(ev.Data[start:end]))
			}
		}
		seen = append(seen, strings.Join(vals, " "))
	}
	if err := r.Err(); err != nil {
		return nil, err.Error()
	}
	g.batches = append(g.batches, seen)
	g.fields = append(g.fields, r.Fields())
	for _, n := range g.register {
		g.slots = append(g.slots, imp.Field([]byte(n)))
	}
	g.register = nil
	return nil, ""
}

// TestNativeFieldIndex: the field import registers names (a slot each, the same slot again, -1
// for a refused name or past MaxIndexedFields), later batches carry the index of the
// registered names (not the batch registering them), data the document rule refuses is not
// indexed, and a new guest starts with no registrations.
func TestNativeFieldIndex(t *testing.T) {
	var made []*indexer
	register := []string{"delay", "origin", "delay", "", strings.Repeat("n", wasmabi.MaxFieldNameLen+1), "\xff"}
	for i := 2; i < wasmabi.MaxIndexedFields; i++ {
		register = append(register, fmt.Sprintf("f%d", i))
	}
	register = append(register, "one too many", strings.Repeat("n", wasmabi.MaxFieldNameLen))
	m := NewNativeModule("indexer", func(string) NativeGuest {
		g := &indexer{}
		if len(made) == 0 {
			g.register = register
		}
		made = append(made, g)
		return g
	}, nil)
	ctx := context.Background()
	h := m.NewHandler("s1")
	defer h.Close(ctx)
	rm := NewMemReadModel()
	data := []string{"A", `{"delay":5,"origin":"DTW","f2":[1,{"delay":7}]}`, "B", "not json", "C", `{"origin":"O\"H"}`, "D", `{"delay":1,"delay":2}`}
	for b := 0; b < 2; b++ {
		if _, err := h.Handle(ctx, evs("s1", 1+4*b, data...), rm); err != nil {
			t.Fatalf("batch %d: %v", b+1, err)
		}
	}
	g := made[0]
	wantSlots := []int{0, 1, 0, -1, -1, -1}
	for i := 2; i < wasmabi.MaxIndexedFields; i++ {
		wantSlots = append(wantSlots, i)
	}
	wantSlots = append(wantSlots, -1, -1)
	if !reflect.DeepEqual(g.slots, wantSlots) {
		t.Fatalf("slots %v, want %v", g.slots, wantSlots)
	}
	rest := strings.TrimSpace(strings.Repeat(" _", wasmabi.MaxIndexedFields-3))
	want := [][]string{{"-", "-", "-", "-"}, {"5 \"DTW\" [1,{\"delay\":7}] " + rest, "-", "_ \"O\\\"H\"! _ " + rest, "-"}}
	if !reflect.DeepEqual(g.fields, []int{0, wasmabi.MaxIndexedFields}) || !reflect.DeepEqual(g.batches, want) {
		t.Fatalf("fields %v, batches %q; want [0 64], %q", g.fields, g.batches, want)
	}

	// A panic discards the guest: the next one has registered nothing, so its batch has no index.
	if _, err := h.Handle(ctx, evs("s1", 9, "A", "panic"), rm); !errors.Is(err, ErrTrap) {
		t.Fatalf("panic: %v", err)
	}
	if _, err := h.Handle(ctx, evs("s1", 10, data[:2]...), rm); err != nil {
		t.Fatal(err)
	}
	if len(made) != 2 || !reflect.DeepEqual(made[1].fields, []int{0}) || !reflect.DeepEqual(made[1].batches, [][]string{{"-"}}) {
		t.Fatalf("the new guest: %d guests, fields %v, batches %q", len(made), made[1].fields, made[1].batches)
	}
}
