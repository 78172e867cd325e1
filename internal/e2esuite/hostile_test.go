package e2esuite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
)

// TestHostileModule checks testdata/hostile.wat itself, in the host (no process): healthy events
// are put as events/<shard>/<seq> = data, and each marker misbehaves as hostile.go says. The
// host may bound a misbehaviour (issue 8 fixes); then the test accepts the host's error kind
// for it, never a silent success with other output.
func TestHostileModule(t *testing.T) {
	wasm, err := os.ReadFile(hostileModule(t))
	if err != nil {
		t.Fatal(err)
	}
	const pages = 1024 // 64 MiB: room for the 19 MB of the 1M-mutation output
	ev := func(seq, data string) event.Event {
		return event.Event{ShardID: "s", Seq: seq, PartitionKey: "p", Data: []byte(data)}
	}
	healthy := []event.Event{ev("1", `{"k":"a","i":1}`), ev("2", `{"k":"b","i":2}`)}
	puts := func(evs ...event.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, "events/s/"+e.Seq+"="+string(e.Data))
		}
		return out
	}
	for _, c := range []struct {
		name    string
		events  []event.Event
		loops   bool      // the call never returns by itself: a short batch deadline
		want    []string  // the mutations (collection/key=doc), when the call succeeds
		wantN   int       // or only their number (the 1M output)
		bounded error     // the error a host bounding the misbehaviour may return instead
		wantErr error     // the error the call must fail with
		logs    func(int) // checks the lines the host logged
	}{
		{name: "healthy", events: healthy, want: puts(healthy...)},
		{name: "hostile documents are put as they are", events: []event.Event{ev("7", `{"x":1e300,"k":"h"}`), ev("8", `{"d":1,"d":2,"k":"h"}`)},
			want: []string{`events/s/7={"x":1e300,"k":"h"}`, `events/s/8={"d":1,"d":2,"k":"h"}`}, bounded: host.ErrBadOutput},
		{name: "memory bomb, keep", events: []event.Event{healthy[0], ev("3", `{"hostile":"keep","k":"h"}`)},
			want: puts(healthy[0], ev("3", `{"hostile":"keep","k":"h"}`))},
		{name: "memory bomb, trap", events: []event.Event{ev("3", `{"hostile":"trap","k":"h"}`)}, wantErr: host.ErrTrap},
		{name: "runaway loop", events: []event.Event{ev("3", `{"hostile":"loop","k":"h"}`)}, loops: true, wantErr: host.ErrDeadline},
		{name: "1M-mutation output", events: []event.Event{ev("3", `{"hostile":"million","k":"h"}`)}, wantN: 1_000_001, bounded: host.ErrBadOutput},
		{name: "log flood", events: []event.Event{ev("3", `{"hostile":"flood","k":"h"}`)}, want: puts(ev("3", `{"hostile":"flood","k":"h"}`)),
			logs: func(n int) {
				if n == 0 || n > 200_000 {
					t.Errorf("the host logged %d of the flood's 200,000 lines; want 1..200,000", n)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			var lines atomic.Int64
			logger := slog.New(countHandler{&lines})
			rt, err := host.NewRuntime(ctx, host.WithMemoryLimitPages(pages), host.WithLogger(logger),
				host.WithCacheDir(filepath.Join(os.TempDir(), "projhost-test-wazero-cache")))
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close(ctx)
			deadline := time.Minute // no deadline in effect: the race detector makes the host slow
			if c.loops {
				deadline = 500 * time.Millisecond
			}
			m, err := rt.Load(ctx, "hostile", wasm, host.WithBatchDeadline(deadline))
			if err != nil {
				t.Fatal(err)
			}
			h := m.NewHandler("s")
			defer h.Close(ctx)
			muts, err := h.Handle(ctx, c.events, noDocs{})
			switch {
			case c.wantErr != nil:
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("Handle: %v; want %v", err, c.wantErr)
				}
			case err != nil && c.bounded != nil && errors.Is(err, c.bounded):
				t.Logf("the host bounds it: %v", err)
			case err != nil:
				t.Fatalf("Handle: %v", err)
			case c.wantN > 0:
				if len(muts) != c.wantN || muts[0].Key != "0000000" || muts[c.wantN-2].Key != "0999999" || string(muts[0].Doc) != "{}" {
					t.Fatalf("%d mutations, first %s/%s, want %d: m/0000000..m/0999999 = {} and the event's", len(muts), muts[0].Collection, muts[0].Key, c.wantN)
				}
			default:
				var got []string
				for _, m := range muts {
					got = append(got, fmt.Sprintf("%s/%s=%s", m.Collection, m.Key, m.Doc))
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("mutations %q, want %q", got, c.want)
				}
			}
			if c.logs != nil {
				c.logs(int(lines.Load()))
			}
		})
	}
}

type noDocs struct{}

func (noDocs) ReadDoc(context.Context, string, []byte) ([]byte, bool, error) { return nil, false, nil }

// countHandler counts the flood's log records (their message is the flood's line).
type countHandler struct{ n *atomic.Int64 }

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == strings.Repeat("f", 1000) {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// TestReadStatus: VmRSS and VmHWM in bytes from a /proc/PID/status file.
func TestReadStatus(t *testing.T) {
	p := filepath.Join(t.TempDir(), "status")
	os.WriteFile(p, []byte("Name:\tprojhost\nVmPeak:\t 2000000 kB\nVmHWM:\t  409600 kB\nVmRSS:\t  204800 kB\nThreads:\t9\n"), 0o644)
	rss, hwm, ok := readStatus(p)
	if !ok || rss != 200<<20 || hwm != 400<<20 {
		t.Fatalf("readStatus = %d, %d, %v; want %d, %d, true", rss, hwm, ok, 200<<20, 400<<20)
	}
	if _, _, ok := readStatus(filepath.Join(t.TempDir(), "gone")); ok {
		t.Fatal("readStatus of a missing file: ok")
	}
	if rss, _, _ := readStatus("/proc/self/status"); rss <= 0 {
		t.Fatalf("readStatus(/proc/self/status): VmRSS %d", rss)
	}
}
