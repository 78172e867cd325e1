package main

// `projhost status`: a dead worker's leases are shown expired (not as a live owner), a paused
// shard as paused.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/status"
)

// statusRows runs `projhost status --json` with args and returns its rows by shard.
func statusRows(t *testing.T, args ...string) map[string]shardStatus {
	t.Helper()
	out := map[string]shardStatus{}
	for _, line := range strings.Split(strings.TrimSpace(projhost(t, append([]string{"status", "--json"}, args...)...)), "\n") {
		var r shardStatus
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		out[r.Shard] = r
	}
	return out
}

// TestStatusDeadOwnerAndPause: while a worker runs, status shows its leases live and the
// shards running (one paused shard paused); after kill -9, the same leases are shown expired,
// the owner kept, the shards idle, in the table too.
func TestStatusDeadOwnerAndPause(t *testing.T) {
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "2")
	projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flightcheck.DataPath("flights-20k.json"))
	cmd, log, _ := startRun(t, "--data", dir, "--name", "f", "--handler", testwasm.Path(t, testwasm.FlightDelaysAS),
		"--listen", "127.0.0.1:0", "--lease-duration", "2s", "--worker-id", "w-doomed")
	var rows map[string]shardStatus
	deadline := time.Now().Add(2 * time.Minute) // a bound for a loaded machine, not a timing assertion
	for {
		rows = statusRows(t, "--data", dir, "--name", "f", "--lease-duration", "2s")
		owned := 0
		for _, r := range rows {
			if r.Owner == "w-doomed" && r.Lease == status.LeaseLive {
				owned++
			}
		}
		if owned == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker never held both leases live: %+v\n%s", rows, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Len(t, rows, 2)
	var paused string
	for id, r := range rows {
		require.Equal(t, status.RunRunning, r.RunState, id)
		require.Equal(t, "active", r.State, id, "state keeps its values")
		paused = id
	}
	projhost(t, "pause", "--data", dir, "--name", "f", "--shard", paused)
	rows = statusRows(t, "--data", dir, "--name", "f", "--lease-duration", "2s")
	require.Equal(t, status.RunPaused, rows[paused].RunState)
	require.True(t, rows[paused].Paused)
	require.Equal(t, status.LeaseLive, rows[paused].Lease, "the owner of a paused shard keeps its lease")

	require.NoError(t, cmd.Process.Kill())
	cmd.Wait()
	rows = statusRows(t, "--data", dir, "--name", "f", "--lease-duration", "2s")
	for id, r := range rows {
		require.Equal(t, "w-doomed", r.Owner, id, "the dead owner is still the lease's owner")
		require.Equal(t, status.LeaseExpired, r.Lease, id)
		require.GreaterOrEqual(t, r.LeaseSilentMs, int64(2000), id)
		want := status.RunIdle
		if id == paused {
			want = status.RunPaused
		}
		require.Equal(t, want, r.RunState, id)
	}
	table := projhost(t, "status", "--data", dir, "--name", "f", "--lease-duration", "2s")
	require.Equal(t, 2, strings.Count(table, "expired (silent"), table)
	require.Contains(t, table, "2 lease(s) expired", table)
	require.Contains(t, table, "paused", table)
	require.Contains(t, table, "idle", table)

	// Without watching, liveness is unknown and the owner is assumed running.
	rows = statusRows(t, "--data", dir, "--name", "f", "--lease-duration", "0")
	for id, r := range rows {
		require.Equal(t, status.LeaseUnknown, r.Lease, id)
	}
	r := cli(t, nil, binPath, "status", "--data", dir, "--lease-duration", "-1s")
	require.Error(t, r.err)
	require.Contains(t, r.stderr, "--lease-duration -1s is negative")
}
