package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/registry"
)

// TestEnsure: Ensure (run --handler) makes a module the active version, storing a new version
// only when none holds its bytes. Each case starts from count as version 1 (active) and
// flightdelays as version 2 (stored, inactive, its bytes gone from the module store), or from
// an empty registry.
func TestEnsure(t *testing.T) {
	ctx := context.Background()
	count, fd, countAS := read(t, testwasm.CountGo), read(t, testwasm.FlightDelaysAS), read(t, testwasm.CountAS)
	for _, tc := range []struct {
		name    string
		empty   bool
		wasm    []byte
		outcome deploy.Outcome
		is      error // the error wanted (then nothing changes)
		active  int64 // the active version after
		prev    int64 // Ensured.Previous
		nvers   int   // versions stored after
	}{
		{name: "same as the active version: nothing changes", wasm: count, outcome: deploy.AlreadyActive, active: 1, prev: 1, nvers: 2},
		{name: "stored but inactive: activated, its bytes stored again", wasm: fd, outcome: deploy.ActivatedStored, active: 2, prev: 1, nvers: 2},
		{name: "new: deployed and activated", wasm: countAS, outcome: deploy.Deployed, active: 3, prev: 1, nvers: 3},
		{name: "empty registry: deployed and activated", empty: true, wasm: count, outcome: deploy.Deployed, active: 1, prev: 0, nvers: 1},
		{name: "invalid module: refused, nothing stored", wasm: []byte("\x00asm\x01\x00\x00\x00garbage"), is: host.ErrInvalidModule, active: 1, nvers: 2},
		{name: "invalid module on an empty registry", empty: true, wasm: []byte("not wasm"), is: host.ErrInvalidModule, active: 0, nvers: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, deploy.Config{SmokeEvents: -1})
			if !tc.empty {
				_, err := e.d.Deploy(ctx, "p", count, deploy.Options{Activate: true})
				require.NoError(t, err)
				r, err := e.d.Deploy(ctx, "p", fd, deploy.Options{})
				require.NoError(t, err)
				require.NoError(t, os.Remove(filepath.Join(e.blobs.Dir(), r.Version.SHA256+".wasm")))
			}
			before, err := e.reg.Active(ctx, "p")
			require.NoError(t, err)
			got, err := e.d.Ensure(ctx, "p", tc.wasm, "run --handler")
			a, aerr := e.reg.Active(ctx, "p")
			require.NoError(t, aerr)
			vs, verr := e.reg.Versions(ctx, "p")
			require.NoError(t, verr)
			require.Len(t, vs, tc.nvers)
			require.Equal(t, tc.active, a.Version)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
				require.Equal(t, before, a, "a refused module changes nothing")
				_, gerr := e.blobs.Get(ctx, registry.Sum(tc.wasm))
				require.ErrorIs(t, gerr, registry.ErrNoModule, "a refused module's bytes are not stored")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.outcome, got.Outcome)
			require.False(t, got.Retried)
			require.Equal(t, tc.active, got.Version.Number)
			require.Equal(t, tc.prev, got.Previous)
			require.Equal(t, registry.Sum(tc.wasm), got.Version.SHA256)
			if tc.outcome == deploy.AlreadyActive {
				require.Equal(t, before, a, "the pointer is not written")
			}
			if tc.outcome == deploy.Deployed {
				require.Equal(t, "run --handler", got.Version.Note)
				require.Equal(t, "turned off", got.Deploy.Smoke.Skipped)
			}
			v, b, err := deploy.ActiveModule(ctx, e.reg, e.blobs, "p")
			require.NoError(t, err)
			require.Equal(t, got.Version, v)
			require.Equal(t, tc.wasm, b)
		})
	}
}

// racer is a registry whose first Activate is preceded by another activation (of version
// other), as when another worker's deploy comes between Ensure's read and its write.
type racer struct {
	registry.Store
	other int64
	raced bool
}

func (r *racer) Activate(ctx context.Context, projection string, n, expect int64) (registry.Active, error) {
	if !r.raced {
		r.raced = true
		if _, err := r.Store.Activate(ctx, projection, r.other, expect); err != nil {
			return registry.Active{}, err
		}
	}
	return r.Store.Activate(ctx, projection, n, expect)
}

// TestEnsureConflict: a conflict (the pointer moved between Ensure's read and its write) is
// tried once more, from the pointer as it then is: a new module's version, stored by the first
// attempt, is activated by the second.
func TestEnsureConflict(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, deploy.Config{SmokeEvents: -1})
	_, err := e.d.Deploy(ctx, "p", read(t, testwasm.CountGo), deploy.Options{})
	require.NoError(t, err)
	r := &racer{Store: e.reg, other: 1}
	d, err := deploy.New(deploy.Config{Registry: r, Blobs: e.blobs, Runtime: e.rt, SmokeEvents: -1})
	require.NoError(t, err)
	fd := read(t, testwasm.FlightDelaysAS)
	got, err := d.Ensure(ctx, "p", fd, "")
	require.NoError(t, err)
	require.True(t, got.Retried)
	require.Equal(t, deploy.ActivatedStored, got.Outcome)
	require.Equal(t, int64(2), got.Version.Number)
	require.Equal(t, int64(1), got.Previous, "the racing activation of version 1 came first")
	a, err := e.reg.Active(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, []int64{2, 1, 2}, []int64{a.Version, a.Previous, a.Counter})
}
