package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/readonlyfs"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/shardmap"
)

// seedStore makes a store in dir with one lease, one cursor and one document, and closes it.
func seedStore(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(dir)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Leases().Create(ctx, shardmap.Lease{Projection: "p", ShardID: "s", Owner: "w", State: shardmap.StateActive}))
	_, err = s.Cursors().Claim(ctx, "p", "s", 1)
	require.NoError(t, err)
	require.NoError(t, s.ReadModels().Commit(ctx, readmodel.Write{Projection: "p", ShardID: "s", Epoch: 1, Seq: "7",
		Mutations: []readmodel.Mutation{{Collection: "c", Key: "k", Doc: []byte(`{"n":1}`)}}}))
}

// readAll reads what status and query read through a read-only store and returns it as text.
func readAll(ctx context.Context, s *Store) (string, error) {
	ls, err := s.Leases().List(ctx, "p")
	if err != nil {
		return "", err
	}
	c, err := s.Cursors().Get(ctx, "p", "s")
	if err != nil {
		return "", err
	}
	doc, _, err := s.ReadModels().Get(ctx, "p", "c", "k")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("lease %s/%s owner %s; cursor %s epoch %d; doc %s", ls[0].ShardID, ls[0].State, ls[0].Owner, c.Seq, c.Epoch, doc), nil
}

const wantRead = "lease s/active owner w; cursor 7 epoch 1; doc {\"n\":1}"

// TestReadOnlyWhileLocked: a read-only store reads while another process holds the write
// lock of both files (a paused worker), without waiting for it: its busy timeout is an hour and
// the context's deadline a minute, so a read that waited for the lock would fail. Writes
// through it are refused, not queued.
func TestReadOnlyWhileLocked(t *testing.T) {
	dir := lockedStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := OpenReadOnly(dir, WithBusyTimeout(time.Hour))
	require.NoError(t, err)
	defer s.Close()
	got, err := readAll(ctx, s)
	require.NoError(t, err)
	require.Equal(t, wantRead, got)

	_, err = s.Cursors().Claim(ctx, "p", "s", 2)
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrBusy, "a write through a read-only store fails at once")
	require.Contains(t, err.Error(), "readonly")
}

// lockedStore returns the directory of a seeded store whose two files another connection
// holds write-locked until t ends (as a worker paused inside a write would).
func lockedStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	seedStore(t, dir)
	w, err := Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	lockMain(t, w)
	lockLeases(t, w)
	return dir
}

// lockLeases is lockMain for leases.db.
func lockLeases(t *testing.T, s *Store) {
	t.Helper()
	lockFile(t, s.LeasePath())
}

func TestReadOnlyErrors(t *testing.T) {
	empty := t.TempDir()
	_, err := OpenReadOnly(empty)
	require.ErrorIs(t, err, ErrNoStore)
	require.Contains(t, err.Error(), "run a projection there first")
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	require.Empty(t, entries, "OpenReadOnly creates nothing")

	_, err = OpenReadOnly(filepath.Join(empty, "missing"))
	require.ErrorIs(t, err, ErrNoStore)

	_, err = OpenReadOnly(empty, WithBusyTimeout(0))
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Open(empty, WithBusyTimeout(2*MaxBusyTimeout))
	require.ErrorIs(t, err, ErrInvalid)

	// A store of an older schema (upgraded by a worker, never by a reader).
	old := t.TempDir()
	openV1(t, old)
	_, err = OpenReadOnly(old)
	require.ErrorIs(t, err, ErrNoStore, "version 1 has no leases.db")
	f, err := os.Create(filepath.Join(old, LeaseFileName))
	require.NoError(t, err)
	f.Close()
	_, err = OpenReadOnly(old)
	require.ErrorIs(t, err, ErrSchema)
	require.Contains(t, err.Error(), "older schema version 1")
}

// TestBusyMessage: ErrBusy says which directory is locked and what may hold it.
func TestBusyMessage(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, WithBusyTimeout(20*time.Millisecond))
	require.NoError(t, err)
	defer s.Close()
	lockMain(t, s)
	_, err = s.Cursors().Claim(context.Background(), "p", "s", 1)
	require.ErrorIs(t, err, ErrBusy)
	msg := err.Error()
	for _, want := range []string{dir, "busy timeout of 20ms", "paused or stuck"} {
		require.Contains(t, msg, want)
	}
	require.NotContains(t, msg, "WithBusyTimeout")
}

// roChildEnv names the store directory a child process reads read-only (TestReadOnlyDirectory).
const roChildEnv = "LOCAL_TEST_READONLY_DIR"

// TestReadOnlyDirectory: the store can be read where nothing can be written: a directory and
// files without write permission, with and without the -wal and -shm files a running (or
// killed) worker leaves. As root (whom permissions do not stop) the reader runs as user nobody
// through setpriv.
func TestReadOnlyDirectory(t *testing.T) {
	if dir := os.Getenv(roChildEnv); dir != "" {
		s, err := OpenReadOnly(dir)
		if err == nil {
			var got string
			got, err = readAll(context.Background(), s)
			s.Close()
			fmt.Println(got)
		}
		require.NoError(t, err)
		return
	}
	wrap := readonlyfs.Wrapper(t)
	base := readonlyfs.TempDir(t)
	bin := filepath.Join(base, "local.test")
	readonlyfs.Copy(t, os.Args[0], bin, 0o755)

	for _, tt := range []struct {
		name    string
		running bool // a writer keeps the store open: -wal and -shm exist
	}{{"closed store", false}, {"store open in another process", true}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(base, strings.ReplaceAll(tt.name, " ", "-"))
			seedStore(t, dir)
			if tt.running {
				w, err := Open(dir)
				require.NoError(t, err)
				defer w.Close()
				_, err = w.Cursors().Get(context.Background(), "p", "s")
				require.NoError(t, err)
				_, err = os.Stat(filepath.Join(dir, FileName+"-shm"))
				require.NoError(t, err, "a writer has the -shm file")
			}
			readonlyfs.Chmod(dir, 0o555, 0o444)
			defer readonlyfs.Chmod(dir, 0o755, 0o644)
			argv := append(append([]string{}, wrap...), bin, "-test.run=^TestReadOnlyDirectory$")
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), roChildEnv+"="+dir)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), wantRead)
		})
	}
}

// TestOpenWhileLocked: opening a store of the current schema takes no write lock, so a new
// worker starts while another process holds both files' locks (a paused worker); its reads
// work at once and its writes wait for the lock.
func TestOpenWhileLocked(t *testing.T) {
	dir := lockedStore(t)
	s, err := Open(dir, WithBusyTimeout(20*time.Millisecond))
	require.NoError(t, err)
	defer s.Close()
	got, err := readAll(context.Background(), s)
	require.NoError(t, err)
	require.Equal(t, wantRead, got)
	_, err = s.Cursors().Claim(context.Background(), "p", "s", 2)
	require.ErrorIs(t, err, ErrBusy)
}
