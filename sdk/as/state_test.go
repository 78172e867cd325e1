package as_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

type stateBatch struct {
	cmds    []string // event data; the partition key is "p"
	want    []string // mutations in order: "put c/KEY DOC" or "delete c/KEY"
	logs    []string // guest log lines
	wantErr string   // a substring of the fail message instead
}

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
			name: "pooled documents are reset between batches",
			batches: []stateBatch{
				{cmds: []string{`{"op":"inc","key":"a","by":7}`, `{"op":"inc","key":"b","by":9}`}, want: []string{`put c/a {"n":7}`, `put c/b {"n":9}`}, logs: []string{"decodes=0"}},
				{cmds: []string{`{"op":"inc","key":"b"}`, `{"op":"inc","key":"c"}`}, want: []string{`put c/b {"n":10}`, `put c/c {"n":1}`}, logs: []string{"decodes=1"}},
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
	many[0].logs, many[1].logs = []string{"decodes=1"}, []string{"decodes=1100"}
	tests = append(tests, struct {
		name    string
		stored  map[string]string
		batches []stateBatch
	}{"more keys than the first tables hold", map[string]string{"k700-" + strings.Repeat("x", 700%40): `{"n":10}`}, many[:]})
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
	defer rt.Close(ctx)
	mod, err := rt.Load(ctx, "as-stateprobe", wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
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
						got = append(got, "delete c/"+m.Key)
					} else {
						got = append(got, "put "+m.Collection+"/"+m.Key+" "+string(m.Doc))
					}
				}
				if !slices.Equal(got, b.want) {
					t.Errorf("batch %d: mutations\n%q\nwant\n%q", bi, got, b.want)
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
