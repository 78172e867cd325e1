package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/projhost/projhost/internal/durations"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/store/sqlite"
)

// Defaults of SustainedOptions.
const (
	DefaultSustainedDuration = 60 * time.Second
	DefaultSustainedCatchUp  = 2 * time.Minute
	DefaultSustainedSample   = 200 * time.Millisecond
	// DefaultSustainedBalance bounds the wait for the workers to share the shards before the
	// append starts.
	DefaultSustainedBalance = 2 * time.Minute
)

// SustainedOptions configures MeasureSustained: a journal of Shards shards, Workers `projhost
// run` processes projecting it with Handler, and one `projhost journal append` process fed the
// JSON lines of EventsPath (gzip ok) on its stdin for at most Duration, all at once.
type SustainedOptions struct {
	// Projhost is the projhost binary the processes run. Required (the command passes its own
	// executable).
	Projhost string
	// EventsPath is a JSON lines file (one event object per line; .gz ok). Required.
	EventsPath string
	// KeyField is the partition key field (default DefaultKeyField).
	KeyField string
	// Shards is the journal's shard count (1 to 1000; default 100); Workers the worker processes
	// (1 to 16; default 2).
	Shards, Workers int
	// Handler is the module the workers run (required); Trusted runs it without the per-batch
	// deadline (run --trusted).
	Handler string
	Trusted bool
	// Rate caps the events/s written to the append process (0: as fast as it takes them).
	Rate int
	// Duration is the most time the append runs (default 60s); it also ends at the file's end.
	Duration time.Duration
	// CatchUp is the most time to wait after the append for the workers to project every event
	// (default 2m); Balance the most time to wait before it for the workers to share the shards
	// evenly (default 2m; the run goes on unbalanced after it, and says so).
	CatchUp, Balance time.Duration
	// Sample is how often every worker's /metrics is read for the lag (default 200ms).
	Sample time.Duration
	// LeaseDuration and BatchSize are passed to run when positive (run's defaults otherwise).
	LeaseDuration time.Duration
	BatchSize     int
	// Check compares the read model at the end with an independent computation over the events
	// appended: "flightdelays" (internal/flightcheck) or "" (no check).
	Check string
	// TempDir is where the journal and the store are made (default os.TempDir()); Keep keeps
	// them (and the processes' logs) instead of removing them.
	TempDir string
	Keep    bool
	// Logger receives progress lines (nil: none).
	Logger *slog.Logger
}

// SustainedWorker is one worker process's figures.
type SustainedWorker struct {
	ID string
	// Events is what its handler accepted (projhost_events_total); LeasesAcquired and LeasesLost
	// what its lease counters (projhost_leases_*_total) grew by from the append's start until the
	// projection caught up; LeasesLostBefore its losses before, while the workers shared out the
	// shards (a lease taken over by another worker before its owner released it).
	Events, LeasesAcquired, LeasesLost, LeasesLostBefore int64
	// CPU is the user + system time of the process, from start to exit.
	CPU time.Duration
}

// SustainedResult is what MeasureSustained measured.
type SustainedResult struct {
	Shards int
	// Appended is the events written to the append process (all of them went in: it exited 0);
	// AppendTime from its first event to its exit; AppendCPU its user + system time.
	Appended   int64
	AppendTime time.Duration
	AppendCPU  time.Duration
	// ProjectTime is from the append's start until every appended event was projected (the
	// workers' event counters summed to Appended and every shard's lag was 0).
	ProjectTime time.Duration
	// Lag figures over every shard's lag as its owner reported it in the samples taken while
	// the append ran (projhost_shard_lag_events and _seconds of /metrics).
	LagEventsMax, LagEventsP99 int64
	LagMillisMax, LagMillisP99 int64
	Samples                    int
	// Balanced says whether the workers shared the shards evenly (held counts differing by at
	// most 1) before the append started; BalanceTime is how long that took.
	Balanced    bool
	BalanceTime time.Duration
	Workers     []SustainedWorker
	// Checked says the read model was compared (Check set) and equal.
	Checked bool
	// Dir is where the journal, store and logs are when Keep was set.
	Dir string
}

// AppendRate and ProjectRate are events/s of the append and of the projection (0 when unknown).
func (r SustainedResult) AppendRate() float64  { return rate(r.Appended, r.AppendTime) }
func (r SustainedResult) ProjectRate() float64 { return rate(r.Appended, r.ProjectTime) }

// LeasesLost sums the workers' lease losses during the run.
func (r SustainedResult) LeasesLost() int64 {
	var n int64
	for _, w := range r.Workers {
		n += w.LeasesLost
	}
	return n
}

// CPUPer100k is cpu per 100,000 appended events, in seconds.
func (r SustainedResult) CPUPer100k(cpu time.Duration) float64 {
	if r.Appended == 0 {
		return 0
	}
	return cpu.Seconds() * 100_000 / float64(r.Appended)
}

// ErrSustained is wrapped by MeasureSustained's errors about the run (a process that failed,
// events not projected in time, a read model that differs).
var ErrSustained = errors.New("bench sustained: the run failed")

func (o *SustainedOptions) defaults() error {
	if o.KeyField == "" {
		o.KeyField = DefaultKeyField
	}
	if o.Shards == 0 {
		o.Shards = 100
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.Duration == 0 {
		o.Duration = DefaultSustainedDuration
	}
	if o.CatchUp == 0 {
		o.CatchUp = DefaultSustainedCatchUp
	}
	if o.Balance == 0 {
		o.Balance = DefaultSustainedBalance
	}
	if o.Sample == 0 {
		o.Sample = DefaultSustainedSample
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Projhost == "" || o.EventsPath == "" || o.Handler == "":
		return fmt.Errorf("%w: the projhost binary, the events file and the handler are required", ErrArgs)
	case o.Shards < 1 || o.Shards > 1000:
		return fmt.Errorf("%w: --shards %d is not in 1..1000", ErrArgs, o.Shards)
	case o.Workers < 1 || o.Workers > 16:
		return fmt.Errorf("%w: --workers %d is not in 1..16", ErrArgs, o.Workers)
	case o.Rate < 0 || o.Duration < 0 || o.CatchUp < 0 || o.Balance < 0 || o.Sample < 0 || o.LeaseDuration < 0 || o.BatchSize < 0:
		return fmt.Errorf("%w: negative --rate, --duration, --catch-up, --balance, --sample, --lease-duration or --batch-size", ErrArgs)
	case o.Check != "" && o.Check != "flightdelays":
		return fmt.Errorf("%w: --check %q: the checks are flightdelays or none", ErrArgs, o.Check)
	}
	return nil
}

// MeasureSustained runs the sustained measurement described by SustainedOptions: it creates the
// journal, starts the workers (each with --listen on a free loopback port), waits for them to
// share the shards, then writes the events file's lines to `journal append -` for at most
// Duration (at most Rate events/s) while sampling every worker's /metrics, waits for the
// projection to catch up, reads the workers' counters, stops them (SIGTERM) and checks the read
// model. Errors: ErrArgs for bad options (also an events file that is missing or a JSON array and
// a handler file that cannot be opened, refused before any process starts), ErrSustained (with
// the process's log tail) for a failed run, ctx's error.
func MeasureSustained(ctx context.Context, o SustainedOptions) (*SustainedResult, error) {
	res, err := measureSustained(ctx, o)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		// A process stopped by the cancellation reports it in its own words.
		return nil, fmt.Errorf("%w: %w", ctx.Err(), err)
	}
	return res, err
}

func measureSustained(ctx context.Context, o SustainedOptions) (*SustainedResult, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if err := checkInputs(o.EventsPath, o.Handler); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(o.TempDir, "projhost-bench-sustained-")
	if err != nil {
		return nil, err
	}
	res := &SustainedResult{Shards: o.Shards}
	if o.Keep {
		res.Dir = dir
	} else {
		defer os.RemoveAll(dir)
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.CommandContext(ctx, o.Projhost, "journal", "create", "--data", data, "--shards", strconv.Itoa(o.Shards)).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: journal create: %v: %s", ErrSustained, err, out)
	}

	// The workers.
	ws := make([]*worker, o.Workers)
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.kill()
			}
		}
	}()
	for i := range ws {
		w, err := startWorker(ctx, o, data, dir, fmt.Sprintf("w%d", i+1))
		if err != nil {
			return nil, err
		}
		ws[i] = w
	}
	t0 := time.Now()
	for {
		held, err := scrapeAll(ctx, ws)
		if err == nil {
			total, lo, hi := 0, o.Shards, 0
			for _, m := range held {
				n := int(m.leasesHeld)
				total, lo, hi = total+n, min(lo, n), max(hi, n)
			}
			if total == o.Shards && hi-lo <= 1 {
				res.Balanced, res.BalanceTime = true, time.Since(t0)
				break
			}
		}
		if time.Since(t0) > o.Balance {
			o.Logger.Warn("bench sustained: the workers did not share the shards evenly in time; appending anyway", "after", o.Balance)
			break
		}
		if !durations.Sleep(ctx, 250*time.Millisecond) {
			return nil, ctx.Err()
		}
		for _, w := range ws {
			if w.exited() {
				return nil, w.failure("exited before the append")
			}
		}
	}
	before, err := scrapeAll(ctx, ws)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the workers' metrics before the append: %v", ErrSustained, err)
	}
	o.Logger.Info("bench sustained: workers ready", "workers", o.Workers, "shards", o.Shards, "balanced", res.Balanced, "after", time.Since(t0).Round(time.Millisecond))

	// The append, fed from the file while the workers' lag is sampled.
	appLog, err := os.Create(filepath.Join(dir, "append.log"))
	if err != nil {
		return nil, err
	}
	defer appLog.Close()
	app := exec.Command(o.Projhost, "journal", "append", "--data", data, "--key-field", o.KeyField, "-")
	dieWithParent(app)
	app.Stdout, app.Stderr = appLog, appLog
	stdin, err := app.StdinPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := app.Start(); err != nil {
		return nil, fmt.Errorf("%w: starting journal append: %v", ErrSustained, err)
	}
	samp := &lagSampler{}
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		samp.run(sctx, ws, o.Sample)
	}()
	n, ferr := feedLines(ctx, stdin, o.EventsPath, o.Duration, o.Rate)
	stdin.Close()
	werr := app.Wait()
	res.AppendTime = time.Since(start)
	res.Appended = n
	if app.ProcessState != nil {
		res.AppendCPU = cpuOf(app.ProcessState)
	}
	if ferr != nil || werr != nil {
		stopSampling()
		<-sampled
		return nil, fmt.Errorf("%w: journal append: %v: %s", ErrSustained, errors.Join(ferr, werr), tail(appLog.Name()))
	}
	o.Logger.Info("bench sustained: appended", "events", n, "in", res.AppendTime.Round(time.Millisecond))

	// Caught up: the counters sum to what was appended and every shard's lag is 0.
	deadline := time.Now().Add(o.CatchUp)
	for {
		ms, err := scrapeAll(ctx, ws)
		if err == nil {
			var events int64
			zero := true
			for _, m := range ms {
				events += m.events
				for _, l := range m.lagEvents {
					zero = zero && l == 0
				}
			}
			if events >= n && zero {
				res.ProjectTime = time.Since(start)
				break
			}
		}
		if time.Now().After(deadline) {
			stopSampling()
			<-sampled
			var logs strings.Builder
			for _, w := range ws {
				fmt.Fprintf(&logs, "\nworker %s: %s", w.id, tail(w.log))
			}
			return nil, fmt.Errorf("%w: the workers did not project the %d events within %v of the append's end (--catch-up)%s", ErrSustained, n, o.CatchUp, logs.String())
		}
		for _, w := range ws {
			if w.exited() {
				stopSampling()
				<-sampled
				return nil, w.failure("exited during the run")
			}
		}
		if !durations.Sleep(ctx, 20*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	stopSampling()
	<-sampled
	res.LagEventsMax, res.LagEventsP99, res.LagMillisMax, res.LagMillisP99, res.Samples = samp.summary()

	// The workers' counters, then stop them.
	final, err := scrapeAll(ctx, ws)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the workers' metrics at the end: %v", ErrSustained, err)
	}
	for i, w := range ws {
		if err := w.stop(); err != nil {
			return nil, err
		}
		res.Workers = append(res.Workers, SustainedWorker{ID: w.id, Events: final[i].events,
			LeasesAcquired: final[i].leasesAcquired - before[i].leasesAcquired, LeasesLost: final[i].leasesLost - before[i].leasesLost,
			LeasesLostBefore: before[i].leasesLost, CPU: w.cpu})
		ws[i] = nil
	}

	if o.Check == "flightdelays" {
		if err := checkFlightDelays(ctx, data, o.EventsPath, n); err != nil {
			return nil, err
		}
		res.Checked = true
	}
	return res, nil
}

// worker is one `projhost run` process.
type worker struct {
	id, addr, log string
	cmd           *exec.Cmd
	done          chan struct{}
	cpu           time.Duration
}

func startWorker(ctx context.Context, o SustainedOptions, data, dir, id string) (*worker, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	w := &worker{id: id, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), log: filepath.Join(dir, id+".log"), done: make(chan struct{})}
	args := []string{"run", "--data", data, "--name", "sustained", "--handler", o.Handler, "--worker-id", id,
		"--listen", w.addr, "--log-level", "warn"}
	if o.Trusted {
		args = append(args, "--trusted")
	}
	if o.LeaseDuration > 0 {
		args = append(args, "--lease-duration", o.LeaseDuration.String())
	}
	if o.BatchSize > 0 {
		args = append(args, "--batch-size", strconv.Itoa(o.BatchSize))
	}
	f, err := os.Create(w.log)
	if err != nil {
		return nil, err
	}
	w.cmd = exec.Command(o.Projhost, args...)
	dieWithParent(w.cmd)
	w.cmd.Stdout, w.cmd.Stderr = f, f
	if err := w.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: starting worker %s: %v", ErrSustained, id, err)
	}
	go func() {
		w.cmd.Wait()
		f.Close()
		close(w.done)
	}()
	return w, nil
}

func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (w *worker) failure(what string) error {
	return fmt.Errorf("%w: worker %s %s (%v): %s", ErrSustained, w.id, what, w.cmd.ProcessState, tail(w.log))
}

// stop sends SIGTERM and waits (at most a minute) for the worker to exit 0.
func (w *worker) stop() error {
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(time.Minute):
		w.kill()
		return fmt.Errorf("%w: worker %s did not stop within a minute of SIGTERM: %s", ErrSustained, w.id, tail(w.log))
	}
	w.cpu = cpuOf(w.cmd.ProcessState)
	if !w.cmd.ProcessState.Success() {
		return w.failure("failed at SIGTERM")
	}
	return nil
}

func (w *worker) kill() {
	if !w.exited() {
		w.cmd.Process.Kill()
		<-w.done
	}
}

func cpuOf(ps *os.ProcessState) time.Duration { return ps.UserTime() + ps.SystemTime() }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// metrics is what one scrape of a worker's /metrics gave.
type metrics struct {
	events, leasesAcquired, leasesLost, leasesHeld int64
	lagEvents, lagMillis                           map[string]int64 // by shard
}

var scrapeClient = &http.Client{Timeout: 10 * time.Second}

func scrapeAll(ctx context.Context, ws []*worker) ([]metrics, error) {
	out := make([]metrics, len(ws))
	for i, w := range ws {
		m, err := scrape(ctx, w.addr)
		if err != nil {
			return nil, fmt.Errorf("worker %s: %w", w.id, err)
		}
		out[i] = m
	}
	return out, nil
}

// scrape reads the projhost metrics of one worker.
func scrape(ctx context.Context, addr string) (metrics, error) {
	m := metrics{lagEvents: map[string]int64{}, lagMillis: map[string]int64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return m, err
	}
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return m, fmt.Errorf("GET /metrics: %w", err)
	}
	sum := func(name string) int64 {
		var n float64
		if f := fams[name]; f != nil {
			for _, mt := range f.GetMetric() {
				n += mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
			}
		}
		return int64(n)
	}
	m.events = sum("projhost_events_total")
	m.leasesAcquired = sum("projhost_leases_acquired_total")
	m.leasesLost = sum("projhost_leases_lost_total")
	m.leasesHeld = sum("projhost_leases_held")
	byShard := func(name string, scale float64, into map[string]int64) {
		if f := fams[name]; f != nil {
			for _, mt := range f.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "shard" {
						into[l.GetValue()] = int64(mt.GetGauge().GetValue()*scale + 0.5)
					}
				}
			}
		}
	}
	byShard("projhost_shard_lag_events", 1, m.lagEvents)
	byShard("projhost_shard_lag_seconds", 1000, m.lagMillis)
	return m, nil
}

// lagSampler keeps every shard's lag from every sample.
type lagSampler struct {
	mu             sync.Mutex
	events, millis []int64
	samples        int
}

func (s *lagSampler) run(ctx context.Context, ws []*worker, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if ms, err := scrapeAll(ctx, ws); err == nil {
			s.mu.Lock()
			s.samples++
			for _, m := range ms {
				for _, v := range m.lagEvents {
					s.events = append(s.events, v)
				}
				for _, v := range m.lagMillis {
					s.millis = append(s.millis, v)
				}
			}
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *lagSampler) summary() (evMax, evP99, msMax, msP99 int64, samples int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	evMax, evP99 = maxP99(s.events)
	msMax, msP99 = maxP99(s.millis)
	return evMax, evP99, msMax, msP99, s.samples
}

// maxP99 returns the largest value and the 99th percentile (nearest rank) of vs (0, 0 for none).
func maxP99(vs []int64) (int64, int64) {
	if len(vs) == 0 {
		return 0, 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	rank := (99*len(s) + 99) / 100 // ceil(0.99 n), 1-based
	return s[len(s)-1], s[rank-1]
}

// openLines opens a JSON lines file, gunzipping it when it is gzip.
func openLines(path string) (*bufio.Reader, io.Closer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(f, 1<<16)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%w: %s: gzip header: %v", ErrArgs, path, err)
		}
		return bufio.NewReaderSize(zr, 1<<16), f, nil
	}
	return br, f, nil
}

// errJSONArray refuses an events file that is a JSON array.
func errJSONArray(path string) error {
	return fmt.Errorf("%w: %s is a JSON array; bench sustained reads JSON lines (one object per line): convert it with jq -c '.[]'", ErrArgs, path)
}

// checkInputs refuses (ErrArgs), before any process starts, an events file that cannot be
// opened or is a JSON array, and a handler file that cannot be read.
func checkInputs(events, handler string) error {
	if f, err := os.Open(handler); err != nil {
		return fmt.Errorf("%w: --handler: %w", ErrArgs, err)
	} else {
		f.Close()
	}
	br, c, err := openLines(events)
	if errors.Is(err, ErrArgs) {
		return err
	} else if err != nil {
		return fmt.Errorf("%w: --events: %w", ErrArgs, err)
	}
	defer c.Close()
	for {
		b, err := br.ReadByte()
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("%w: --events: %s: %w", ErrArgs, events, err)
		case b == '[':
			return errJSONArray(events)
		case b != ' ' && b != '\t' && b != '\r' && b != '\n':
			return nil
		}
	}
}

// feedLines writes the non-empty lines of path to w, for at most d and at most rate lines/s (0:
// no cap), and returns how many it wrote. A file that is a JSON array is refused (ErrArgs).
func feedLines(ctx context.Context, w io.Writer, path string, d time.Duration, rate int) (int64, error) {
	br, c, err := openLines(path)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	bw := bufio.NewWriterSize(w, 1<<16)
	start := time.Now()
	var n int64
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			whole := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				whole = append(whole, line...)
			}
			line = whole
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if n == 0 && t[0] == '[' {
				return 0, errJSONArray(path)
			}
			if _, werr := bw.Write(t); werr != nil {
				return n, werr
			}
			if werr := bw.WriteByte('\n'); werr != nil {
				return n, werr
			}
			n++
			if n%1000 == 0 {
				el := time.Since(start)
				if el >= d || ctx.Err() != nil {
					break
				}
				if rate > 0 {
					if ahead := time.Duration(float64(n)/float64(rate)*float64(time.Second)) - el; ahead > 0 {
						if werr := bw.Flush(); werr != nil {
							return n, werr
						}
						if !durations.Sleep(ctx, ahead) {
							break
						}
					}
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
	}
	if err := ctx.Err(); err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// checkFlightDelays compares the flightdelays read model of projection "sustained" in the
// embedded store in data with flightcheck's computation over the first n lines of path.
func checkFlightDelays(ctx context.Context, data, path string, n int64) error {
	br, c, err := openLines(path)
	if err != nil {
		return err
	}
	defer c.Close()
	var e flightcheck.Expecter
	for i := int64(0); i < n; {
		line, err := br.ReadBytes('\n')
		if t := bytes.TrimSpace(line); len(t) > 0 {
			var f flightcheck.Flight
			if jerr := json.Unmarshal(t, &f); jerr != nil {
				return fmt.Errorf("%w: --check flightdelays: line %d of %s: %v", ErrSustained, i+1, path, jerr)
			}
			e.Add(f)
			i++
		}
		if err != nil && i < n {
			return fmt.Errorf("%w: --check flightdelays: %s has %d events, %d were appended: %v", ErrSustained, path, i, n, err)
		}
	}
	st, err := sqlite.OpenReadOnly(data)
	if err != nil {
		return err
	}
	defer st.Close()
	var docs []readmodel.Doc
	for _, coll := range []string{"airports", "routes"} {
		d, err := st.ReadModel.Scan(ctx, "sustained", coll)
		if err != nil {
			return err
		}
		docs = append(docs, d...)
	}
	got, err := flightcheck.Decode(docs)
	if err != nil {
		return fmt.Errorf("%w: --check flightdelays: %v", ErrSustained, err)
	}
	if diff := flightcheck.Diff(e.Model(), got, 10); len(diff) > 0 {
		return fmt.Errorf("%w: the read model differs from flightcheck's over the %d events appended:\n%s", ErrSustained, n, strings.Join(diff, "\n"))
	}
	return nil
}
