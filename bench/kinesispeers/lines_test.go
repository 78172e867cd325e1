package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestReporterFlushesOneLinePerShard(t *testing.T) {
	var out bytes.Buffer
	r := NewReporter(&out, "w1")
	clock := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	r.now = func() time.Time { clock = clock.Add(10 * time.Millisecond); return clock }
	r.Handle("shardId-000000000001", 3, "49600000000000000000000000000000000000000000000000000009")
	r.Handle("shardId-000000000000", 1, "10")
	// Sequence numbers compare as numbers, not strings: "9..." (shorter) is less than "10...".
	r.Handle("shardId-000000000001", 2, "4960000000000000000000000000000000000000000000000000001")
	require.NoError(t, r.Flush())
	require.NoError(t, r.Flush()) // nothing new: no line
	r.Handle("shardId-000000000000", 5, "")

	require.NoError(t, r.Flush())
	var got []Line
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var x Line
		require.NoError(t, json.Unmarshal([]byte(l), &x), l)
		got = append(got, x)
	}
	at := func(ms int) time.Time { return time.Date(2026, 12, 1, 20, 0, 0, ms*int(time.Millisecond), time.UTC) }
	require.Equal(t, []Line{
		{Worker: "w1", Shard: "shardId-000000000000", Count: 1, MaxSeq: "10", First: at(20), Last: at(20)},
		{Worker: "w1", Shard: "shardId-000000000001", Count: 5, MaxSeq: "49600000000000000000000000000000000000000000000000000009", First: at(10), Last: at(30)},
		{Worker: "w1", Shard: "shardId-000000000000", Count: 5, MaxSeq: "10", First: at(40), Last: at(40)},
	}, got)
}

func TestParseLine(t *testing.T) {
	at := func(s string) time.Time {
		x, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return x
	}
	for _, tc := range []struct {
		name, line string
		want       Handled
		ok, err    bool
	}{
		{name: "peer line", line: `{"worker":"kcl-1","shard":"s1","count":4,"max_seq":"12","first":"2026-12-01T20:00:01Z","last":"2026-12-01T20:00:02Z"}`,
			want: Handled{Worker: "kcl-1", Shard: "s1", Count: 4, First: at("2026-12-01T20:00:01Z"), Last: at("2026-12-01T20:00:02Z")}, ok: true},
		{name: "peer line without worker takes the tail's", line: `{"shard":"s1","count":1,"first":"2026-12-01T20:00:01Z","last":"2026-12-01T20:00:01Z"}`,
			want: Handled{Worker: "tail", Shard: "s1", Count: 1, First: at("2026-12-01T20:00:01Z"), Last: at("2026-12-01T20:00:01Z")}, ok: true},
		{name: "projhost batch", line: `{"time":"2026-12-01T20:00:03Z","event":"batch","shard":"s2","events":500}`,
			want: Handled{Worker: "tail", Shard: "s2", Count: 500, First: at("2026-12-01T20:00:03Z"), Last: at("2026-12-01T20:00:03Z")}, ok: true},
		{name: "projhost flush", line: `{"time":"2026-12-01T20:00:03Z","event":"flush","shard":"s2","seq":"9"}`},
		{name: "projhost lease", line: `{"time":"2026-12-01T20:00:03Z","event":"lease","shard":"s2","worker":"w","kind":"acquired"}`},
		{name: "empty batch", line: `{"time":"2026-12-01T20:00:03Z","event":"batch","shard":"s2"}`},
		{name: "blank", line: ``},
		{name: "log text", line: `time=2026-12-01 level=INFO msg=hello`, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ok, err := ParseLine("tail", []byte(tc.line))
			require.Equal(t, tc.err, err != nil, "err %v", err)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, h)
		})
	}
}

func TestTailReadsAWorkerFileAsItGrows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.jsonl")
	out := make(chan Handled, 16)
	stop := make(chan struct{})
	bad := 0
	done := make(chan error, 1)
	go func() { done <- Tail(path, "w1", out, stop, &bad) }() // the file does not exist yet

	trace, err := os.ReadFile("testdata/trace.jsonl")
	require.NoError(t, err)
	lines := bytes.SplitAfter(trace, []byte("\n"))
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	for _, l := range lines[:3] {
		_, err = f.Write(l)
		require.NoError(t, err)
	}
	h := <-out
	require.Equal(t, Handled{Worker: "w1", Shard: "shardId-000000000001", Count: 500,
		First: time.Date(2026, 12, 1, 20, 0, 1, 250_000_000, time.UTC), Last: time.Date(2026, 12, 1, 20, 0, 1, 250_000_000, time.UTC)}, h)

	// A line written in two pieces is parsed once whole; a line that is not JSON is counted.
	last := lines[5]
	_, err = f.Write(append(append([]byte{}, lines[3]...), lines[4]...))
	require.NoError(t, err)
	_, err = f.Write([]byte("not json\n"))
	require.NoError(t, err)
	_, err = f.Write(last[:20])
	require.NoError(t, err)
	time.Sleep(60 * time.Millisecond) // a few polls see the partial line
	_, err = f.Write(last[20:])
	require.NoError(t, err)
	h = <-out
	require.Equal(t, "shardId-000000000003", h.Shard)
	require.Equal(t, 7, h.Count)
	close(stop)
	require.NoError(t, <-done)
	require.Equal(t, 1, bad)
	require.Empty(t, out)
}
