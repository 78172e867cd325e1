package host

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/eventfile"
)

// TestShardID is the shard id the test kit gives every event.
const TestShardID = "shard-0"

// TestOptions configures RunFile and Run. The zero value uses the defaults.
type TestOptions struct {
	KeyField  string // top-level string field used as partition key; default "origin"
	BatchSize int    // events per handler call; default 100
	Trusted   bool   // run without the batch deadline
	// RuntimeOptions are passed to NewRuntime by RunFile (e.g. WithLogger, WithCacheDir).
	RuntimeOptions []RuntimeOption
}

func (o TestOptions) withDefaults() TestOptions {
	if o.KeyField == "" {
		o.KeyField = "origin"
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 100
	}
	return o
}

// RunFile runs the handler module at wasmPath over the events in eventsPath (see ReadEvents)
// against an empty in-memory read model, in batches of opts.BatchSize events on one shard
// (TestShardID), applying each batch's mutations before the next, and returns the final read
// model ordered by collection then key. Errors: unreadable files, ReadEvents errors, Load errors
// (ErrInvalidModule) and the first batch error (a *HandlerError, including ErrHandlerFailed).
func RunFile(ctx context.Context, wasmPath, eventsPath string, opts TestOptions) ([]event.Doc, error) {
	opts = opts.withDefaults()
	wasm, err := ReadModuleFile(wasmPath, DefaultMaxModuleFile)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(eventsPath)
	if err != nil {
		return nil, fmt.Errorf("reading events: %w", err)
	}
	defer f.Close()
	events, err := ReadEvents(f, opts.KeyField)
	if err != nil {
		return nil, fmt.Errorf("events file %s: %w", eventsPath, err)
	}
	rt, err := NewRuntime(ctx, opts.RuntimeOptions...)
	if err != nil {
		return nil, err
	}
	defer rt.Close(ctx)
	return Run(ctx, rt, filepath.Base(wasmPath), wasm, events, opts)
}

// Run is RunFile on a module and events already in memory, using rt (opts.RuntimeOptions is
// ignored).
func Run(ctx context.Context, rt *Runtime, name string, wasm []byte, events []event.Event, opts TestOptions) ([]event.Doc, error) {
	opts = opts.withDefaults()
	mod, err := rt.Load(ctx, name, wasm, WithTrusted(opts.Trusted))
	if err != nil {
		return nil, err
	}
	defer mod.Close(ctx)
	h := mod.NewHandler(TestShardID)
	defer h.Close(ctx)
	rm := NewMemReadModel()
	for start := 0; start < len(events); start += opts.BatchSize {
		batch := events[start:min(start+opts.BatchSize, len(events))]
		muts, err := h.Handle(ctx, batch, rm)
		if err != nil {
			return nil, err
		}
		rm.Apply(muts)
	}
	return rm.Docs(), nil
}

// MemReadModel is an in-memory read model of one projection: a MemoryDocReader whose documents
// change only by Apply. It is not safe for concurrent use.
type MemReadModel struct {
	docs map[string]map[string][]byte
}

// NewMemReadModel returns an empty read model.
func NewMemReadModel() *MemReadModel {
	return &MemReadModel{docs: make(map[string]map[string][]byte)}
}

// ReadDoc implements DocReader. It never fails, and does not allocate.
func (m *MemReadModel) ReadDoc(_ context.Context, collection string, key []byte) ([]byte, bool, error) {
	d, ok := m.docs[collection][string(key)]
	return d, ok, nil
}

// ReadDocFromMemory implements MemoryDocReader: it answers every read.
func (m *MemReadModel) ReadDocFromMemory(collection string, key []byte) ([]byte, bool, bool) {
	d, ok := m.docs[collection][string(key)]
	return d, ok, true
}

// Apply applies mutations in order (Doc nil deletes). It keeps the Doc slices, which Handle
// returns as copies owned by the caller.
func (m *MemReadModel) Apply(muts []event.Mutation) {
	for _, mu := range muts {
		c := m.docs[mu.Collection]
		if mu.Doc == nil {
			delete(c, mu.Key)
			continue
		}
		if c == nil {
			c = make(map[string][]byte)
			m.docs[mu.Collection] = c
		}
		c[mu.Key] = mu.Doc
	}
}

// Docs returns every document ordered by collection then key.
func (m *MemReadModel) Docs() []event.Doc {
	var out []event.Doc
	for coll, c := range m.docs {
		for k, d := range c {
			out = append(out, event.Doc{Collection: coll, Key: k, Doc: d})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Collection != out[j].Collection {
			return out[i].Collection < out[j].Collection
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// ReadEvents reads test events with internal/eventfile: a JSON array of objects or JSON lines,
// optionally gzip-compressed (detected by the magic bytes). Each element's JSON bytes (compacted)
// become an event's Data; its partition key is the top-level field keyField (a string, or a
// number as its text; 1 to 256 Unicode characters, the Kinesis limit); its sequence number is
// its 1-based index in decimal; its shard is TestShardID; arrival time 0. Errors wrap
// eventfile.ErrBadInput and name the element (0-based index): a syntax error, an element that
// is not a JSON object, a missing key field, a key of more than 256 characters.
func ReadEvents(r io.Reader, keyField string) ([]event.Event, error) {
	var events []event.Event
	err := eventfile.Scan(r, keyField, func(i int, key string, raw []byte) error {
		events = append(events, event.Event{ShardID: TestShardID, Seq: strconv.Itoa(i + 1), PartitionKey: key, Data: bytes.Clone(raw)})
		return nil
	})
	return events, err
}
