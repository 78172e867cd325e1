package host

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"

	"github.com/projhost/projhost/wasmabi"
)

// countingReader wraps a MemReadModel and counts its lookups (ReadDoc and ReadDocFromMemory
// calls).
type countingReader struct {
	*MemReadModel
	calls int
	err   error
}

func (c *countingReader) ReadDoc(ctx context.Context, coll string, key []byte) ([]byte, bool, error) {
	c.calls++
	if c.err != nil {
		return nil, false, c.err
	}
	return c.MemReadModel.ReadDoc(ctx, coll, key)
}

func (c *countingReader) ReadDocFromMemory(coll string, key []byte) ([]byte, bool, bool) {
	if c.err != nil {
		return nil, false, false // ReadDoc fails
	}
	c.calls++
	return c.MemReadModel.ReadDocFromMemory(coll, key)
}

func put(coll, key, doc string) event.Mutation {
	return event.Mutation{Collection: coll, Key: key, Doc: []byte(doc)}
}

func TestGoodModuleReadsAndWrites(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			rt, logs := newTestRuntime(t)
			m := load(t, rt, "good", wat(t, "good"), WithTrusted(trusted))
			if m.Trusted() != trusted || m.Name() != "good" {
				t.Fatalf("module trusted=%v name=%q", m.Trusted(), m.Name())
			}
			h := m.NewHandler("s1")
			defer h.Close(context.Background())
			ctx := context.Background()
			rm := &countingReader{MemReadModel: NewMemReadModel()}

			// Batch 1: nothing stored yet. The read of A at the third event does not see the
			// first event's write: the host learns a call's output only when it returns (ABI §5).
			muts, err := h.Handle(ctx, evs("s1", 1, "A", `{"v":1}`, "B", `{"v":2}`, "A", `{"v":3}`), rm)
			if err != nil {
				t.Fatal(err)
			}
			want := []event.Mutation{put("events", "A", `{"v":1}`), put("events", "B", `{"v":2}`), put("events", "A", `{"v":3}`)}
			if !reflect.DeepEqual(muts, want) {
				t.Fatalf("batch 1 mutations:\n got %q\nwant %q", muts, want)
			}
			if rm.calls != 3 {
				t.Errorf("batch 1: %d reads, want 3", rm.calls)
			}
			rm.Apply(muts)

			// Batch 2: the stored documents (longer than the guest's first 8-byte buffer) are read
			// with the n > buf_cap retry, served from the host's last-lookup cache.
			rm.calls = 0
			muts2, err := h.Handle(ctx, evs("s1", 4, "A", `{"v":4}`, "C", `{"v":5}`), rm)
			if err != nil {
				t.Fatal(err)
			}
			want2 := []event.Mutation{put("prev", "A", `{"v":3}`), put("events", "A", `{"v":4}`), put("events", "C", `{"v":5}`)}
			if !reflect.DeepEqual(muts2, want2) {
				t.Fatalf("batch 2 mutations:\n got %q\nwant %q", muts2, want2)
			}
			if rm.calls != 2 {
				t.Errorf("batch 2: %d ReadDoc calls for 2 events (3 guest reads), want 2", rm.calls)
			}
			// The first batch's mutations are copies, untouched by the guest running again.
			if !reflect.DeepEqual(muts, want) {
				t.Errorf("batch 1 mutations changed after batch 2: %q", muts)
			}
			if h.Instances() != 1 {
				t.Errorf("instances = %d, want 1", h.Instances())
			}
			recs := logs.find("good: batch")
			if len(recs) != 2 || recs[0].Level.String() != "INFO" || recs[0].Attrs["module"] != "good" || recs[0].Attrs["shard"] != "s1" || recs[0].Attrs["source"] != "guest" {
				t.Errorf("guest log records = %+v", recs)
			}
		})
	}
}

func TestHandleInputErrors(t *testing.T) {
	rt, _ := newTestRuntime(t)
	m := load(t, rt, "good", wat(t, "good"))
	h := m.NewHandler("s1")
	ctx := context.Background()
	rm := NewMemReadModel()

	if muts, err := h.Handle(ctx, nil, rm); muts != nil || err != nil {
		t.Errorf("empty batch: %v, %v", muts, err)
	}
	if _, err := h.Handle(ctx, evs("s2", 1, "A", `{}`), rm); err == nil || !strings.Contains(err.Error(), `is of shard "s2", the handler's shard is "s1"`) {
		t.Errorf("foreign shard: %v", err)
	}
	long := []event.Event{{ShardID: "s1", Seq: "1", PartitionKey: strings.Repeat("k", wasmabi.MaxKeyLen+1), Data: []byte(`{}`)}}
	if _, err := h.Handle(ctx, long, rm); !errors.Is(err, wasmabi.ErrMalformed) {
		t.Errorf("oversized partition key: %v", err)
	}
	if _, err := h.Handle(ctx, evs("s1", 1, "A", `{}`), nil); err == nil {
		t.Error("nil reader accepted")
	}
	// Data that is not a JSON object comes back as a put of it: bad output.
	if _, err := h.Handle(ctx, evs("s1", 1, "A", `[1,2]`), rm); !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), "mutation 0 (events/A): bad document: not a JSON object") {
		t.Errorf("non-object document: %v", err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(ctx, evs("s1", 1, "A", `{}`), rm); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestReaderError: a failing DocReader is an infrastructure error (not a HandlerError) and the
// interrupted instance is replaced.
func TestReaderError(t *testing.T) {
	rt, _ := newTestRuntime(t)
	m := load(t, rt, "good", wat(t, "good"))
	h := m.NewHandler("s1")
	defer h.Close(context.Background())
	boom := errors.New("dynamodb unavailable")
	rm := &countingReader{MemReadModel: NewMemReadModel(), err: boom}
	_, err := h.Handle(context.Background(), evs("s1", 1, "A", `{}`), rm)
	var he *HandlerError
	if !errors.Is(err, boom) || errors.As(err, &he) || !strings.Contains(err.Error(), "projhost.read events/A: dynamodb unavailable") {
		t.Fatalf("err = %v", err)
	}
	rm.err = nil
	if _, err := h.Handle(context.Background(), evs("s1", 2, "A", `{}`), rm); err != nil {
		t.Fatal(err)
	}
	if h.Instances() != 2 {
		t.Errorf("instances = %d, want 2", h.Instances())
	}
}

// TestConcurrentShards runs handlers of one module on several goroutines (run with -race).
func TestConcurrentShards(t *testing.T) {
	rt, _ := newTestRuntime(t)
	m := load(t, rt, "good", wat(t, "good"))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for s := 0; s < 4; s++ {
		shard := fmt.Sprintf("shard-%d", s)
		h := m.NewHandler(shard)
		for g := 0; g < 2; g++ { // two goroutines share one handler: calls are serialized
			wg.Add(1)
			go func() {
				defer wg.Done()
				rm := NewMemReadModel()
				for i := 0; i < 20; i++ {
					key := fmt.Sprintf("k%d", i%3)
					muts, err := h.Handle(context.Background(), evs(shard, i+1, key, fmt.Sprintf(`{"i":%d}`, i)), rm)
					if err != nil {
						errs <- err
						return
					}
					if got := muts[len(muts)-1]; got.Key != key || string(got.Doc) != fmt.Sprintf(`{"i":%d}`, i) {
						errs <- fmt.Errorf("%s: got %+v", shard, got)
						return
					}
					rm.Apply(muts)
				}
			}()
		}
		defer h.Close(context.Background())
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestDecodeMutations(t *testing.T) {
	var w wasmabi.OutputWriter
	w.Reset()
	w.Put("airports", "ORD", []byte(` {"n": 1}`))
	w.Delete("airports", "LAX")
	muts, err := decodeMutations(w.Buf)
	if err != nil {
		t.Fatal(err)
	}
	want := []event.Mutation{put("airports", "ORD", ` {"n": 1}`), {Collection: "airports", Key: "LAX"}}
	if !reflect.DeepEqual(muts, want) {
		t.Fatalf("got %q want %q", muts, want)
	}
	for i := range w.Buf {
		w.Buf[i] = 0xff // the result owns its bytes
	}
	if !reflect.DeepEqual(muts, want) {
		t.Fatalf("result aliases the guest buffer: %q", muts)
	}
	bad := []struct{ name, doc string }{{"array", `[1]`}, {"string", `"x"`}, {"broken", `{"a":`}, {"two values", `{} {}`}, {"empty", ``}}
	for _, b := range bad {
		w.Reset()
		w.Put("c", "k", []byte(b.doc))
		if _, err := decodeMutations(w.Buf); !errors.Is(err, wasmabi.ErrMalformed) {
			t.Errorf("%s: err = %v", b.name, err)
		}
	}
	if muts, err := decodeMutations(nil); muts != nil || err != nil {
		t.Errorf("empty output: %v %v", muts, err)
	}
}

func FuzzDecodeMutations(f *testing.F) {
	var w wasmabi.OutputWriter
	w.Reset()
	w.Put("c", "k", []byte(`{"a":[1,2,{"b":null}]}`))
	w.Delete("c.d-e_f", "ü")
	f.Add(w.Buf)
	f.Add([]byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		muts, err := decodeMutations(b)
		if err != nil {
			if !errors.Is(err, wasmabi.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		// Re-encoding what was decoded reproduces a valid output with the same mutations.
		var w wasmabi.OutputWriter
		w.Reset()
		for _, m := range muts {
			if !wasmabi.ValidCollection([]byte(m.Collection)) || !wasmabi.ValidDocKey([]byte(m.Key)) {
				t.Fatalf("invalid name accepted: %q", m)
			}
			if m.Doc == nil {
				w.Delete(m.Collection, m.Key)
			} else {
				if event.CheckDoc(m.Doc) != nil {
					t.Fatalf("document breaking the document rule accepted: %q", m.Doc)
				}
				w.Put(m.Collection, m.Key, m.Doc)
			}
		}
		again, err := decodeMutations(w.Buf)
		if err != nil || !reflect.DeepEqual(again, muts) {
			t.Fatalf("round trip: %v %q vs %q", err, again, muts)
		}
	})
}

// asString lays out an AssemblyScript string at ptr in mem (length in bytes at ptr-4).
func asString(mem []byte, ptr uint32, s string) {
	u := utf16.Encode([]rune(s))
	binary.LittleEndian.PutUint32(mem[ptr-4:], uint32(2*len(u)))
	for i, c := range u {
		binary.LittleEndian.PutUint16(mem[ptr+uint32(2*i):], c)
	}
}

func TestDecodeASString(t *testing.T) {
	mem := make([]byte, 256)
	asString(mem, 8, "boom 💥")
	asString(mem, 200, "x")
	binary.LittleEndian.PutUint32(mem[100:], 1000) // length past the end
	binary.LittleEndian.PutUint32(mem[150:], 3)    // odd length
	cases := []struct {
		ptr  uint32
		want string
		ok   bool
	}{{8, "boom 💥", true}, {200, "x", true}, {0, "", false}, {2, "", false}, {104, "", false}, {154, "", false}, {300, "", false}}
	for _, c := range cases {
		got, ok := decodeASString(mem, c.ptr)
		if got != c.want || ok != c.ok {
			t.Errorf("ptr %d: got %q, %v want %q, %v", c.ptr, got, ok, c.want, c.ok)
		}
	}
	big := make([]byte, 4+2*maxASStringBytes+100)
	asString(big, 4, strings.Repeat("a", maxASStringBytes))
	if got, ok := decodeASString(big, 4); !ok || got != strings.Repeat("a", maxASStringBytes/2)+"..." {
		t.Errorf("long string: %v %d bytes", ok, len(got))
	}
}

func FuzzDecodeASString(f *testing.F) {
	mem := make([]byte, 64)
	asString(mem, 8, "abort message")
	f.Add(mem, uint32(8))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0xd8}, uint32(4))
	f.Fuzz(func(t *testing.T, mem []byte, ptr uint32) {
		s, ok := decodeASString(mem, ptr)
		if !ok && s != "" {
			t.Fatalf("failed decode returned %q", s)
		}
		if strings.ContainsRune(s, 0) {
			t.Fatalf("NUL in %q", s)
		}
	})
}

// TestClosedRuntime: a handler whose runtime was closed reports ErrClosed, not a guest fault.
func TestClosedRuntime(t *testing.T) {
	rt, _ := newTestRuntime(t)
	m := load(t, rt, "good", wat(t, "good"))
	used, fresh := m.NewHandler("s1"), m.NewHandler("s2")
	if _, err := used.Handle(context.Background(), evs("s1", 1, "A", `{}`), NewMemReadModel()); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Handler{used, fresh} {
		_, err := h.Handle(context.Background(), evs(h.shard, 2, "A", `{}`), NewMemReadModel())
		var he *HandlerError
		if !errors.Is(err, ErrClosed) || errors.As(err, &he) {
			t.Errorf("%s: err = %v, want ErrClosed", h.shard, err)
		}
	}
	if _, err := rt.Load(context.Background(), "good", wat(t, "good")); !errors.Is(err, ErrClosed) {
		t.Errorf("Load after Close: %v", err)
	}
}

// slowReader is a read model whose every read takes d (a slow DynamoDB; not a MemoryDocReader).
type slowReader struct {
	rm *MemReadModel
	d  time.Duration
}

func (s slowReader) ReadDoc(ctx context.Context, coll string, key []byte) ([]byte, bool, error) {
	time.Sleep(s.d)
	return s.rm.ReadDoc(ctx, coll, key)
}

// TestDeadlineExcludesReads: the batch deadline measures the guest's time, not the host's: a
// batch of flightdelays whose 200+ reads take 4 ms each (0.8 s or more) passes a 500 ms deadline
// (the guest itself needs ~10 ms; the margin absorbs a loaded machine).
func TestDeadlineExcludesReads(t *testing.T) {
	rt, _ := newTestRuntime(t)
	wasm, err := os.ReadFile(testwasm.Path(t, "flightdelays-as"))
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, rt, "fd", wasm, WithBatchDeadline(500*time.Millisecond))
	if !m.interruptible {
		t.Fatal("flightdelays-as was not instrumented")
	}
	f, err := os.Open(flightcheck.DataPath("flights-2k.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := ReadEvents(f, "origin")
	if err != nil {
		t.Fatal(err)
	}
	h := m.NewHandler(TestShardID)
	defer h.Close(context.Background())
	rm := slowReader{rm: NewMemReadModel(), d: 4 * time.Millisecond}
	start := time.Now()
	muts, err := h.Handle(context.Background(), events, rm)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if el := time.Since(start); el < 800*time.Millisecond {
		t.Fatalf("the batch took %v: too fast to show that read time is excluded", el)
	}
	if len(muts) < 200 || h.Instances() != 1 {
		t.Fatalf("mutations = %d, instances = %d; want >= 200, 1", len(muts), h.Instances())
	}
}

// TestMemReadModelReadDoc: reads see what Apply wrote, deletes included, and do not allocate.
func TestMemReadModelReadDoc(t *testing.T) {
	rm := NewMemReadModel()
	rm.Apply([]event.Mutation{put("c", "a", `{"a":1}`), put("c", "b", `{"b":1}`), {Collection: "c", Key: "b"}})
	ctx := context.Background()
	for _, tt := range []struct {
		coll, key, doc string
		found          bool
	}{{"c", "a", `{"a":1}`, true}, {"c", "b", "", false}, {"d", "a", "", false}} {
		doc, found, err := rm.ReadDoc(ctx, tt.coll, []byte(tt.key))
		if err != nil || found != tt.found || string(doc) != tt.doc {
			t.Errorf("ReadDoc(%s, %s) = %s, %v, %v; want %s, %v", tt.coll, tt.key, doc, found, err, tt.doc, tt.found)
		}
	}
	key := []byte("a")
	if n := testing.AllocsPerRun(100, func() { rm.ReadDoc(ctx, "c", key) }); n != 0 {
		t.Errorf("ReadDoc allocates %v times, want 0", n)
	}
}
