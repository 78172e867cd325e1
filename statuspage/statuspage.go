// Package statuspage is a worker's status page: server-rendered HTML at / of its listener
// (`projhost run --listen ADDR`) and the same facts as JSON at /status.json. Per projection and
// shard it shows what the stores say (package status: the owner and whether its lease is live
// or expired, the state, cursor, lag in events, dead letters, module version) and what this
// worker knows of the shards it runs (status.Live, from the core's hooks: events/s, the lag
// of its last read in events and ms, its last error, the module it runs), and a chart of each
// projection's lag over the last minutes, drawn server-side as inline SVG from a ring of
// samples kept in memory. The page reloads itself (a meta refresh) and needs no JavaScript.
//
// Use: New, then Run in a goroutine (it samples the lag until its context ends), and mount
// Routes on the listener's mux. Every text that comes from users (shard ids, worker ids,
// errors, module names) goes through html/template's contextual escaping.
//
// Requests: GET or HEAD / and /status.json; other methods get 405 and unknown paths 404 from
// the mux. A store that fails answers 503 with the error, escaped; never a stack trace.
//
// Concurrency: a Page is safe for concurrent use; each request reads the stores (one List of
// the leases, the pauses, dead letters and registry versions per projection, one cursor and
// head per shard), so a page view costs about what `projhost status` does, without probing
// Kinesis.
package statuspage

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/projhost/projhost/status"
)

// Defaults of Config.
const (
	DefaultSampleEvery = 2 * time.Second
	DefaultSamples     = 180 // 6 minutes at DefaultSampleEvery
	DefaultRefresh     = 5 * time.Second
	// RequestTimeout bounds the store reads of one request.
	RequestTimeout = 10 * time.Second
)

// ErrConfig is wrapped by New's errors.
var ErrConfig = errors.New("statuspage: bad configuration")

// Config configures a Page.
type Config struct {
	// Status says where the stores and the source are (status.Config). Its Prober is not
	// used (the page never probes Kinesis: a shard's lag in ms comes from its owner's reads);
	// its Watcher, when nil, is made with LeaseDuration.
	Status status.Config
	// Projections are the projections shown, in this order. Required.
	Projections []string
	// Live is this worker's figures (nil: none; the page then shows the stores' only).
	Live *status.Live
	// Worker is this worker's id, shown in the heading and to mark the shards it owns.
	Worker string
	// LeaseDuration is the workers' lease duration, by which lease liveness is judged
	// (status.Watcher; default shardmap.DefaultLeaseDuration).
	LeaseDuration time.Duration
	// SampleEvery is how often Run samples the lag for the charts and events/s (default 2s);
	// Samples how many samples a projection's chart keeps (default 180).
	SampleEvery time.Duration
	Samples     int
	// Refresh is how often the page reloads itself (default 5s, at least 1s).
	Refresh time.Duration
	// Logger receives sampling errors (nil: slog.Default()).
	Logger *slog.Logger
}

// Page serves the status page. Create it with New.
type Page struct {
	cfg Config

	mu      sync.Mutex
	samples map[string]*ring // per projection
}

// New checks cfg, fills in the defaults and returns a Page. Errors wrap ErrConfig.
func New(cfg Config) (*Page, error) {
	switch {
	case cfg.Status.Stores == nil || cfg.Status.Source == nil:
		return nil, fmt.Errorf("%w: Status.Stores and Status.Source are required", ErrConfig)
	case len(cfg.Projections) == 0:
		return nil, fmt.Errorf("%w: name at least one projection", ErrConfig)
	case cfg.SampleEvery < 0 || cfg.Samples < 0 || cfg.Refresh < 0:
		return nil, fmt.Errorf("%w: negative SampleEvery, Samples or Refresh (0 takes the default)", ErrConfig)
	case cfg.Refresh > 0 && cfg.Refresh < time.Second:
		return nil, fmt.Errorf("%w: Refresh %v is under 1s", ErrConfig, cfg.Refresh)
	}
	if cfg.SampleEvery == 0 {
		cfg.SampleEvery = DefaultSampleEvery
	}
	if cfg.Samples == 0 {
		cfg.Samples = DefaultSamples
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Status.Prober = nil
	if cfg.Status.Watcher == nil {
		cfg.Status.Watcher = status.NewWatcher(cfg.LeaseDuration, nil)
	}
	p := &Page{cfg: cfg, samples: map[string]*ring{}}
	for _, name := range cfg.Projections {
		p.samples[name] = &ring{buf: make([]sample, cfg.Samples)}
	}
	return p, nil
}

// Routes are the page's routes for an http.ServeMux (web.Server.Handle): "GET /{$}" (the
// page; GET patterns take HEAD too) and "GET /status.json".
func (p *Page) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /{$}":         http.HandlerFunc(p.serveHTML),
		"GET /status.json": http.HandlerFunc(p.serveJSON),
	}
}

// Run samples every SampleEvery until ctx ends: the lag of each projection for its chart, and
// Live's event counts for events/s. A failed sample is logged and skipped.
func (p *Page) Run(ctx context.Context) {
	t := time.NewTicker(p.cfg.SampleEvery)
	defer t.Stop()
	for {
		if err := p.Sample(ctx, time.Now()); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn("status page: sampling the lag", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample takes one sample at now (what Run does every SampleEvery). Errors: the stores'.
func (p *Page) Sample(ctx context.Context, now time.Time) error {
	if p.cfg.Live != nil {
		p.cfg.Live.Sample(now)
	}
	snap, err := p.snapshot(ctx, now)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range snap.Projections {
		p.samples[pr.Name].add(sample{At: now, Events: pr.LagEvents, Millis: pr.LagMillis})
	}
	return nil
}

// Snapshot is the JSON of /status.json: every projection shown, with its shards and its lag
// samples.
type Snapshot struct {
	Worker      string       `json:"worker"`
	Time        time.Time    `json:"time"`
	Projections []Projection `json:"projections"`
}

// Projection is one projection of a Snapshot.
type Projection struct {
	Name   string  `json:"name"`
	Shards []Shard `json:"shards"`
	// LagEvents is the projection's lag in events now: the sum over its shards of the lag of
	// the owner's last read for the shards this worker runs, else the stores' (head - cursor);
	// -1 when no shard's is known (Kinesis). LagMillis: the largest lag in ms this worker
	// read, -1 unknown.
	LagEvents int64 `json:"lag_events"`
	LagMillis int64 `json:"lag_ms"`
	// Samples are the lag samples of the chart, oldest first.
	Samples []sample `json:"samples"`
}

// Shard is a shard of a Projection: the stores' row, and this worker's figures when it ran
// the shard.
type Shard struct {
	status.Row
	Live *status.LiveShard `json:"live,omitempty"`
}

type sample struct {
	At     time.Time `json:"t"`
	Events int64     `json:"lag_events"` // -1 unknown
	Millis int64     `json:"lag_ms"`     // -1 unknown
}

// ring keeps the last len(buf) samples.
type ring struct {
	buf  []sample
	next int
	n    int
}

func (r *ring) add(s sample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	r.n = min(r.n+1, len(r.buf))
}

func (r *ring) list() []sample {
	out := make([]sample, 0, r.n)
	for i := r.n; i > 0; i-- {
		out = append(out, r.buf[(r.next-i+len(r.buf))%len(r.buf)])
	}
	return out
}

// snapshot reads the stores and Live.
func (p *Page) snapshot(ctx context.Context, now time.Time) (Snapshot, error) {
	rows, err := status.Rows(ctx, p.cfg.Status, p.cfg.Projections)
	if err != nil {
		return Snapshot{}, err
	}
	snap := Snapshot{Worker: p.cfg.Worker, Time: now}
	byName := map[string]int{}
	for _, name := range p.cfg.Projections {
		byName[name] = len(snap.Projections)
		snap.Projections = append(snap.Projections, Projection{Name: name, LagEvents: -1, LagMillis: -1})
	}
	for _, r := range rows {
		pr := &snap.Projections[byName[r.Projection]]
		sh := Shard{Row: r}
		lagEv := r.LagEvents
		if p.cfg.Live != nil {
			if l, ok := p.cfg.Live.Shard(r.Projection, r.Shard); ok {
				sh.Live = &l
				if l.Owned && l.LagEvents >= 0 {
					lagEv = l.LagEvents
				}
				if l.Owned && l.LagMillis >= 0 {
					pr.LagMillis = max(pr.LagMillis, l.LagMillis)
				}
			}
		}
		if lagEv >= 0 {
			pr.LagEvents = max(pr.LagEvents, 0) + lagEv
		}
		pr.Shards = append(pr.Shards, sh)
	}
	return snap, nil
}

// withSamples adds the kept samples to snap's projections.
func (p *Page) withSamples(snap *Snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range snap.Projections {
		snap.Projections[i].Samples = p.samples[snap.Projections[i].Name].list()
	}
}

func (p *Page) serveJSON(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), RequestTimeout)
	defer cancel()
	snap, err := p.snapshot(ctx, time.Now())
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	p.withSamples(&snap)
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(snap); err != nil {
		http.Error(w, "encoding the status failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(buf.Bytes())
}

//go:embed page.html
var pageHTML string

var pageTmpl = template.Must(template.New("page").Parse(pageHTML))

func (p *Page) serveHTML(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), RequestTimeout)
	defer cancel()
	now := time.Now()
	snap, err := p.snapshot(ctx, now)
	v := view{Worker: p.cfg.Worker, Time: now.UTC().Format(time.RFC3339), Refresh: int(p.cfg.Refresh / time.Second)}
	code := http.StatusOK
	if err != nil {
		code, v.Error = http.StatusServiceUnavailable, err.Error()
	} else {
		p.withSamples(&snap)
		for _, pr := range snap.Projections {
			v.Projections = append(v.Projections, p.projectionView(pr, now))
		}
	}
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, v); err != nil {
		p.cfg.Logger.Warn("status page: rendering", "err", err)
		http.Error(w, "rendering the status page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// view is what the template renders: every figure formatted, every user text left to the
// template's escaping.
type view struct {
	Worker, Time, Error string
	Refresh             int
	Projections         []projectionView
}

type projectionView struct {
	Name             string
	Running, Shards  int
	LagEvents, LagMs string
	Chart            chart
	Rows             []rowView
	Expired          int
}

type rowView struct {
	Shard, Owner, Lease, State, Cursor, LagEvents, LagMs, Rate, Error, Version string
	Mine, Expired                                                              bool
	DeadLetters                                                                int
	StateClass                                                                 string
}

func (p *Page) projectionView(pr Projection, now time.Time) projectionView {
	pv := projectionView{Name: pr.Name, Shards: len(pr.Shards), LagEvents: figure(pr.LagEvents), LagMs: figure(pr.LagMillis)}
	for _, sh := range pr.Shards {
		rv := rowView{Shard: sh.Shard, Owner: dash(sh.Owner), Lease: sh.Lease, State: sh.RunState, StateClass: sh.RunState,
			Cursor: dash(sh.Cursor), LagEvents: figure(sh.LagEvents), LagMs: "-", Rate: "-", DeadLetters: sh.DeadLetters, Error: sh.Stopped}
		if sh.Lease == status.LeaseFree {
			rv.Lease = "-"
		} else if sh.Lease == status.LeaseExpired {
			rv.Lease, rv.Expired = fmt.Sprintf("expired (silent %s)", (time.Duration(sh.LeaseSilentMs)*time.Millisecond).Round(time.Second)), true
			pv.Expired++
		}
		if sh.Version > 0 {
			rv.Version = "v" + strconv.FormatInt(sh.Version, 10)
		}
		if l := sh.Live; l != nil {
			if l.Owned {
				rv.Mine = true
				if l.LagEvents >= 0 {
					rv.LagEvents = figure(l.LagEvents)
				}
				rv.LagMs = figure(l.LagMillis)
				rv.Rate = strconv.FormatFloat(l.EventsPerSec, 'f', 0, 64)
				if l.Module != "" {
					rv.Version = strings.TrimSpace(rv.Version + " (" + l.Module + ")")
				}
			}
			if l.LastError != "" {
				rv.Error = l.LastError + " (" + now.Sub(l.LastErrorAt).Round(time.Second).String() + " ago)"
			}
		}
		if sh.RunState == status.RunRunning {
			pv.Running++
		}
		pv.Rows = append(pv.Rows, rv)
	}
	// The x axis covers the samples kept (at least 30 s), up to the ring's whole span.
	span := p.cfg.SampleEvery * time.Duration(p.cfg.Samples)
	if n := len(pr.Samples); n > 0 {
		span = min(span, max(pr.Samples[n-1].At.Sub(pr.Samples[0].At), 30*time.Second))
	}
	pv.Chart = drawChart(pr.Samples, span)
	return pv
}

func figure(n int64) string {
	if n < 0 {
		return "?"
	}
	return strconv.FormatInt(n, 10)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
