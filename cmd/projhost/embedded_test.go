package main

// Process tests of the embedded store's CLI: read verbs open it read-only (they answer while
// another process holds the write locks, and work on a read-only directory), the busy
// timeout is a flag with a clear message, `sql` splits statements as SQLite does and has a
// time limit, `journal append --batch` is validated.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/readonlyfs"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/local"
)

// projectedDir is a data directory with a 2-shard journal of flights-2k projected by
// flightdelays-as as projection "f".
func projectedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "2")
	projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flightcheck.DataPath("flights-2k.json"))
	projhost(t, "run", "--data", dir, "--name", "f", "--handler", testwasm.Path(t, testwasm.FlightDelaysAS), "--until-caught-up")
	return dir
}

// result is one CLI run's outcome.
type result struct {
	stdout, stderr string
	err            error
}

// cli runs the projhost binary at bin (wrapped by the wrap command line, if any) and returns
// what it printed; a run longer than a minute is killed (a read that waited for a lock held
// for ever would be).
func cli(t *testing.T, wrap []string, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	argv := append(append(append([]string{}, wrap...), bin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("projhost %s did not finish within a minute", strings.Join(args, " "))
	}
	return result{stdout.String(), stderr.String(), err}
}

// holdWriteLocks starts a write transaction on each file, as a worker paused inside a write
// would hold it, until the test ends.
func holdWriteLocks(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		t.Cleanup(writeLock(t, p))
	}
}

// writeLock starts a write transaction on the SQLite file at path and returns what ends it
// (rolled back; safe to call again).
func writeLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	var once sync.Once
	return func() {
		once.Do(func() {
			conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
			db.Close()
		})
	}
}

// readVerbs are the commands that only read, each with what its output must hold.
func readVerbs(dir string) []struct {
	args []string
	want string
} {
	return []struct {
		args []string
		want string
	}{
		{[]string{"status", "--data", dir, "--json"}, `"projection":"f"`},
		{[]string{"status", "--data", dir, "--name", "f"}, "PROJECTION"},
		{[]string{"query", "--data", dir, "--name", "f", "--collection", "airports", "--key", "ORD"}, `"key":"ORD"`},
		{[]string{"sql", "--data", dir, "SELECT count(*) AS n FROM docs WHERE projection = 'f' AND collection = 'airports'"}, "N"},
		{[]string{"deadletters", "list", "--data", dir, "--name", "f"}, "no dead letters"},
	}
}

// TestReadVerbsWhileLocked: with the write locks of projhost.db, leases.db and journal.db
// held by another process (a worker paused inside a write), every read verb answers at once
// even with a busy timeout of an hour, and the write verbs (resume of a stopped shard, journal
// append) fail after their busy timeout with a message naming the file and the flag.
func TestReadVerbsWhileLocked(t *testing.T) {
	dir := projectedDir(t)
	stopShard(t, dir, "f", "shardId-000000000000")
	holdWriteLocks(t, filepath.Join(dir, local.FileName), filepath.Join(dir, local.LeaseFileName), filepath.Join(dir, "journal.db"))
	for _, v := range readVerbs(dir) {
		r := cli(t, nil, binPath, append(v.args, "--busy-timeout", "1h")...)
		require.NoError(t, r.err, "%v: %s", v.args, r.stderr)
		require.Contains(t, r.stdout, v.want, v.args)
	}
	for _, args := range [][]string{
		{"resume", "--data", dir, "--name", "f", "--busy-timeout", "100ms"},
		{"journal", "append", "--data", dir, "--busy-timeout", "100ms", flightcheck.DataPath("flights-2k.json")},
	} {
		r := cli(t, nil, binPath, args...)
		require.Error(t, r.err, args)
		msg := strings.TrimSpace(r.stderr)
		require.NotContains(t, msg, "\n", "one line")
		for _, want := range []string{"locked by another process", dir, "busy timeout of 100ms", "paused or stuck", "--busy-timeout"} {
			require.Contains(t, msg, want, args)
		}
		require.NotContains(t, msg, "WithBusyTimeout")
	}
}

// stopShard records shard of projection as stopped by the stop policy, in the store in dir.
func stopShard(t *testing.T, dir, projection, shard string) {
	t.Helper()
	ctx := context.Background()
	s, err := local.Open(dir)
	require.NoError(t, err)
	defer s.Close()
	c, err := s.Cursors().Get(ctx, projection, shard)
	require.NoError(t, err)
	require.NoError(t, s.Cursors().Stop(ctx, projection, shard, c.Epoch, "stopped by the test"))
}

// TestReadVerbsReadOnlyDirectory: on a directory nobody may write (files and directory
// without write permission; as root the commands run as user nobody), the read verbs work
// and a missing store is reported as such.
func TestReadVerbsReadOnlyDirectory(t *testing.T) {
	wrap := readonlyfs.Wrapper(t)
	dir := projectedDir(t)
	base := readonlyfs.TempDir(t)
	bin := filepath.Join(base, "projhost")
	readonlyfs.Copy(t, binPath, bin, 0o755)
	ro := filepath.Join(base, "data")
	require.NoError(t, os.Mkdir(ro, 0o755))
	for _, f := range []string{"journal.db", local.FileName, local.LeaseFileName} {
		readonlyfs.Copy(t, filepath.Join(dir, f), filepath.Join(ro, f), 0o644)
	}
	readonlyfs.Chmod(base, 0o555, 0o444)
	require.NoError(t, os.Chmod(bin, 0o555))
	for _, v := range readVerbs(ro) {
		r := cli(t, wrap, bin, v.args...)
		require.NoError(t, r.err, "%v: %s", v.args, r.stderr)
		require.Contains(t, r.stdout, v.want, v.args)
	}
	entries, err := os.ReadDir(ro)
	require.NoError(t, err)
	require.Len(t, entries, 3, "nothing created")

	r := cli(t, wrap, bin, "query", "--data", base, "--name", "f", "--collection", "airports")
	require.Error(t, r.err)
	require.Contains(t, r.stderr, "no embedded store in "+base)
}

// TestFlagValidation: flags out of range are refused with a one-line error naming the flag
// and the range, before anything is done (no panic, no allocation by the bad value).
func TestFlagValidation(t *testing.T) {
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "1")
	events := flightcheck.DataPath("flights-2k.json")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"journal", "append", "--data", dir, "--batch", "-1", events}, "--batch: journal: invalid input: -1 events per append transaction: use 1 to 1000"},
		{[]string{"journal", "append", "--data", dir, "--batch", "0", events}, "use 1 to 1000"},
		{[]string{"journal", "append", "--data", dir, "--batch", "1000000000", events}, "use 1 to 1000"},
		{[]string{"journal", "create", "--data", t.TempDir(), "--shards", "0"}, "--shards 0: use 1 to 10000"},
		{[]string{"status", "--data", dir, "--busy-timeout", "0s"}, "--busy-timeout: local: invalid input: busy timeout 0s: use 1ms to 1h0m0s"},
		{[]string{"journal", "append", "--data", dir, "--busy-timeout", "2h", events}, "--busy-timeout"},
		{[]string{"sql", "--data", dir, "--timeout", "0s", "SELECT 1"}, "--timeout must be positive"},
		{[]string{"run", "--data", dir, "--name", "f", "--handler", testwasm.Path(t, testwasm.FlightDelaysAS), "--shard-sync", "-10ms"}, "shard-sync -10ms is negative"},
		// An empty --shard (an unset shell variable) is not the whole projection.
		{[]string{"pause", "--data", dir, "--name", "f", "--shard", ""}, "--shard is empty"},
		{[]string{"resume", "--data", dir, "--name", "f", "--shard", ""}, "--shard is empty"},
		{[]string{"reset", "--data", dir, "--name", "f", "--shard", "", "--to", "latest"}, "--shard is empty"},
		{[]string{"deadletters", "replay", "--data", dir, "--name", "f", "--shard", ""}, "--shard is empty"},
		{[]string{"deadletters", "list", "--data", dir, "--name", "f", "--shard", ""}, "--shard is empty"},
	}
	for _, c := range cases {
		requireRefused(t, c.args, c.want)
	}
	// Nothing was appended by the refused runs; a valid --batch appends everything.
	var st []struct {
		Head string `json:"head"`
	}
	r := cli(t, nil, binPath, "journal", "append", "--data", dir, "--batch", "7", events)
	require.NoError(t, r.err, r.stderr)
	projhost(t, "run", "--data", dir, "--name", "f", "--handler", testwasm.Path(t, testwasm.FlightDelaysAS), "--until-caught-up")
	for _, l := range strings.Split(strings.TrimSpace(projhost(t, "status", "--data", dir, "--json")), "\n") {
		var row struct {
			Head string `json:"head"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &row))
		st = append(st, row)
	}
	require.Len(t, st, 1)
	require.Equal(t, "2000", st[0].Head)
}

// TestSQL: statements are split as SQLite splits them ("a;b" in a string is one statement),
// and a query running past --timeout is interrupted with a clear error.
func TestSQL(t *testing.T) {
	dir := projectedDir(t)
	r := cli(t, nil, binPath, "sql", "--data", dir, "SELECT 'a;b' AS s")
	require.NoError(t, r.err, r.stderr)
	require.Equal(t, "S\na;b\n", r.stdout)

	r = cli(t, nil, binPath, "sql", "--data", dir, "SELECT 1; SELECT 2")
	require.Error(t, r.err)
	require.Contains(t, r.stderr, "one SQL statement at a time")

	forever := "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
	r = cli(t, nil, binPath, "sql", "--data", dir, "--timeout", "300ms", forever)
	require.Error(t, r.err)
	require.Contains(t, r.stderr, "interrupted after --timeout 300ms")
}

// TestSIGTERMDuringStart: SIGTERM at any point of `run`'s start-up is a graceful stop: exit 0
// (or, before Go's signal handler is installed in the first milliseconds, death by SIGTERM,
// the signal's default action), never exit 1 with "context canceled". Each delay is tried on a
// fresh worker of a projected store.
func TestSIGTERMDuringStart(t *testing.T) {
	dir := projectedDir(t)
	h := testwasm.Path(t, testwasm.FlightDelaysAS)
	clean := 0
	for _, ms := range []int{0, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 100, 300} {
		cmd := exec.Command(binPath, "run", "--data", dir, "--name", "f", "--handler", h)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		time.Sleep(time.Duration(ms) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Fatalf("SIGTERM after %dms: run did not exit within a minute", ms)
		}
		if err == nil {
			clean++
			continue
		}
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
		ws := ee.Sys().(syscall.WaitStatus)
		require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGTERM,
			"SIGTERM after %dms: %v; stderr:\n%s", ms, err, stderr.String())
	}
	require.Positive(t, clean, "no run got as far as catching the signal")
	t.Logf("%d of 13 runs caught the signal and exited 0; the others died of it before Go's handler was installed", clean)
}

// TestHelpTexts: --help says what the flags of this change do: --cursor-every also sets how
// long handled documents stay invisible; --busy-timeout is on the commands that open the store
// or the journal, with its range.
func TestHelpTexts(t *testing.T) {
	help := projhost(t, "run", "--help")
	require.Contains(t, help, "stay invisible to queries for up to this long")
	for _, c := range [][]string{{"run"}, {"status"}, {"query"}, {"resume"}, {"deadletters", "list"}, {"journal", "append"}, {"journal", "create"}, {"sql"}} {
		h := projhost(t, append(c, "--help")...)
		require.Contains(t, h, "--busy-timeout", c)
		require.Contains(t, h, "1ms to 1h0m0s", c)
	}
	require.Contains(t, projhost(t, "sql", "--help"), "--timeout duration")
}
