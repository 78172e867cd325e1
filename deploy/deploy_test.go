package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/local"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/source/journal"
)

// env is an embedded store's registry, a module store directory, a runtime and a 4-shard
// journal holding the first 400 flights of flights-2k.
type env struct {
	reg   registry.Store
	blobs *registry.DirBlobs
	rt    *host.Runtime
	j     *journal.Journal
	d     *deploy.Deployer
	// blobsDir is the module store's directory.
	blobsDir string
}

func newEnv(t *testing.T, cfg deploy.Config) *env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := local.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	blobs, err := registry.NewDirBlobs(filepath.Join(dir, "modules"))
	require.NoError(t, err)
	rt, err := host.NewRuntime(ctx, host.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close(ctx) })
	j, err := journal.Create(filepath.Join(dir, "journal"), 4)
	require.NoError(t, err)
	t.Cleanup(func() { j.Close() })
	var evs []journal.AppendEvent
	for _, f := range flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:400] {
		evs = append(evs, journal.AppendEvent{PartitionKey: f.Origin, Data: f.JSON()})
	}
	_, err = j.Append(ctx, evs)
	require.NoError(t, err)
	cfg.Registry, cfg.Blobs, cfg.Runtime, cfg.Source = st.Registry(), blobs, rt, j
	d, err := deploy.New(cfg)
	require.NoError(t, err)
	return &env{reg: st.Registry(), blobs: blobs, rt: rt, j: j, d: d, blobsDir: filepath.Join(dir, "modules")}
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testwasm.Path(t, name))
	require.NoError(t, err)
	return b
}

// wat assembles deploy/testdata/<name>.wat.
func wat(t *testing.T, name string) []byte {
	t.Helper()
	out := t.TempDir()
	if err := testwasm.AssembleWAT(t, out, filepath.Join("testdata", name+".wat")); err != nil {
		if errors.Is(err, testwasm.ErrNoWABT) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, name+".wasm"))
	require.NoError(t, err)
	return b
}

// TestDeployActivateRollback: a first deploy without --activate stores version 1 inactive; a
// second with it stores and activates version 2 after a smoke run over the latest events of
// every shard; Activate and Rollback move the pointer, a second rollback undoing the first;
// ActiveModule gives the active version's bytes.
func TestDeployActivateRollback(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, deploy.Config{SmokeEvents: 50})
	count, fd := read(t, testwasm.CountGo), read(t, testwasm.FlightDelaysAS)

	r1, err := e.d.Deploy(ctx, "p", count, deploy.Options{Note: "count"})
	require.NoError(t, err)
	require.False(t, r1.Activated)
	require.Equal(t, int64(1), r1.Version.Number)
	require.Equal(t, registry.Sum(count), r1.Version.SHA256)
	require.Equal(t, int64(len(count)), r1.Version.Size)
	require.Equal(t, "count", r1.Version.Note)
	require.Equal(t, 1, r1.Version.ABI)
	require.Positive(t, r1.Compile)
	require.Empty(t, r1.Smoke.Skipped)
	require.Len(t, r1.Smoke.Shards, 4)
	require.Equal(t, 200, r1.Smoke.Events, "50 latest events of each of 4 shards (400 flights by origin)")
	a, err := e.reg.Active(ctx, "p")
	require.NoError(t, err)
	require.Zero(t, a.Version, "a deploy without Activate activates nothing")
	_, _, err = deploy.ActiveModule(ctx, e.reg, e.blobs, "p")
	require.ErrorIs(t, err, deploy.ErrNoActive)

	r2, err := e.d.Deploy(ctx, "p", fd, deploy.Options{Activate: true})
	require.NoError(t, err)
	require.True(t, r2.Activated)
	require.Equal(t, registry.Active{Projection: "p", Version: 2, Previous: 0, Counter: 1, ChangedMs: r2.Active.ChangedMs}, r2.Active)
	// flightdelays puts each airport and route document its batch touched once.
	require.Equal(t, 200, r2.Smoke.Events)
	docs := 0
	for _, sh := range r2.Smoke.Shards {
		evs, err := e.j.Tail(ctx, sh.ShardID, 50)
		require.NoError(t, err)
		keys := map[string]bool{}
		for _, ev := range evs {
			var f flightcheck.Flight
			require.NoError(t, json.Unmarshal(ev.Data, &f))
			keys["a/"+f.Origin], keys["r/"+f.Origin+"-"+f.Destination] = true, true
		}
		require.Equal(t, len(keys), sh.Mutations, sh.ShardID)
		docs += len(keys)
	}
	require.Equal(t, docs, r2.Smoke.Mutations)
	v, b, err := deploy.ActiveModule(ctx, e.reg, e.blobs, "p")
	require.NoError(t, err)
	require.Equal(t, int64(2), v.Number)
	require.Equal(t, fd, b)

	a, changed, err := deploy.Activate(ctx, e.reg, e.blobs, "p", 1)
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, []int64{1, 2, 2}, []int64{a.Version, a.Previous, a.Counter})
	// Activating the active version again changes nothing: the rollback target stays.
	a, changed, err = deploy.Activate(ctx, e.reg, e.blobs, "p", 1)
	require.NoError(t, err)
	require.False(t, changed)
	require.Equal(t, []int64{1, 2, 2}, []int64{a.Version, a.Previous, a.Counter})
	a, err = deploy.Rollback(ctx, e.reg, e.blobs, "p")
	require.NoError(t, err)
	require.Equal(t, []int64{2, 1, 3}, []int64{a.Version, a.Previous, a.Counter})
	a, err = deploy.Rollback(ctx, e.reg, e.blobs, "p")
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 4}, []int64{a.Version, a.Previous, a.Counter}, "a second rollback undoes the first")
	_, _, err = deploy.Activate(ctx, e.reg, e.blobs, "p", 3)
	require.ErrorIs(t, err, registry.ErrNoVersion)
	_, err = deploy.Rollback(ctx, e.reg, e.blobs, "other")
	require.ErrorIs(t, err, deploy.ErrNoPrevious)

	// A version whose bytes left the module store is not activated.
	require.NoError(t, os.Remove(filepath.Join(e.blobs.Dir(), r2.Version.SHA256+".wasm")))
	_, _, err = deploy.Activate(ctx, e.reg, e.blobs, "p", 2)
	require.ErrorIs(t, err, registry.ErrNoModule)
	require.Contains(t, err.Error(), "version 2 of p cannot be activated")
	_, err = deploy.Rollback(ctx, e.reg, e.blobs, "p")
	require.ErrorIs(t, err, registry.ErrNoModule)
	a, err = e.reg.Active(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(1), a.Version, "nothing activated")
}

// TestDeployRefused: bad uploads are refused with an error naming what is wrong, and nothing
// is recorded or activated.
func TestDeployRefused(t *testing.T) {
	ctx := context.Background()
	count := read(t, testwasm.CountGo)
	for _, tc := range []struct {
		name string
		wasm func(t *testing.T) []byte
		cfg  deploy.Config
		is   error
		msg  string
	}{
		{"garbage bytes", func(*testing.T) []byte { return []byte("#!/bin/sh\nrm -rf /\n") }, deploy.Config{}, host.ErrInvalidModule, "not a WebAssembly module"},
		{"wrong ABI", func(t *testing.T) []byte { return wat(t, "abi2") }, deploy.Config{}, host.ErrInvalidModule, "ABI version 2 not supported"},
		{"markers of two ABI versions", func(t *testing.T) []byte { return wat(t, "bothabi") }, deploy.Config{}, host.ErrInvalidModule, "a module declares one ABI version"},
		{"unknown import", func(t *testing.T) []byte { return wat(t, "badimport") }, deploy.Config{}, host.ErrInvalidModule, "open_socket"},
		{"traps on the smoke run", func(t *testing.T) []byte { return wat(t, "trap") }, deploy.Config{}, deploy.ErrSmokeFailed, "smoke run"},
		{"over the size limit", func(*testing.T) []byte { return count }, deploy.Config{MaxModuleSize: len(count) - 1}, deploy.ErrTooLarge, "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.cfg)
			_, err := e.d.Deploy(ctx, "p", tc.wasm(t), deploy.Options{Activate: true})
			require.ErrorIs(t, err, tc.is)
			require.Contains(t, err.Error(), tc.msg)
			require.NotContains(t, err.Error(), "\n")
			vs, err := e.reg.Versions(ctx, "p")
			require.NoError(t, err)
			require.Empty(t, vs, "a refused module is not recorded")
			a, err := e.reg.Active(ctx, "p")
			require.NoError(t, err)
			require.Zero(t, a.Version)
		})
	}
	if t.Failed() {
		return
	}
	// The trap names the shard and the handler's error kind.
	e := newEnv(t, deploy.Config{})
	_, err := e.d.Deploy(ctx, "p", wat(t, "trap"), deploy.Options{})
	var se *deploy.SmokeError
	require.ErrorAs(t, err, &se)
	require.True(t, strings.HasPrefix(se.ShardID, "shardId-"), se.ShardID)
	require.ErrorIs(t, err, host.ErrTrap)
}

// barrier is a registry whose Activate waits until n callers have read the active pointer:
// the deploys under test then all read it before any of them writes it, whatever the order the
// scheduler runs them in (a deploy that starts after another one finished is no race).
type barrier struct {
	registry.Store
	n    int
	mu   sync.Mutex
	read int
	all  chan struct{}
}

func (b *barrier) Active(ctx context.Context, projection string) (registry.Active, error) {
	a, err := b.Store.Active(ctx, projection)
	b.mu.Lock()
	if b.read++; b.read == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	return a, err
}

func (b *barrier) Activate(ctx context.Context, projection string, n, expect int64) (registry.Active, error) {
	select {
	case <-b.all:
	case <-time.After(time.Minute):
		return registry.Active{}, errors.New("barrier: not every deploy read the pointer within a minute")
	}
	return b.Store.Activate(ctx, projection, n, expect)
}

// TestDeployRace: concurrent deploys that all activate get distinct versions and exactly one
// becomes active; the others report registry.ErrConflict with their version stored inactive.
func TestDeployRace(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, deploy.Config{SmokeEvents: 5})
	mods := [][]byte{read(t, testwasm.CountGo), read(t, testwasm.FlightDelaysAS), read(t, testwasm.CountAS), read(t, testwasm.FlightDelaysGo)}
	b := &barrier{Store: e.reg, n: len(mods), all: make(chan struct{})}
	d, err := deploy.New(deploy.Config{Registry: b, Blobs: e.blobs, Runtime: e.rt, Source: e.j, SmokeEvents: 5})
	require.NoError(t, err)
	res := make([]deploy.Result, len(mods))
	errs := make([]error, len(mods))
	var wg sync.WaitGroup
	for i, m := range mods {
		wg.Add(1)
		go func() { defer wg.Done(); res[i], errs[i] = d.Deploy(ctx, "p", m, deploy.Options{Activate: true}) }()
	}
	wg.Wait()
	won, nums := -1, map[int64]bool{}
	for i := range mods {
		nums[res[i].Version.Number] = true
		if errs[i] == nil {
			require.Equal(t, -1, won, "two deploys activated")
			won = i
			continue
		}
		require.ErrorIs(t, errs[i], registry.ErrConflict)
		require.Contains(t, errs[i].Error(), "is stored but not active")
		require.False(t, res[i].Activated)
	}
	require.NotEqual(t, -1, won, "no deploy activated")
	require.Equal(t, map[int64]bool{1: true, 2: true, 3: true, 4: true}, nums)
	a, err := e.reg.Active(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, res[won].Version.Number, a.Version)
	require.Equal(t, int64(1), a.Counter)
}
