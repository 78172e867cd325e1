package lambda

import (
	"context"
	"sync/atomic"

	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/projection"
)

// activeModule is the core's ModuleProvider and ModuleRecorder: the Handler's Follower, set
// before any shard opens (Handler.active).
type activeModule struct {
	f atomic.Pointer[deploy.Follower]
}

var _ projection.ModuleRecorder = (*activeModule)(nil)

func (a *activeModule) Module() *host.Module { return a.f.Load().Module() }

func (a *activeModule) RecordModule(ctx context.Context, i projection.ModuleInfo) error {
	return a.f.Load().RecordModule(ctx, i)
}

func (a *activeModule) ModuleAfter(ctx context.Context, shardID, seq string) (*host.Module, error) {
	return a.f.Load().ModuleAfter(ctx, shardID, seq)
}
