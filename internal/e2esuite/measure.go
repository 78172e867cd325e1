package e2esuite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
)

// Measure reports figures of b, from the workers' traces, and asserts none of them: recovery
// after kill -9 with the default lease duration, events/s of one worker with the default
// flags, and (for a store reached over HTTP) store writes per 100 events. Opt-in: slow, and
// its numbers depend on the machine.
func Measure(t *testing.T, bin string, b Backend) {
	t.Run("recovery after kill -9, default lease", func(t *testing.T) {
		e := newEnv(t, bin, b, Journal())
		fs := flights(t)
		e.Create(16)
		ws := map[string]*Worker{}
		for _, id := range []string{"w1", "w2", "w3", "w4"} {
			ws[id] = e.Start(id, Spec{})
		}
		e.WaitOwners("4 workers balanced", 2*time.Minute, func(m map[string]int) bool {
			return len(m) == 4 && m["w1"] >= 3 && m["w2"] >= 3 && m["w3"] >= 3 && m["w4"] >= 3
		})
		appended := e.AppendChunks(fs, 60, 500*time.Millisecond) // events keep flowing
		var results []time.Duration
		for _, victim := range []string{"w1", "w2", "w3"} {
			time.Sleep(2 * time.Second)
			held := e.Held(victim)
			killed := time.Now()
			ws[victim].Kill(t)
			delete(ws, victim)
			var last time.Time
			e.Eventually("the victim's shards opened by the others", time.Minute, func() (bool, string) {
				for _, w := range ws {
					for _, r := range Where(w.Records(t), Is("open")) {
						if ep, ok := held[r.Shard]; ok && r.Epoch > ep && r.Time.After(killed) {
							delete(held, r.Shard)
							last = r.Time
						}
					}
				}
				return len(held) == 0, ""
			})
			results = append(results, last.Sub(killed))
			t.Logf("kill -9 %s: all its shards open on other workers %s later", victim, last.Sub(killed).Round(10*time.Millisecond))
		}
		<-appended
		t.Logf("recovery times (default lease %s, renewed every third of it): %v", shardmap.DefaultLeaseDuration, results)
	})

	t.Run("events per second, one worker, defaults", func(t *testing.T) {
		e := newEnv(t, bin, b, Journal())
		fs := flights(t)
		e.Create(16)
		e.Append(fs)
		w := e.Start("solo", Spec{Flags: []string{"--until-caught-up"}})
		if err := w.Wait(t, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		rs := w.Records(t)
		events := 0
		for _, r := range Where(rs, Is("batch")) {
			events += r.Events
		}
		opens, flushes := Where(rs, Is("open")), Where(rs, Is("flush"))
		el := flushes[len(flushes)-1].Time.Sub(opens[0].Time)
		t.Logf("%s: one worker, 16 shards, flights-20k: %d events in %s, %.0f events/s, %d cursor saves", b.Name, events, el.Round(time.Millisecond), float64(events)/el.Seconds(), len(flushes))
		e.Finish(fs)
	})

	t.Run("store writes per 100 events", func(t *testing.T) {
		e := newEnv(t, bin, b, Journal())
		fy, ok := e.Store.(Faulty)
		if !ok {
			t.Skip("the store is not reached over HTTP")
		}
		fs := flights(t)
		e.Create(16)
		cp := newCountingProxy(t, "http://"+fy.Target())
		spec := Spec{Store: fy.FlagsVia(strings.TrimPrefix(cp.srv.URL, "http://"))}
		ws := []*Worker{e.Start("w1", spec), e.Start("w2", spec), e.Start("w3", spec)}
		e.WaitOwners("3 workers balanced", 2*time.Minute, func(m map[string]int) bool { return len(m) == 3 && m["w1"] >= 5 && m["w2"] >= 5 && m["w3"] >= 5 })
		before := cp.snapshot()
		start := time.Now()
		<-e.AppendChunks(fs, 40, 250*time.Millisecond)
		e.WaitCaughtUp(5 * time.Minute)
		el := time.Since(start)
		after := cp.snapshot()
		per := func(op string) float64 { return float64(after[op]-before[op]) * 100 / float64(len(fs)) }
		t.Logf("20k in 40 chunks 250 ms apart, 3 workers, %s (%.0f events/s): requests per 100 events %v",
			el.Round(100*time.Millisecond), float64(len(fs))/el.Seconds(), func() map[string]float64 {
				out := map[string]float64{}
				for op := range after {
					out[op] = per(op)
				}
				return out
			}())
		for _, w := range ws {
			w.Stop(t)
		}
		leases := 0
		for _, w := range ws {
			leases += len(Where(w.Records(t), Is("lease", string(projection.LeaseAcquired))))
		}
		t.Logf("%d lease acquisitions", leases)
		e.Finish(fs)
	})
}

// countingProxy is an HTTP reverse proxy that counts DynamoDB requests by operation.
type countingProxy struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   map[string]int64
}

func newCountingProxy(t *testing.T, endpoint string) *countingProxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	cp := &countingProxy{n: map[string]int64{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	cp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in struct{ TableName string }
		_ = json.Unmarshal(body, &in)
		table := in.TableName[strings.LastIndexByte(in.TableName, '-')+1:]
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
		cp.mu.Lock()
		cp.n[op+" "+table]++
		cp.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(cp.srv.Close)
	return cp
}

func (cp *countingProxy) snapshot() map[string]int64 {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := make(map[string]int64, len(cp.n))
	for k, v := range cp.n {
		out[k] = v
	}
	return out
}

// MeasureReshard reports, asserting nothing, how long after a split and a merge of a
// caught-up, idle stream s the children are open on a worker (default flags, two workers):
// the time for the parents' owners to read them to their end, finish their leases, list the
// children, take their leases and open them. Then events put to the children are handled, and
// the read model is checked. Opt-in with Measure.
func MeasureReshard(t *testing.T, bin string, b Backend, s Stream) {
	e := newEnv(t, bin, b, s)
	fs := flights(t)[:4000]
	e.Create(4)
	e.Append(fs[:2000])
	ws := []*Worker{e.Start("w1", Spec{}), e.Start("w2", Spec{})}
	e.WaitOwners("2/2", 2*time.Minute, func(m map[string]int) bool { return m["w1"] == 2 && m["w2"] == 2 })
	e.WaitCaughtUp(3 * time.Minute)
	opened := func(children []string, after time.Time) time.Time {
		var last time.Time
		e.Eventually("the children open", 2*time.Minute, func() (bool, string) {
			left := map[string]bool{}
			for _, c := range children {
				left[c] = true
			}
			for _, w := range ws {
				for _, r := range Where(w.Records(t), Is("open")) {
					if left[r.Shard] && r.Time.After(after) {
						delete(left, r.Shard)
						last = later(last, r.Time)
					}
				}
			}
			return len(left) == 0, fmt.Sprint(left)
		})
		return last
	}
	time.Sleep(2 * time.Second) // idle: the readers at their slowest
	split, at := e.Reshard("split", []string{e.ShardAt(0)})
	t.Logf("%s on %s: split of an idle, caught-up shard: both children open %s after `split` returned",
		s.Name, b.Name, opened(split, at).Sub(at).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	merged, at := e.Reshard("merge", []string{e.ShardAt(2), e.ShardAt(3)})
	t.Logf("%s on %s: merge of two idle, caught-up shards: the child open %s after `merge` returned",
		s.Name, b.Name, opened(merged, at).Sub(at).Round(time.Millisecond))
	e.Append(fs[2000:])
	e.WaitCaughtUp(3 * time.Minute)
	for _, w := range ws {
		w.Stop(t)
	}
	e.Finish(fs)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
