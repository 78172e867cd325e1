package statuspage

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/status"
	"github.com/projhost/projhost/store/sqlite"
)

type fakeSource struct {
	shards []source.Shard
	heads  map[string]string
	err    error
}

func (f fakeSource) Shards(context.Context) ([]source.Shard, error) { return f.shards, f.err }
func (f fakeSource) Head(_ context.Context, id string) (string, error) {
	return f.heads[id], nil
}

const (
	hostileShard = `<script>alert("shard")</script>`
	hostileStop  = `handler failed: <img src=x onerror=alert(1)> & "quoted"`
	hostileError = `</td><b>boom</b>`
)

// newServer serves a Page over an embedded store with two shards: one with a hostile id that
// this worker owns (with a live error), one stopped with a hostile reason.
func newServer(t *testing.T, srcErr error) (*httptest.Server, *Page) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	src := fakeSource{shards: []source.Shard{{ID: hostileShard}, {ID: "s2"}}, heads: map[string]string{hostileShard: "10", "s2": "4"}, err: srcErr}
	for _, id := range []string{hostileShard, "s2"} {
		if err := st.Leases.Create(ctx, shardmap.Lease{Projection: "p", ShardID: id, Owner: "w<1>", Counter: 1, Epoch: 1, State: shardmap.StateActive}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Cursors.Claim(ctx, "p", id, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Cursors.Save(ctx, "p", hostileShard, 1, "7"); err != nil {
		t.Fatal(err)
	}
	if err := st.Cursors.Stop(ctx, "p", "s2", 1, hostileStop); err != nil {
		t.Fatal(err)
	}
	live := status.NewLive()
	h := live.Hooks()
	si := projection.ShardInfo{Projection: "p", ShardID: hostileShard, Epoch: 1}
	h.Lease(projection.LeaseInfo{ShardInfo: si, Event: projection.LeaseAcquired})
	h.Lag(projection.LagInfo{ShardInfo: si, EventsBehind: 2, MillisBehind: 1500})
	h.HandlerError(projection.HandlerErrorInfo{ShardInfo: si, Kind: "fail", Err: errors.New(hostileError)})
	p, err := New(Config{Status: status.Config{Stores: st, Source: src, Header: src}, Projections: []string{"p"}, Live: live, Worker: "w<1>"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for pattern, h := range p.Routes() {
		mux.Handle(pattern, h)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, p
}

func do(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPageEscapes: shard ids, owners, stop reasons and handler errors are user text: the page
// shows them escaped, never as markup.
func TestPageEscapes(t *testing.T) {
	srv, _ := newServer(t, nil)
	code, body := do(t, "GET", srv.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("GET / = %d\n%s", code, body)
	}
	for _, raw := range []string{hostileShard, "<img", "<b>boom", "w<1>"} {
		if strings.Contains(body, raw) {
			t.Errorf("page holds %q unescaped", raw)
		}
	}
	for _, want := range []string{
		`&lt;script&gt;alert(&#34;shard&#34;)&lt;/script&gt;`,
		`handler failed: &lt;img src=x onerror=alert(1)&gt; &amp; &#34;quoted&#34;`,
		`fail: &lt;/td&gt;&lt;b&gt;boom&lt;/b&gt;`,
		`<td class="state stopped">stopped</td>`,
		`<td class="cursor num">7</td>`,
		`<td class="lag-ms num">1500</td>`,
		`<td class="lag-events num">2</td>`, // the owner's last read, not the stores' 3
		`w&lt;1&gt;`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestPageRequests: what each method and path gets.
func TestPageRequests(t *testing.T) {
	srv, _ := newServer(t, nil)
	cases := []struct {
		method, path string
		code         int
		body         string // a part of the body; "" for none
	}{
		{"GET", "/", 200, "<h1>projhost status</h1>"},
		{"HEAD", "/", 200, ""},
		{"GET", "/status.json", 200, `"run_state":"stopped"`},
		{"HEAD", "/status.json", 200, ""},
		{"POST", "/", 405, ""},
		{"DELETE", "/", 405, ""},
		{"PUT", "/status.json", 405, ""},
		{"GET", "/nope", 404, ""},
		{"GET", "/index.html", 404, ""},
		{"GET", "/%3Cscript%3E", 404, ""},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			code, body := do(t, c.method, srv.URL+c.path)
			if code != c.code {
				t.Fatalf("%d, want %d: %s", code, c.code, body)
			}
			if c.body != "" && !strings.Contains(body, c.body) {
				t.Fatalf("body lacks %q:\n%s", c.body, body)
			}
			if c.method == "HEAD" && body != "" {
				t.Fatalf("HEAD with a body: %q", body)
			}
			if strings.Contains(body, "goroutine ") || strings.Contains(body, ".go:") {
				t.Fatalf("a stack trace in the answer:\n%s", body)
			}
		})
	}
}

// TestPageJSON: /status.json has the rows, the live figures and the samples Sample took.
func TestPageJSON(t *testing.T) {
	srv, p := newServer(t, nil)
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if err := p.Sample(context.Background(), t0.Add(time.Duration(i)*2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	_, body := do(t, "GET", srv.URL+"/status.json")
	var snap Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if snap.Worker != "w<1>" || len(snap.Projections) != 1 {
		t.Fatalf("%+v", snap)
	}
	pr := snap.Projections[0]
	if len(pr.Shards) != 2 || pr.Shards[0].Shard != hostileShard || pr.Shards[0].Cursor != "7" || pr.Shards[0].Live == nil || !pr.Shards[0].Live.Owned ||
		pr.Shards[1].RunState != status.RunStopped || pr.Shards[1].Stopped != hostileStop || pr.Shards[1].Live != nil {
		t.Fatalf("shards: %+v", pr.Shards)
	}
	// Lag: the owned shard's last read (2) plus the other's stores' lag (4 - 0).
	if pr.LagEvents != 6 || pr.LagMillis != 1500 || len(pr.Samples) != 3 || pr.Samples[2].Events != 6 || !pr.Samples[0].At.Equal(t0) {
		t.Fatalf("lag %d events %d ms, samples %+v", pr.LagEvents, pr.LagMillis, pr.Samples)
	}
}

// TestPageStoreFailure: a failing store answers 503 with the error, escaped.
func TestPageStoreFailure(t *testing.T) {
	srv, _ := newServer(t, errors.New("stream <gone>"))
	code, body := do(t, "GET", srv.URL+"/")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "stream &lt;gone&gt;") {
		t.Fatalf("%d:\n%s", code, body)
	}
	code, body = do(t, "GET", srv.URL+"/status.json")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"error"`) {
		t.Fatalf("%d:\n%s", code, body)
	}
}

func TestNewErrors(t *testing.T) {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ok := status.Config{Stores: st, Source: fakeSource{}}
	cases := []struct {
		name string
		cfg  Config
	}{
		{"no stores", Config{Projections: []string{"p"}}},
		{"no projection", Config{Status: ok}},
		{"negative sample interval", Config{Status: ok, Projections: []string{"p"}, SampleEvery: -1}},
		{"refresh under 1s", Config{Status: ok, Projections: []string{"p"}, Refresh: time.Millisecond}},
	}
	for _, c := range cases {
		if _, err := New(c.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", c.name, err)
		}
	}
}

func TestDrawChart(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cases := []struct {
		name    string
		samples []sample
		want    chart
	}{
		{"none", nil, chart{Unit: "events"}},
		{"events", []sample{{at(0), 100, -1}, {at(30), 50, -1}, {at(60), 0, -1}},
			chart{Unit: "events", Points: "0.0,0.0 180.0,40.0 360.0,80.0", Max: 100, Last: 0, N: 3}},
		{"ms when events unknown", []sample{{at(30), -1, 400}, {at(60), -1, 200}},
			chart{Unit: "ms", Points: "180.0,0.0 360.0,40.0", Max: 400, Last: 200, N: 2}},
		{"unknown values left out", []sample{{at(0), 10, -1}, {at(30), -1, -1}, {at(60), 10, -1}},
			chart{Unit: "events", Points: "0.0,0.0 360.0,0.0", Max: 10, Last: 10, N: 2}},
		{"all zero: flat at the bottom", []sample{{at(0), 0, 0}, {at(60), 0, 0}},
			chart{Unit: "events", Points: "0.0,80.0 360.0,80.0", N: 2}},
		{"older than the span: clipped at 0", []sample{{at(0), 5, -1}, {at(120), 5, -1}},
			chart{Unit: "events", Points: "0.0,0.0 360.0,0.0", Max: 5, Last: 5, N: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := drawChart(c.samples, time.Minute)
			c.want.W, c.want.H, c.want.Span = chartW, chartH, "1m0s"
			if got != c.want {
				t.Fatalf("\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestRing(t *testing.T) {
	r := &ring{buf: make([]sample, 3)}
	for i := range 5 {
		r.add(sample{Events: int64(i)})
	}
	got := r.list()
	if len(got) != 3 || got[0].Events != 2 || got[2].Events != 4 {
		t.Fatalf("%+v", got)
	}
}
