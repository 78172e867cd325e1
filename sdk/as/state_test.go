package as_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/testwasm"
)

// The per-batch semantics of State and its interplay with Batch.read/put/delete, through the real
// host and testdata/stateprobe.ts (built as build/wasm/as-stateprobe.wasm): each event is one
// command, each batch's output must be the given mutations in that order.

// guestLogs collects the guest's log messages (slog records with source=guest).
type guestLogs struct {
	mu    sync.Mutex
	lines []string
}

func (g *guestLogs) Enabled(context.Context, slog.Level) bool { return true }
func (g *guestLogs) WithAttrs([]slog.Attr) slog.Handler       { return g }
func (g *guestLogs) WithGroup(string) slog.Handler            { return g }
func (g *guestLogs) Handle(_ context.Context, r slog.Record) error {
	guest := false
	r.Attrs(func(a slog.Attr) bool {
		guest = guest || (a.Key == "source" && a.Value.String() == "guest")
		return true
	})
	if guest {
		g.mu.Lock()
		g.lines = append(g.lines, r.Message)
		g.mu.Unlock()
	}
	return nil
}

func (g *guestLogs) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.lines
	g.lines = nil
	return l
}

// countingReader counts the host reads of each collection/key.
type countingReader struct {
	*host.MemReadModel
	reads map[string]int
}

func (c *countingReader) ReadDoc(ctx context.Context, coll string, key []byte) ([]byte, bool, error) {
	c.reads[coll+"/"+string(key)]++
	return c.MemReadModel.ReadDoc(ctx, coll, key)
}

// ReadDocFromMemory is the host's fast path for an in-memory read model (read and read_known).
func (c *countingReader) ReadDocFromMemory(coll string, key []byte) ([]byte, bool, bool) {
	c.reads[coll+"/"+string(key)]++
	return c.MemReadModel.ReadDocFromMemory(coll, key)
}

// loadStateProbe loads testdata/stateprobe.ts (build/wasm/as-stateprobe.wasm) into a runtime
// whose guest log lines go to logs; both are closed when the test ends.
func loadStateProbe(t *testing.T) (*host.Module, *guestLogs) {
	t.Helper()
	wasm, err := os.ReadFile(testwasm.Path(t, "as-stateprobe"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	logs := &guestLogs{}
	rt, err := host.NewRuntime(ctx, host.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	mod, err := rt.Load(ctx, "as-stateprobe", wasm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(ctx) })
	return mod, logs
}

type stateBatch struct {
	set     map[string]string // before the batch, someone else writes these documents of c ("": deletes)
	cmds    []string          // event data; the partition key is "p"
	want    []string          // mutations in order: "put COLL/KEY DOC" or "delete COLL/KEY"
	logs    []string          // guest log lines
	wantErr string            // a substring of the fail message instead
}

// stateKeepLimit is STATE_KEEP_LIMIT of sdk/as/index.ts.
const stateKeepLimit = 16384

func TestState(t *testing.T) {
	tests := []struct {
		name    string
		stored  map[string]string // key of collection c -> document
		batches []stateBatch
	}{
		{
			name:   "one write per key in first-touch order, decoded once",
			stored: map[string]string{"b": `{"n":10}`},
			batches: []stateBatch{{
				cmds: []string{`{"op":"inc","key":"a"}`, `{"op":"inc","key":"b"}`, `{"op":"inc","key":"a"}`,
					`{"op":"pair","a":"x","b":"y"}`, `{"op":"pk"}`, `{"op":"inc","key":"b","by":5}`, `{"op":"pair","a":"x","b":"y"}`},
				want: []string{`put c/a {"n":2}`, `put c/b {"n":16}`, `put c/x-y {"n":2}`, `put c/p {"n":1}`},
				logs: []string{"decodes=1"},
			}},
		},
		{
			name:   "escaped and non-ASCII keys",
			stored: map[string]string{"é-\"q\"": `{"n":1}`},
			batches: []stateBatch{{
				cmds: []string{`{"op":"pair","a":"\u00e9","b":"\"q\""}`, `{"op":"inc","key":"é-\"q\""}`},
				want: []string{`put c/é-"q" {"n":3}`},
				logs: []string{"decodes=1"},
			}},
		},
		{
			name: "integer key parts, a repeated getText of an escaped string",
			batches: []stateBatch{{
				cmds: []string{`{"op":"num","n":-42}`, `{"op":"text","key":"\u00e9\t\"x"}`, `{"op":"text","key":"\u00e9\t\"x"}`},
				want: []string{`put c/n-42/7 {"n":1}`, "put c/é\t\"x {\"n\":2}"},
				logs: []string{"decodes=0"},
			}},
		},
		{
			name: "a put before the first get is decoded (read-your-writes)",
			batches: []stateBatch{{
				cmds: []string{`{"op":"put","key":"k","n":5}`, `{"op":"inc","key":"k"}`},
				want: []string{`put c/k {"n":6}`},
				logs: []string{"decodes=1"},
			}},
		},
		{
			name:   "a read before the first get: one host read, decoded from the batch",
			stored: map[string]string{"k": `{"n":4}`},
			batches: []stateBatch{{
				cmds: []string{`{"op":"read","key":"k"}`, `{"op":"inc","key":"k"}`, `{"op":"read","key":"m"}`},
				want: []string{`put c/k {"n":5}`},
				logs: []string{`read k: {"n":4}`, "read m: none", "decodes=1"},
			}},
		},
		{
			name:   "delete, then get starts a new document",
			stored: map[string]string{"k": `{"n":3}`, "m": `{"n":3}`},
			batches: []stateBatch{{
				cmds: []string{`{"op":"inc","key":"k"}`, `{"op":"del","key":"k"}`, `{"op":"del","key":"m"}`, `{"op":"inc","key":"m"}`},
				want: []string{`delete c/k`, `put c/m {"n":1}`},
				logs: []string{"decodes=1"},
			}},
		},
		{
			name:   "found: false only at the get that creates a document, kept or decoded or not",
			stored: map[string]string{"s": `{"n":4}`},
			batches: []stateBatch{
				{cmds: []string{`{"op":"found","key":"a"}`, `{"op":"found","key":"a"}`, `{"op":"found","key":"s"}`, `{"op":"found","key":"e","coll":"e"}`},
					want: []string{`put c/a {"n":2}`, `put c/s {"n":5}`, `put e/e {"n":1}`},
					logs: []string{"found a: false", "found a: true", "found s: true", "found e: false", "decodes=1"}},
				{cmds: []string{`{"op":"found","key":"a"}`, `{"op":"found","key":"b"}`, `{"op":"found","key":"e","coll":"e"}`},
					want: []string{`put c/a {"n":3}`, `put c/b {"n":1}`, `put e/e {"n":2}`},
					logs: []string{"found a: true", "found b: false", "found e: true", "decodes=1"}},
			},
		},
		{
			name: "kept documents are reused, new keys start reset",
			batches: []stateBatch{
				{cmds: []string{`{"op":"inc","key":"a","by":7}`, `{"op":"inc","key":"b","by":9}`}, want: []string{`put c/a {"n":7}`, `put c/b {"n":9}`}, logs: []string{"decodes=0"}},
				{cmds: []string{`{"op":"inc","key":"b"}`, `{"op":"inc","key":"c"}`}, want: []string{`put c/b {"n":10}`, `put c/c {"n":1}`}, logs: []string{"decodes=0"}},
			},
		},
		{
			name:   "a second batch over the same keys decodes nothing",
			stored: map[string]string{"a": `{"n":5}`},
			batches: []stateBatch{
				{cmds: []string{`{"op":"inc","key":"a"}`, `{"op":"inc","key":"b"}`, `{"op":"decodes"}`},
					want: []string{`put c/a {"n":6}`, `put c/b {"n":1}`, `put stats/decodes {"n":1}`}, logs: []string{"decodes=1"}},
				{cmds: []string{`{"op":"inc","key":"a"}`, `{"op":"inc","key":"b","by":2}`, `{"op":"inc","key":"a"}`, `{"op":"decodes"}`},
					want: []string{`put c/a {"n":8}`, `put c/b {"n":3}`, `put stats/decodes {"n":0}`}, logs: []string{"decodes=0"}},
				{cmds: []string{`{"op":"inc","key":"b"}`, `{"op":"inc","key":"a"}`, `{"op":"decodes"}`},
					want: []string{`put c/b {"n":4}`, `put c/a {"n":9}`, `put stats/decodes {"n":0}`}, logs: []string{"decodes=0"}},
			},
		},
		{
			name: "a document someone else changed is decoded again",
			batches: []stateBatch{
				{cmds: []string{`{"op":"inc","key":"a"}`, `{"op":"inc","key":"b"}`, `{"op":"inc","key":"c"}`},
					want: []string{`put c/a {"n":1}`, `put c/b {"n":1}`, `put c/c {"n":1}`}, logs: []string{"decodes=0"}},
				{set: map[string]string{"a": `{"n":10}`, "b": `{"n":1,"x":0}`}, // b: the same n, other bytes
					cmds: []string{`{"op":"inc","key":"a"}`, `{"op":"inc","key":"b"}`, `{"op":"inc","key":"c"}`, `{"op":"decodes"}`},
					want: []string{`put c/a {"n":11}`, `put c/b {"n":2}`, `put c/c {"n":2}`, `put stats/decodes {"n":2}`}, logs: []string{"decodes=2"}},
			},
		},
		{
			name: "a Batch.put of a kept key is decoded",
			batches: []stateBatch{
				{cmds: []string{`{"op":"inc","key":"a"}`}, want: []string{`put c/a {"n":1}`}, logs: []string{"decodes=0"}},
				{cmds: []string{`{"op":"put","key":"a","n":7}`}, want: []string{`put c/a {"n":7}`}, logs: []string{"decodes=0"}},
				{cmds: []string{`{"op":"inc","key":"a"}`, `{"op":"decodes"}`}, want: []string{`put c/a {"n":8}`, `put stats/decodes {"n":1}`}, logs: []string{"decodes=1"}},
				{cmds: []string{`{"op":"put","key":"a","n":20}`, `{"op":"inc","key":"a"}`, `{"op":"decodes"}`},
					want: []string{`put c/a {"n":21}`, `put stats/decodes {"n":1}`}, logs: []string{"decodes=1"}},
				{cmds: []string{`{"op":"inc","key":"a"}`, `{"op":"decodes"}`}, want: []string{`put c/a {"n":22}`, `put stats/decodes {"n":0}`}, logs: []string{"decodes=0"}},
			},
		},
		{
			// Each failed batch changes kept documents first: were they kept, the next batch would
			// count on from the changed values.
			name: "a failed batch leaves no trace",
			batches: []stateBatch{
				{cmds: []string{`{"op":"inc","key":"a","by":3}`, `{"op":"inc","key":"b"}`}, want: []string{`put c/a {"n":3}`, `put c/b {"n":1}`}, logs: []string{"decodes=0"}},
				{cmds: []string{`{"op":"inc","key":"a"}`, `{"op":"inc","key":"b"}`, `{"op":"fail"}`}, wantErr: "failed on purpose at seq 5"},
				{cmds: []string{`{"op":"inc","key":"a"}`, `{"op":"inc","key":"b"}`, `{"op":"decodes"}`},
					want: []string{`put c/a {"n":4}`, `put c/b {"n":2}`, `put stats/decodes {"n":2}`}, logs: []string{"decodes=2"}},
				{cmds: []string{`{"op":"inc","key":"a","by":5}`, `{"op":"read","key":"a"}`}, wantErr: "guest: read c/a: the document is held by a State"},
				{cmds: []string{`{"op":"inc","key":"a"}`, `{"op":"decodes"}`}, want: []string{`put c/a {"n":5}`, `put stats/decodes {"n":1}`}, logs: []string{"decodes=1"}},
				// The output fails at z, before a's document is encoded.
				{cmds: []string{`{"op":"big","key":"z"}`, `{"op":"inc","key":"a","by":5}`}, wantErr: "guest: put c/z: document of 262160 bytes exceeds 262144"},
				{cmds: []string{`{"op":"inc","key":"a"}`, `{"op":"decodes"}`}, want: []string{`put c/a {"n":6}`, `put stats/decodes {"n":1}`}, logs: []string{"decodes=1"}},
			},
		},
		{
			name: "a document deleted since comes back new",
			batches: []stateBatch{
				{cmds: []string{`{"op":"inc","key":"a","by":5}`}, want: []string{`put c/a {"n":5}`}, logs: []string{"decodes=0"}},
				{set: map[string]string{"a": ""}, cmds: []string{`{"op":"inc","key":"a"}`}, want: []string{`put c/a {"n":1}`}, logs: []string{"decodes=0"}},
				{cmds: []string{`{"op":"inc","key":"a"}`}, want: []string{`put c/a {"n":2}`}, logs: []string{"decodes=0"}},
				{cmds: []string{`{"op":"del","key":"a"}`}, want: []string{`delete c/a`}, logs: []string{"decodes=0"}},
				{cmds: []string{`{"op":"inc","key":"a"}`}, want: []string{`put c/a {"n":1}`}, logs: []string{"decodes=0"}},
				{cmds: []string{`{"op":"inc","key":"a","by":3}`, `{"op":"del","key":"a"}`, `{"op":"inc","key":"a"}`}, want: []string{`put c/a {"n":1}`}, logs: []string{"decodes=0"}},
				{cmds: []string{`{"op":"inc","key":"a"}`}, want: []string{`put c/a {"n":2}`}, logs: []string{"decodes=0"}},
				// Deleted by the State, then stored again with the bytes it last wrote.
				{cmds: []string{`{"op":"del","key":"a"}`}, want: []string{`delete c/a`}, logs: []string{"decodes=0"}},
				{set: map[string]string{"a": `{"n":2}`}, cmds: []string{`{"op":"inc","key":"a"}`}, want: []string{`put c/a {"n":3}`}, logs: []string{"decodes=1"}},
			},
		},
		{
			name:   "decodeEveryBatch decodes every batch",
			stored: map[string]string{"a": `{"n":1}`},
			batches: []stateBatch{
				{cmds: []string{`{"op":"inc","key":"a","coll":"e"}`, `{"op":"inc","key":"a"}`}, want: []string{`put e/a {"n":1}`, `put c/a {"n":2}`}, logs: []string{"decodes=1"}},
				{cmds: []string{`{"op":"inc","key":"a","coll":"e"}`, `{"op":"inc","key":"a"}`}, want: []string{`put e/a {"n":2}`, `put c/a {"n":3}`}, logs: []string{"decodes=1"}},
				{cmds: []string{`{"op":"inc","key":"a","coll":"e"}`, `{"op":"inc","key":"a"}`}, want: []string{`put e/a {"n":3}`, `put c/a {"n":4}`}, logs: []string{"decodes=1"}},
			},
		},
		{
			name: "a failed batch writes nothing; the next one starts clean",
			batches: []stateBatch{
				{cmds: []string{`{"op":"inc","key":"k"}`, `{"op":"fail"}`}, wantErr: "failed on purpose at seq 2"},
				{cmds: []string{`{"op":"inc","key":"k"}`}, want: []string{`put c/k {"n":1}`}, logs: []string{"decodes=0"}},
			},
		},
		{
			name:    "read of a key a State holds",
			batches: []stateBatch{{cmds: []string{`{"op":"inc","key":"k"}`, `{"op":"read","key":"k"}`}, wantErr: "guest: read c/k: the document is held by a State in this batch: use the State"}},
		},
		{
			name:    "put of a key a State holds",
			batches: []stateBatch{{cmds: []string{`{"op":"inc","key":"k"}`, `{"op":"put","key":"k","n":1}`}, wantErr: "guest: put c/k: the document is held by a State in this batch"}},
		},
		{
			name:    "two States on one key",
			batches: []stateBatch{{cmds: []string{`{"op":"inc","key":"k"}`, `{"op":"inc2","key":"k"}`}, wantErr: "State<Counter>.get c/k: the document is held by another State in this batch"}},
		},
		{
			name:    "an empty key",
			batches: []stateBatch{{cmds: []string{`{"op":"inc","key":""}`}, wantErr: `guest: collection c: invalid key "": want 1..1024 bytes of UTF-8 without NUL`}},
		},
		{
			name:    "a key with NUL",
			batches: []stateBatch{{cmds: []string{`{"op":"inc","key":"a\u0000b"}`}, wantErr: "invalid key"}},
		},
		{
			name:    "a stored document that does not decode",
			stored:  map[string]string{"k": `{"n":"x"}`},
			batches: []stateBatch{{cmds: []string{`{"op":"inc","key":"k"}`}, wantErr: `guest: stored document c/k does not decode as Counter: {"n":"x"}`}},
		},
	}
	// More keys than the batch's entry arrays (64) and its index's first tables hold, keys of
	// growing length (the index's arena grows too), through State and Batch.put alike; twice,
	// the second batch over the first one's grown arrays and the documents it wrote.
	var many [2]stateBatch
	for b := range many {
		for i := range 1100 {
			k, p := fmt.Sprintf("k%d-%s", i, strings.Repeat("x", i%40)), fmt.Sprintf("p%d", i)
			many[b].cmds = append(many[b].cmds, fmt.Sprintf(`{"op":"inc","key":%q}`, k), fmt.Sprintf(`{"op":"put","key":%q,"n":%d}`, p, i+b))
			n := 2 + 2*b
			if i == 700 {
				n += 10 // stored before the first batch
			}
			many[b].want = append(many[b].want, fmt.Sprintf(`put c/%s {"n":%d}`, k, n), fmt.Sprintf(`put c/%s {"n":%d}`, p, i+b))
		}
		for i := range 1100 {
			many[b].cmds = append(many[b].cmds, fmt.Sprintf(`{"op":"inc","key":"k%d-%s"}`, i, strings.Repeat("x", i%40)))
		}
	}
	many[0].logs, many[1].logs = []string{"decodes=1"}, []string{"decodes=0"}
	tests = append(tests, struct {
		name    string
		stored  map[string]string
		batches []stateBatch
	}{"more keys than the first tables hold", map[string]string{"k700-" + strings.Repeat("x", 700%40): `{"n":10}`}, many[:]})
	// More keys than a State keeps: it keeps the first STATE_KEEP_LIMIT (batch 1 reuses the
	// STATE_KEEP_LIMIT-1 of batch 0 and keeps one more, not the others), and a batch that begins
	// at the limit drops everything: batches 2 and 3 decode every key.
	const overLimit = stateKeepLimit + 616
	var limit [4]stateBatch
	for b, decodes := range []int{0, 0, overLimit, overLimit} {
		to := overLimit
		if b == 0 {
			to = stateKeepLimit - 1
		}
		limit[b].cmds = []string{fmt.Sprintf(`{"op":"many","from":0,"to":%d}`, to), `{"op":"decodes"}`}
		for i := range to {
			n := b + 1
			if i >= stateKeepLimit-1 {
				n = b // new in batch 1
			}
			limit[b].want = append(limit[b].want, fmt.Sprintf(`put c/m%d {"n":%d}`, i, n))
		}
		limit[b].want = append(limit[b].want, fmt.Sprintf(`put stats/decodes {"n":%d}`, decodes))
		limit[b].logs = []string{fmt.Sprintf("decodes=%d", decodes)}
	}
	tests = append(tests, struct {
		name    string
		stored  map[string]string
		batches []stateBatch
	}{"more keys than STATE_KEEP_LIMIT", nil, limit[:]})
	ctx := context.Background()
	mod, logs := loadStateProbe(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := mod.NewHandler(host.TestShardID)
			defer h.Close(ctx)
			rm := &countingReader{MemReadModel: host.NewMemReadModel(), reads: map[string]int{}}
			var init []event.Mutation
			for k, d := range tt.stored {
				init = append(init, event.Mutation{Collection: "c", Key: k, Doc: []byte(d)})
			}
			rm.Apply(init)
			seq := 0
			for bi, b := range tt.batches {
				var evs []event.Event
				for _, c := range b.cmds {
					if !json.Valid([]byte(c)) {
						t.Fatalf("command %s is not JSON", c)
					}
					seq++
					evs = append(evs, event.Event{ShardID: host.TestShardID, Seq: fmt.Sprint(seq), PartitionKey: "p", Data: []byte(c)})
				}
				var set []event.Mutation
				for k, d := range b.set {
					m := event.Mutation{Collection: "c", Key: k}
					if d != "" {
						m.Doc = []byte(d)
					}
					set = append(set, m)
				}
				rm.Apply(set)
				clear(rm.reads)
				logs.take()
				muts, err := h.Handle(ctx, evs, rm)
				if b.wantErr != "" {
					var he *host.HandlerError
					if !errors.As(err, &he) || !errors.Is(err, host.ErrHandlerFailed) || !strings.Contains(he.Message, b.wantErr) {
						t.Fatalf("batch %d: error %v, want a failed batch with %q", bi, err, b.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatalf("batch %d: %v", bi, err)
				}
				var got []string
				for _, m := range muts {
					if m.Doc == nil {
						got = append(got, "delete "+m.Collection+"/"+m.Key)
					} else {
						got = append(got, "put "+m.Collection+"/"+m.Key+" "+string(m.Doc))
					}
				}
				if !slices.Equal(got, b.want) {
					t.Errorf("batch %d: mutations %s", bi, diffLines(got, b.want))
				}
				if l := logs.take(); !slices.Equal(l, b.logs) {
					t.Errorf("batch %d: guest logs %q, want %q", bi, l, b.logs)
				}
				for k, n := range rm.reads {
					if n != 1 {
						t.Errorf("batch %d: %s read %d times from the host, want once", bi, k, n)
					}
				}
				rm.Apply(muts)
			}
		})
	}
}

// diffLines describes how got differs from want: both in full when short, else their lengths
// and the first difference.
func diffLines(got, want []string) string {
	if len(got)+len(want) <= 40 {
		return fmt.Sprintf("\n%q\nwant\n%q", got, want)
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	g, w := "(end)", "(end)"
	if i < len(got) {
		g = got[i]
	}
	if i < len(want) {
		w = want[i]
	}
	return fmt.Sprintf("%d, want %d; first difference at %d: %q, want %q", len(got), len(want), i, g, w)
}

// TestStateKeepingMatchesDecodeEveryBatch: a State that keeps its documents between batches
// writes exactly what one that decodes every batch (decodeEveryBatch) writes, over a long
// pseudo-random run of increments, deletes, Batch.put/read of the State's keys, failed batches
// (the handler's message, misuse, a too-large document) and documents changed by someone else
// between batches (to a new value, to other bytes of the same value, deleted), while decoding less.
func TestStateKeepingMatchesDecodeEveryBatch(t *testing.T) {
	type step struct {
		set  map[string]string // as stateBatch.set
		cmds []string          // with %[1]s for the collection
	}
	rng := rand.New(rand.NewPCG(14, 5))
	var steps []step
	for range 300 {
		var st step
		if rng.IntN(4) == 0 {
			st.set = map[string]string{}
			for range 1 + rng.IntN(3) {
				k := fmt.Sprintf("k%d", rng.IntN(12))
				switch rng.IntN(3) {
				case 0:
					st.set[k] = ""
				case 1:
					st.set[k] = fmt.Sprintf(`{"n":%d}`, rng.IntN(50))
				default:
					st.set[k] = fmt.Sprintf(`{"x":true,"n":%d}`, rng.IntN(50))
				}
			}
		}
		for range 1 + rng.IntN(12) {
			k := fmt.Sprintf("k%d", rng.IntN(12))
			var c string
			switch r := rng.IntN(100); {
			case r < 72:
				c = fmt.Sprintf(`{"op":"inc","key":%q,"by":%d,"coll":"%%[1]s"}`, k, 1+rng.IntN(5))
			case r < 84:
				c = fmt.Sprintf(`{"op":"del","key":%q,"coll":"%%[1]s"}`, k)
			case r < 91:
				c = fmt.Sprintf(`{"op":"put","key":%q,"n":%d,"coll":"%%[1]s"}`, k, rng.IntN(50))
			case r < 97:
				c = fmt.Sprintf(`{"op":"read","key":%q,"coll":"%%[1]s"}`, k)
			case r < 99:
				c = `{"op":"fail"}`
			default:
				c = fmt.Sprintf(`{"op":"big","key":%q,"coll":"%%[1]s"}`, k)
			}
			st.cmds = append(st.cmds, c)
		}
		steps = append(steps, st)
	}

	ctx := context.Background()
	mod, logs := loadStateProbe(t)

	// run returns, per step, its outcome with the collection written as C, and the decodes.
	run := func(coll string) (out []string, decodes int) {
		h := mod.NewHandler(host.TestShardID)
		defer h.Close(ctx)
		rm := host.NewMemReadModel()
		seq := 0
		for _, st := range steps {
			var set []event.Mutation
			for k, d := range st.set {
				m := event.Mutation{Collection: coll, Key: k}
				if d != "" {
					m.Doc = []byte(d)
				}
				set = append(set, m)
			}
			rm.Apply(set)
			var evs []event.Event
			for _, c := range st.cmds {
				seq++
				evs = append(evs, event.Event{ShardID: host.TestShardID, Seq: fmt.Sprint(seq), PartitionKey: "p", Data: fmt.Appendf(nil, c, coll)})
			}
			logs.take()
			muts, err := h.Handle(ctx, evs, rm)
			var o []string
			if err != nil {
				var he *host.HandlerError
				if !errors.As(err, &he) {
					t.Fatalf("collection %s: %v", coll, err)
				}
				o = append(o, "fail "+strings.ReplaceAll(he.Message, coll+"/", "C/"))
			}
			for _, m := range muts {
				op, c := "put", m.Collection
				if m.Doc == nil {
					op = "delete"
				}
				if c == coll {
					c = "C"
				}
				o = append(o, fmt.Sprintf("%s %s/%s %s", op, c, m.Key, m.Doc))
			}
			for _, l := range logs.take() {
				if n, ok := strings.CutPrefix(l, "decodes="); ok {
					var d int
					fmt.Sscan(n, &d)
					decodes += d
				} else {
					o = append(o, "log "+l)
				}
			}
			out = append(out, strings.Join(o, "\n"))
			rm.Apply(muts)
		}
		return out, decodes
	}
	kept, keptDecodes := run("c")
	every, everyDecodes := run("e")
	fails := 0
	for i := range steps {
		if kept[i] != every[i] {
			t.Fatalf("step %d (%q, set %q):\nkeeping State:\n%s\ndecodeEveryBatch:\n%s", i, steps[i].cmds, steps[i].set, kept[i], every[i])
		}
		if strings.HasPrefix(kept[i], "fail ") {
			fails++
		}
	}
	if fails < 30 || fails > len(steps)/2 {
		t.Errorf("%d of %d batches failed: the run does not exercise both outcomes", fails, len(steps))
	}
	// Every failed batch drops what the State keeps, and a third of them fail.
	if keptDecodes*4 > everyDecodes*3 {
		t.Errorf("the keeping State decoded %d documents, decodeEveryBatch %d: want at most three quarters", keptDecodes, everyDecodes)
	}
	t.Logf("%d batches, %d failed; decodes: keeping %d, decodeEveryBatch %d", len(steps), fails, keptDecodes, everyDecodes)
}
