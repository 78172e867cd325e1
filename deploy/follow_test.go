package deploy_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/internal/testwasm"
)

// TestFollowerRefresh: Refresh is one poll of Run: it switches to a newly activated version,
// back to a loaded one without loading it again, keeps the running version when the active one
// cannot be loaded (an error the first time, nothing until RetryFailed passes after that).
func TestFollowerRefresh(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, deploy.Config{SmokeEvents: -1})
	deployed := func(name string) int64 {
		t.Helper()
		r, err := e.d.Deploy(ctx, "p", read(t, name), deploy.Options{Activate: true})
		require.NoError(t, err)
		require.True(t, r.Activated)
		return r.Version.Number
	}
	v1 := deployed(testwasm.CountAS)
	f, err := deploy.NewFollower(ctx, deploy.FollowConfig{Registry: e.reg, Blobs: e.blobs, Runtime: e.rt, Projection: "p",
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { f.Close(ctx) })
	m1 := f.Module()
	require.NoError(t, f.Refresh(ctx))
	require.Same(t, m1, f.Module(), "an unchanged pointer keeps the module")

	v2 := deployed(testwasm.FlightDelaysAS)
	require.NoError(t, f.Refresh(ctx))
	require.Equal(t, v2, f.Version().Number)
	require.NotSame(t, m1, f.Module())

	_, _, err = deploy.Activate(ctx, e.reg, e.blobs, "p", v1)
	require.NoError(t, err)
	require.NoError(t, f.Refresh(ctx))
	require.Equal(t, v1, f.Version().Number)
	require.Same(t, m1, f.Module(), "a version loaded before is not loaded again")

	// Version 3's bytes leave the module store after its activation: the follower keeps v1.
	r, err := e.d.Deploy(ctx, "p", read(t, testwasm.CountGo), deploy.Options{Activate: true})
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(e.blobsDir, r.Version.SHA256+".wasm")))
	err = f.Refresh(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), "version 3")
	require.Equal(t, v1, f.Version().Number)
	require.NoError(t, f.Refresh(ctx), "a failed version is tried again only after RetryFailed")
	require.Same(t, m1, f.Module())
}
