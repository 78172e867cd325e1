package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/source"
)

func lineage(t *testing.T, dir string) []lineageRow {
	t.Helper()
	var rows []lineageRow
	for _, l := range strings.Split(strings.TrimSpace(projhost(t, "journal", "status", "--data", dir, "--json")), "\n") {
		var r lineageRow
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		rows = append(rows, r)
	}
	return rows
}

// TestJournalSplitMerge: split (at the midpoint and at --at) and merge print the children, journal
// status and create show the lineage, a projection over the resharded journal is exact, and
// status counts a child's lag from its start.
func TestJournalSplitMerge(t *testing.T) {
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "2")
	events := flightcheck.DataPath("flights-2k.json")
	projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", events)

	s0, s1 := "shardId-000000000000", "shardId-000000000001"
	start0, end0 := source.EvenHashKeyRange(0, 2)
	start1, end1 := source.EvenHashKeyRange(1, 2)
	const quarter = "85070591730234615865843651857942052864" // 2^126
	out := projhost(t, "journal", "split", "--data", dir, "--shard", s0, "--at", quarter)
	require.Equal(t, "shardId-000000000002\tparents "+s0+"\thash keys ["+start0+", 85070591730234615865843651857942052863]\n"+
		"shardId-000000000003\tparents "+s0+"\thash keys ["+quarter+", "+end0+"]\n", out)
	out = projhost(t, "journal", "merge", "--data", dir, "--shard", "shardId-000000000003", "--shard", s1)
	require.Equal(t, "shardId-000000000004\tparents shardId-000000000003,"+s1+"\thash keys ["+quarter+", "+end1+"]\n", out)
	projhost(t, "journal", "split", "--data", dir, "--shard", "shardId-000000000002") // the midpoint
	projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", events)

	rows := lineage(t, dir)
	require.Len(t, rows, 7)
	want := []struct {
		id, state string
		parents   []string
		start     string
	}{
		{s0, "CLOSED", []string{}, start0},
		{s1, "CLOSED", []string{}, start1},
		{"shardId-000000000002", "CLOSED", []string{s0}, start0},
		{"shardId-000000000003", "CLOSED", []string{s0}, quarter},
		{"shardId-000000000004", "OPEN", []string{"shardId-000000000003", s1}, quarter},
		{"shardId-000000000005", "OPEN", []string{"shardId-000000000002"}, start0},
		{"shardId-000000000006", "OPEN", []string{"shardId-000000000002"}, "42535295865117307932921825928971026432"}, // 2^125
	}
	var total, parents int64
	for i, w := range want {
		r := rows[i]
		require.Equal(t, w.id, r.Shard)
		require.Equal(t, w.state, r.State, r.Shard)
		require.Equal(t, w.parents, r.Parents, r.Shard)
		require.Equal(t, w.start, r.HashKeyStart, r.Shard)
		total += r.Events
		if i < 2 {
			parents += r.Events
		}
	}
	require.Equal(t, int64(4000), total, "every event appended, once")
	require.Equal(t, int64(2000), parents, "the first 2,000 on the shards create made")
	require.Zero(t, rows[2].Events+rows[3].Events, "the shards split or merged before the second append hold nothing")

	table := projhost(t, "journal", "status", "--data", dir)
	require.Contains(t, table, "SHARD                 STATE   PARENTS")
	require.Contains(t, table, "7 shards, 3 open\n")
	again := projhost(t, "journal", "create", "--data", dir, "--shards", "2")
	require.Contains(t, again, "resharded since (journal split|merge):")
	require.Contains(t, again, "7 shards, 3 open\n")

	projhost(t, "run", "--data", dir, "--name", "f", "--handler", testwasm.Path(t, testwasm.FlightDelaysAS), "--until-caught-up")
	var lag int64
	for _, l := range strings.Split(strings.TrimSpace(projhost(t, "status", "--data", dir, "--name", "f", "--json")), "\n") {
		var row struct {
			Shard     string `json:"shard"`
			LagEvents int64  `json:"lag_events"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &row))
		lag += row.LagEvents
	}
	require.Zero(t, lag)
	// A child's lag counts its own events, not its parents' (its numbers start after theirs),
	// also before any worker saved its cursor.
	projhost(t, "journal", "split", "--data", dir, "--shard", "shardId-000000000004")
	projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", events)
	var lags int64
	for _, l := range strings.Split(strings.TrimSpace(projhost(t, "status", "--data", dir, "--name", "f", "--json")), "\n") {
		var row struct {
			LagEvents int64 `json:"lag_events"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &row))
		lags += row.LagEvents
	}
	require.Equal(t, int64(2000), lags)
}

// TestJournalReshardErrors: refused changes say why and change nothing.
func TestJournalReshardErrors(t *testing.T) {
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "3")
	projhost(t, "journal", "split", "--data", dir, "--shard", "shardId-000000000002")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"journal", "split", "--data", dir}, "--shard is required"},
		{[]string{"journal", "split", "--data", dir, "--shard", "shardId-000000000002"}, "shard is closed"},
		{[]string{"journal", "split", "--data", dir, "--shard", "shardId-000000000009"}, "unknown shard"},
		{[]string{"journal", "split", "--data", dir, "--shard", "shardId-000000000000", "--at", "0"}, "must be above the shard's start"},
		{[]string{"journal", "split", "--data", dir, "--shard", "shardId-000000000000", "--at", "x"}, "not a decimal number"},
		{[]string{"journal", "merge", "--data", dir, "--shard", "shardId-000000000000"}, "give the two shards to merge as --shard A --shard B (got 1)"},
		{[]string{"journal", "merge", "--data", dir, "--shard", "shardId-000000000000", "--shard", "shardId-000000000004"}, "not adjacent"},
		{[]string{"journal", "merge", "--data", dir, "--shard", "shardId-000000000001", "--shard", "shardId-000000000001"}, "itself"},
		{[]string{"journal", "split", "--data", t.TempDir(), "--shard", "shardId-000000000000"}, "no journal in"},
	}
	for _, c := range cases {
		requireRefused(t, c.args, c.want)
	}
	require.Len(t, lineage(t, dir), 5, "the refused changes added no shard")
}

// requireRefused runs projhost with args and requires a failure whose message, one line of the
// CLI's form (no Go stack trace), contains want.
func requireRefused(t *testing.T, args []string, want string) {
	t.Helper()
	r := cli(t, nil, binPath, args...)
	require.Error(t, r.err, args)
	require.Equal(t, "projhost: ", r.stderr[:min(len(r.stderr), 10)], args)
	require.Contains(t, r.stderr, want, args)
	require.NotContains(t, r.stderr, "goroutine", args)
}
