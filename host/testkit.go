package host

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/buger/jsonparser"

	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/wasmabi"
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
func RunFile(ctx context.Context, wasmPath, eventsPath string, opts TestOptions) ([]readmodel.Doc, error) {
	opts = opts.withDefaults()
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		return nil, fmt.Errorf("reading handler: %w", err)
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
func Run(ctx context.Context, rt *Runtime, name string, wasm []byte, events []source.Event, opts TestOptions) ([]readmodel.Doc, error) {
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

// MemReadModel is an in-memory read model of one projection: a DocReader whose documents change
// only by Apply. It is not safe for concurrent use.
type MemReadModel struct {
	docs map[string]map[string][]byte
}

// NewMemReadModel returns an empty read model.
func NewMemReadModel() *MemReadModel {
	return &MemReadModel{docs: make(map[string]map[string][]byte)}
}

// ReadDoc implements DocReader. It never fails.
func (m *MemReadModel) ReadDoc(_ context.Context, collection, key string) ([]byte, bool, error) {
	d, ok := m.docs[collection][key]
	return d, ok, nil
}

// Apply applies mutations in order (Doc nil deletes). It keeps the Doc slices, which Handle
// returns as copies owned by the caller.
func (m *MemReadModel) Apply(muts []readmodel.Mutation) {
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
func (m *MemReadModel) Docs() []readmodel.Doc {
	var out []readmodel.Doc
	for coll, c := range m.docs {
		for k, d := range c {
			out = append(out, readmodel.Doc{Collection: coll, Key: k, Doc: d})
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

// ReadEvents reads test events: a JSON array of objects or JSON lines (one object per line; any
// whitespace between objects is accepted), optionally gzip-compressed (detected by the gzip magic
// bytes). Each element's raw JSON bytes become an event's Data; its partition key is the
// top-level string field keyField (1..256 bytes); its sequence number is its 1-based index in
// decimal; its shard is TestShardID; arrival time 0. Errors name the element's 1-based index: a
// syntax error, an element that is not a JSON object, a missing or non-string key field.
func ReadEvents(r io.Reader, keyField string) ([]source.Event, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	first, err := firstNonSpace(br)
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(br)
	array := first == '['
	if array {
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("reading JSON array: %w", err)
		}
	}
	var events []source.Event
	for i := 1; ; i++ {
		if array && !dec.More() {
			break
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if err == io.EOF && !array {
				break
			}
			return nil, fmt.Errorf("element %d: invalid JSON: %v", i, err)
		}
		ev, err := testEvent(raw, keyField, i)
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
	}
	if array {
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("after element %d: invalid JSON: %v", len(events), err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, fmt.Errorf("unexpected data after the JSON array's closing ]")
		}
	}
	return events, nil
}

func testEvent(raw []byte, keyField string, i int) (source.Event, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return source.Event{}, fmt.Errorf("element %d is not a JSON object: %s", i, abbrev(raw))
	}
	v, typ, _, err := jsonparser.Get(raw, keyField)
	if err != nil || typ != jsonparser.String {
		if errors.Is(err, jsonparser.KeyPathNotFoundError) || err == nil {
			return source.Event{}, fmt.Errorf("element %d has no string field %q to use as partition key (choose another with --key-field): %s", i, keyField, abbrev(raw))
		}
		return source.Event{}, fmt.Errorf("element %d: %v", i, err)
	}
	key, err := jsonparser.ParseString(v)
	if err != nil {
		return source.Event{}, fmt.Errorf("element %d: field %q: %v", i, keyField, err)
	}
	if key == "" || len(key) > wasmabi.MaxKeyLen {
		return source.Event{}, fmt.Errorf("element %d: partition key field %q must be 1..%d bytes, is %d", i, keyField, wasmabi.MaxKeyLen, len(key))
	}
	return source.Event{ShardID: TestShardID, Seq: strconv.Itoa(i), PartitionKey: key, Data: raw}, nil
}

func firstNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if !strings.ContainsRune(" \t\r\n", rune(b)) {
			return b, br.UnreadByte()
		}
	}
}

func abbrev(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}
