package main

// `run --listen`: /metrics scraped while flights-20k is projected; the flag's errors.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/local"
)

// scrape fetches url and parses the Prometheus text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return mfs
}

// byShard returns a metric family's values per shard label (counters and gauges).
func byShard(mf *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	if mf == nil {
		return out
	}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "shard" {
				v := m.GetGauge().GetValue()
				if mf.GetType() == dto.MetricType_COUNTER {
					v = m.GetCounter().GetValue()
				}
				out[l.GetValue()] += v
			}
		}
	}
	return out
}

func sum(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

// logLines is what a process wrote to stderr so far.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.String() }

// startRun starts `projhost run` with args and returns the process, its stderr so far (kept
// for failure messages) and the address its HTTP listener logged.
func startRun(t *testing.T, args ...string) (*exec.Cmd, *logLines, string) {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"run"}, args...)...)
	pr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var log logLines
	addrc := make(chan string, 1)
	re := regexp.MustCompile(`msg="serving HTTP" addr=(\S+)`)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			log.mu.Lock()
			log.buf.Write(sc.Bytes())
			log.buf.WriteByte('\n')
			log.mu.Unlock()
			if m := re.FindSubmatch(sc.Bytes()); m != nil {
				addrc <- string(m[1])
			}
		}
		close(addrc)
	}()
	addr, ok := <-addrc
	if !ok {
		cmd.Wait()
		t.Fatalf("projhost run exited without serving HTTP:\n%s", log.String())
	}
	return cmd, &log, addr
}

// TestMetricsWhileProjecting scrapes /metrics of a worker projecting flights-20k over 4 shards
// until every shard's lag gauges are 0, then checks the figures against the journal: the
// per-shard event counters are the shards' event counts (20,000 in all), and the other series
// are there with consistent values. SIGTERM then stops the worker and its listener.
func TestMetricsWhileProjecting(t *testing.T) {
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "4")
	projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flightcheck.DataPath("flights-20k.json"))
	heads := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(projhost(t, "journal", "status", "--data", dir, "--json")), "\n") {
		var s struct {
			Shard  string `json:"shard"`
			Events int64  `json:"events"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &s))
		heads[s.Shard] = float64(s.Events)
	}
	require.Len(t, heads, 4)
	require.Equal(t, 20000.0, sum(heads))

	cmd, log, addr := startRun(t, "--data", dir, "--name", "f", "--handler", testwasm.Path(t, testwasm.FlightDelaysAS),
		"--listen", "127.0.0.1:0", "--batch-size", "100")
	url := "http://" + addr + "/metrics"

	var mfs map[string]*dto.MetricFamily
	maxLag, scrapes := 0.0, 0
	deadline := time.Now().Add(3 * time.Minute) // a bound for a loaded machine, not a timing assertion
	for {
		mfs = scrape(t, url)
		scrapes++
		lagEv, lagS := byShard(mfs["projhost_shard_lag_events"]), byShard(mfs["projhost_shard_lag_seconds"])
		for _, v := range lagEv {
			maxLag = max(maxLag, v)
		}
		events := byShard(mfs["projhost_events_total"])
		if len(lagEv) == 4 && len(lagS) == 4 && sum(lagEv) == 0 && sum(lagS) == 0 && sum(events) == 20000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d scrapes: lag events %v, lag seconds %v, events %v; worker log:\n%s", scrapes, lagEv, lagS, events, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d scrapes; largest shard lag seen: %.0f events", scrapes, maxLag)

	require.Equal(t, heads, byShard(mfs["projhost_events_total"]), "each shard's events counter is its event count")
	batches := byShard(mfs["projhost_batches_total"])
	require.Len(t, batches, 4)
	for id, n := range batches {
		require.GreaterOrEqual(t, n, heads[id]/100, "batches of at most 100 events (%s)", id)
	}
	h := mfs["projhost_handler_duration_seconds"]
	require.NotNil(t, h)
	require.Len(t, h.GetMetric(), 1, "one histogram: per projection")
	require.Equal(t, uint64(sum(batches)), h.GetMetric()[0].GetHistogram().GetSampleCount(), "one observation per batch")
	require.Greater(t, h.GetMetric()[0].GetHistogram().GetSampleSum(), 0.0)
	for id, n := range byShard(mfs["projhost_cursor_saves_total"]) {
		require.GreaterOrEqual(t, n, 1.0, id)
	}
	require.Len(t, byShard(mfs["projhost_cursor_saves_total"]), 4)
	require.Equal(t, 4.0, mfs["projhost_leases_held"].GetMetric()[0].GetGauge().GetValue())
	require.Equal(t, 4.0, mfs["projhost_leases_acquired_total"].GetMetric()[0].GetCounter().GetValue())
	require.Nil(t, mfs["projhost_leases_lost_total"], "no lease lost: no series")
	require.Nil(t, mfs["projhost_handler_errors_total"], "no handler error: no series")
	mem := byShard(mfs["projhost_shard_memory_bytes"])
	require.Len(t, mem, 4)
	for id, b := range mem {
		require.Greater(t, b, 0.0, id)
		require.Zero(t, int64(b)%(64<<10), "whole 64 KiB pages (%s)", id)
	}
	info := mfs["projhost_shard_module_info"]
	require.NotNil(t, info)
	require.Len(t, info.GetMetric(), 4)
	for _, m := range info.GetMetric() {
		ls := map[string]string{}
		for _, l := range m.GetLabel() {
			ls[l.GetName()] = l.GetValue()
		}
		require.Equal(t, "f v1", ls["module"])
		require.Equal(t, "1", ls["version"])
		require.Equal(t, "f", ls["projection"])
		require.Contains(t, heads, ls["shard"])
		require.Equal(t, 1.0, m.GetGauge().GetValue())
	}
	require.NotNil(t, mfs["go_goroutines"], "the Go runtime's collector")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "worker log:\n%s", log.String())
	_, err := http.Get(url)
	require.Error(t, err, "the listener stops with the worker")
	require.Contains(t, log.String(), "events=20000")
}

// TestListenFlagErrors: a bad --listen address is a flag error before anything is done, and a
// port in use fails before the handler is deployed.
func TestListenFlagErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	cases := []struct {
		addr, want string
		flag       bool // refused with the flags: not even the store is opened
	}{
		{"bad", `--listen: web: bad listener configuration: address "bad" is not HOST:PORT (e.g. 127.0.0.1:9090`, true},
		{"127.0.0.1:99999", `port "99999" is not a number from 0 to 65535`, true},
		{"no such host:80", `host "no such host" is neither an IP address nor a host name`, true},
		{busy.Addr().String(), fmt.Sprintf("--listen: web: listening on %s", busy.Addr()), false},
	}
	for _, c := range cases {
		t.Run(c.addr, func(t *testing.T) {
			dir := t.TempDir()
			projhost(t, "journal", "create", "--data", dir, "--shards", "1")
			r := cli(t, nil, binPath, "run", "--data", dir, "--name", "f", "--handler", testwasm.Path(t, testwasm.FlightDelaysAS),
				"--until-caught-up", "--listen", c.addr)
			require.Error(t, r.err)
			require.Contains(t, r.stderr, c.want)
			_, err := os.Stat(filepath.Join(dir, local.FileName))
			if c.flag {
				require.ErrorIs(t, err, os.ErrNotExist, "a flag error opens no store")
				return
			}
			require.NoError(t, err)
			require.Contains(t, projhost(t, "handlers", "list", "--data", dir, "--name", "f"), "no versions", "nothing deployed")
		})
	}
}
