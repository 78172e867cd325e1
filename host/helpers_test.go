package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/testwasm"
)

// testCacheDir is a wazero compilation cache shared by test runs, so the Go guest (~4 s to
// compile cold) compiles once per machine.
func testCacheDir() string { return filepath.Join(os.TempDir(), "projhost-test-wazero-cache") }

// testMemPages is the memory cap of test runtimes: 256 pages = 16 MiB, enough for a Go guest.
const testMemPages = 256

var (
	watOnce sync.Once
	watMods map[string][]byte
	watErr  error
	watSkip bool
)

// buildWAT assembles testdata/wat/*.wat and every entry of hostileWAT with testdata/wat2wasm.js
// (node + the wabt npm package; testwasm.AssembleWAT), once per test binary.
func buildWAT(t testing.TB) {
	dir, err := os.MkdirTemp("", "projhost-wat-")
	if err != nil {
		watErr = err
		return
	}
	defer os.RemoveAll(dir)
	files, _ := filepath.Glob("testdata/wat/*.wat")
	for name, src := range hostileWAT {
		p := filepath.Join(dir, name+".wat")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			watErr = err
			return
		}
		files = append(files, p)
	}
	out := filepath.Join(dir, "out")
	if err := testwasm.AssembleWAT(t, out, files...); err != nil {
		watErr, watSkip = err, errors.Is(err, testwasm.ErrNoWABT)
		return
	}
	watMods = make(map[string][]byte)
	wasms, _ := filepath.Glob(filepath.Join(out, "*.wasm"))
	for _, p := range wasms {
		b, err := os.ReadFile(p)
		if err != nil {
			watErr = err
			return
		}
		watMods[strings.TrimSuffix(filepath.Base(p), ".wasm")] = b
	}
}

// wat returns the assembled module name (a testdata/wat file without .wat, or a hostileWAT key).
// Without node or wabt it fails when CI=true and skips otherwise.
func wat(t testing.TB, name string) []byte {
	t.Helper()
	watOnce.Do(func() { buildWAT(t) })
	if watErr != nil {
		if watSkip && os.Getenv("CI") != "true" {
			t.Skipf("skipping: cannot assemble WAT (%v); install node and run npm ci", watErr)
		}
		t.Fatalf("cannot assemble WAT test modules: %v", watErr)
	}
	b, ok := watMods[name]
	if !ok {
		t.Fatalf("no WAT module %q", name)
	}
	return b
}

// fixture returns the test module name of internal/testwasm (testwasm.Echo, ...), built on
// first use.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testwasm.Path(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goGuests holds testdata/gopanic built by each Go toolchain ("go", "tinygo"), built on first use.
var goGuests sync.Map // toolchain -> *goGuestBuild

type goGuestBuild struct {
	once sync.Once
	wasm []byte
	err  error
}

// buildGoGuest builds testdata/gopanic for wasip1 as a reactor with toolchain: "go" (the standard
// toolchain) or "tinygo" (TinyGo as `make tinygo` installs it and examples.mk builds with it,
// except -scheduler=none: the wasmabi package the module uses starts goroutines through time).
// TinyGo that is not installed skips the test (testwasm.RequireTinyGo).
func buildGoGuest(t testing.TB, toolchain string) []byte {
	t.Helper()
	var args []string
	env := append(os.Environ(), "CGO_ENABLED=0")
	switch toolchain {
	case "go":
		args = []string{goTool(), "build", "-buildmode=c-shared"}
		env = append(env, "GOOS=wasip1", "GOARCH=wasm")
	case "tinygo":
		testwasm.RequireTinyGo(t)
		args = []string{filepath.Join(testwasm.RepoRoot(t), testwasm.TinyGoDir, "bin", "tinygo"), "build",
			"-target=wasip1", "-buildmode=c-shared", "-no-debug"}
	default:
		t.Fatalf("unknown toolchain %q", toolchain)
	}
	v, _ := goGuests.LoadOrStore(toolchain, &goGuestBuild{})
	b := v.(*goGuestBuild)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "projhost-gopanic-")
		if err != nil {
			b.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "gopanic.wasm")
		cmd := exec.Command(args[0], append(args[1:], "-o", out, "./testdata/gopanic")...)
		cmd.Env = env
		if o, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building the Go guest with %s: %v: %s", toolchain, err, o)
			return
		}
		b.wasm, b.err = os.ReadFile(out)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.wasm
}

func goTool() string {
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
		return p
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// logRecorder is a slog.Handler keeping every record with its attributes flattened to strings.
type logRecorder struct {
	mu    *sync.Mutex
	recs  *[]logRec
	attrs []slog.Attr
}

type logRec struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

func newLogRecorder() *logRecorder {
	return &logRecorder{mu: new(sync.Mutex), recs: new([]logRec)}
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range l.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	*l.recs = append(*l.recs, rec)
	l.mu.Unlock()
	return nil
}

func (l *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorder{mu: l.mu, recs: l.recs, attrs: append(append([]slog.Attr{}, l.attrs...), as...)}
}

func (l *logRecorder) WithGroup(string) slog.Handler { return l }

func (l *logRecorder) records() []logRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]logRec(nil), *l.recs...)
}

// find returns the records whose message contains substr.
func (l *logRecorder) find(substr string) []logRec {
	var out []logRec
	for _, r := range l.records() {
		if strings.Contains(r.Msg, substr) {
			out = append(out, r)
		}
	}
	return out
}

func newTestRuntime(t testing.TB, opts ...RuntimeOption) (*Runtime, *logRecorder) {
	t.Helper()
	rec := newLogRecorder()
	base := []RuntimeOption{WithCacheDir(testCacheDir()), WithMemoryLimitPages(testMemPages), WithLogger(slog.New(rec))}
	rt, err := NewRuntime(context.Background(), append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt, rec
}

func load(t testing.TB, rt *Runtime, name string, wasm []byte, opts ...ModuleOption) *Module {
	t.Helper()
	m, err := rt.Load(context.Background(), name, wasm, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// evs builds events of shard "s1" from (partition key, data) pairs with seqs 1, 2, ...
func evs(shard string, firstSeq int, kv ...string) []event.Event {
	var out []event.Event
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, event.Event{ShardID: shard, Seq: fmt.Sprint(firstSeq + i/2), PartitionKey: kv[i], Data: []byte(kv[i+1])})
	}
	return out
}
