package host

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/eventfile"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
)

// exampleModules are the flightdelays builds: standard Go, AssemblyScript and, when installed (or
// under CI=true), TinyGo.
func exampleModules(t *testing.T) []string {
	return append([]string{testwasm.FlightDelaysGo, testwasm.FlightDelaysAS}, testwasm.TinyGoModules(t, testwasm.FlightDelaysTinyGo)...)
}

// TestExamplesFlightDelays runs the example handlers through the test kit over the 2k flights in
// several batch sizes, with and without the deadline, and compares the read model with the
// independent computation.
func TestExamplesFlightDelays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example modules")
	}
	data := flightcheck.DataPath("flights-2k.json")
	flights := flightcheck.Load(t, data)
	for _, name := range exampleModules(t) {
		path := testwasm.Path(t, name)
		for _, tc := range []struct {
			batch   int
			trusted bool
		}{{1, true}, {100, false}, {1000, true}} {
			t.Run(fmt.Sprintf("%s/batch=%d/trusted=%v", name, tc.batch, tc.trusted), func(t *testing.T) {
				docs, err := RunFile(context.Background(), path, data, TestOptions{
					BatchSize: tc.batch, Trusted: tc.trusted,
					RuntimeOptions: []RuntimeOption{WithCacheDir(testCacheDir())},
				})
				if err != nil {
					t.Fatal(err)
				}
				flightcheck.Check(t, flights, docs)
			})
		}
	}
}

type airport struct {
	Flights, Delayed, TotalDelay, MaxDelay int64
}

func airportOf(t *testing.T, muts []event.Mutation, key string) airport {
	t.Helper()
	for i := len(muts) - 1; i >= 0; i-- { // the last write of the key wins
		if muts[i].Collection == "airports" && muts[i].Key == key {
			var a struct {
				Flights    int64 `json:"flights"`
				Delayed    int64 `json:"delayed"`
				TotalDelay int64 `json:"total_delay"`
				MaxDelay   int64 `json:"max_delay"`
			}
			if err := json.Unmarshal(muts[i].Doc, &a); err != nil {
				t.Fatal(err)
			}
			return airport{a.Flights, a.Delayed, a.TotalDelay, a.MaxDelay}
		}
	}
	t.Fatalf("no airports/%s in %q", key, muts)
	return airport{}
}

// TestExamplesReadOwnWrites: within one batch the handler's reads see the batch's own earlier
// writes (SDK cache), and across batches they see the applied read model (host read).
func TestExamplesReadOwnWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example modules")
	}
	rt, _ := newTestRuntime(t)
	for _, name := range exampleModules(t) {
		t.Run(name, func(t *testing.T) {
			wasm, err := os.ReadFile(testwasm.Path(t, name))
			if err != nil {
				t.Fatal(err)
			}
			m := load(t, rt, name, wasm)
			h := m.NewHandler("s1")
			defer h.Close(context.Background())
			rm := NewMemReadModel()
			flight := func(delay int) string {
				return fmt.Sprintf(`{"date":"2001/01/01 00:47","delay":%d,"distance":100,"origin":"ORD","destination":"LAX"}`, delay)
			}
			muts, err := h.Handle(context.Background(), evs("s1", 1, "ORD", flight(20), "ORD", flight(-5), "ORD", flight(40)), rm)
			if err != nil {
				t.Fatal(err)
			}
			// Delayed counts delays > 15 minutes (the BTS definition the example uses).
			if got, want := airportOf(t, muts, "ORD"), (airport{3, 2, 55, 40}); got != want {
				t.Fatalf("within one batch: airports/ORD = %+v, want %+v", got, want)
			}
			rm.Apply(muts)
			muts, err = h.Handle(context.Background(), evs("s1", 4, "ORD", flight(1)), rm)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := airportOf(t, muts, "ORD"), (airport{4, 2, 56, 40}); got != want {
				t.Fatalf("next batch: airports/ORD = %+v, want %+v", got, want)
			}
		})
	}
}

func TestReadEvents(t *testing.T) {
	lines := `{"origin":"ORD","delay":1}
  {"origin":"LAX","n":{"origin":"x"}}

{"origin":"ORD"}`
	want := []string{"ORD", "LAX", "ORD"}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`[{"origin":"ORD","delay":1},{"origin":"LAX","n":{"origin":"x"}},{"origin":"ORD"}]`))
	zw.Close()
	for name, in := range map[string][]byte{
		"lines":        []byte(lines),
		"array":        []byte(` [ {"origin":"ORD","delay":1}, {"origin":"LAX","n":{"origin":"x"}}, {"origin":"ORD"} ] `),
		"gzip":         gz.Bytes(),
		"concatenated": []byte(`{"origin":"ORD","delay":1} {"origin":"LAX","n":{"origin":"x"}} {"origin":"ORD"}`),
	} {
		t.Run(name, func(t *testing.T) {
			events, err := ReadEvents(bytes.NewReader(in), "origin")
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for i, e := range events {
				keys = append(keys, e.PartitionKey)
				if e.Seq != fmt.Sprint(i+1) || e.ShardID != TestShardID || e.Data[0] != '{' {
					t.Errorf("event %d = %+v", i, e)
				}
			}
			if !reflect.DeepEqual(keys, want) {
				t.Errorf("keys = %v, want %v", keys, want)
			}
			if string(events[0].Data) != `{"origin":"ORD","delay":1}` {
				t.Errorf("data = %s", events[0].Data)
			}
		})
	}
	bad := map[string]string{
		`[{"origin":"A"}, 5]`:                           "element 1 is not a JSON object",
		`{"origin":"A"}` + "\n" + `{"dest":"B"}`:        `element 1: no field "origin"`,
		`{"origin":"A"}` + "\n" + `{"origin":`:          "element 1",
		`{"origin":"` + strings.Repeat("k", 257) + `"}`: `field "origin" is 257 characters long; partition keys are at most 256 characters`,
	}
	for in, want := range bad {
		_, err := ReadEvents(strings.NewReader(in), "origin")
		if !errors.Is(err, eventfile.ErrBadInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadEvents(%.40q) = %v, want an ErrBadInput containing %q", in, err, want)
		}
	}
}

// TestRunFileErrors: the test kit reports bad modules and inputs as errors (not panics).
func TestRunFileErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.wasm")
	if err := os.WriteFile(good, wat(t, "good"), 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.wasm")
	os.WriteFile(junk, []byte("junk"), 0o644)
	events := filepath.Join(dir, "events.json")
	os.WriteFile(events, []byte(`[{"origin":"A","v":1},{"origin":"B"},{"origin":"A","v":2}]`), 0o644)
	noKey := filepath.Join(dir, "nokey.json")
	os.WriteFile(noKey, []byte(`[{"origin":"A"},{"v":1}]`), 0o644)
	opts := TestOptions{RuntimeOptions: []RuntimeOption{WithCacheDir(""), WithLogger(slog.New(slog.DiscardHandler))}}

	docs, err := RunFile(context.Background(), good, events, TestOptions{BatchSize: 2, RuntimeOptions: opts.RuntimeOptions})
	if err != nil {
		t.Fatal(err)
	}
	want := []event.Doc{
		{Collection: "events", Key: "A", Doc: []byte(`{"origin":"A","v":2}`)},
		{Collection: "events", Key: "B", Doc: []byte(`{"origin":"B"}`)},
		{Collection: "prev", Key: "A", Doc: []byte(`{"origin":"A","v":1}`)},
	}
	if !reflect.DeepEqual(docs, want) {
		t.Errorf("docs = %q, want %q", docs, want)
	}
	if _, err := RunFile(context.Background(), junk, events, opts); !errors.Is(err, ErrInvalidModule) {
		t.Errorf("junk module: %v", err)
	}
	if _, err := RunFile(context.Background(), good, noKey, opts); !errors.Is(err, eventfile.ErrBadInput) || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("missing key: %v", err)
	}
	if _, err := RunFile(context.Background(), filepath.Join(dir, "nope.wasm"), events, opts); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing module file: %v", err)
	}
}
