package dynamo_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/internal/faultproxy"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/store/dynamo"
)

// TestAmbiguousLeaseCreate: a Create whose first attempt was applied and whose answer was lost
// succeeds (the retry meets the item this call wrote).
func TestAmbiguousLeaseCreate(t *testing.T) {
	for _, kind := range faultproxy.Kinds {
		t.Run(kind.String(), func(t *testing.T) {
			fe := newFaultEnv(t)
			s := openVia(t, fe, dynamo.NewLeaseStore)
			direct := open(t, fe.env, dynamo.NewLeaseStore)
			l := shardmap.Lease{Projection: "p", ShardID: "s1", State: shardmap.StateActive, ParentIDs: []string{"s0"}}
			fe.arm(kind, fe.names.Leases, `attribute_not_exists`)
			require.NoError(t, s.Create(ctxT(t), l))
			fe.requireFaulted(t)
			ls, err := direct.List(ctxT(t), "p")
			require.NoError(t, err)
			require.Len(t, ls, 1)
			assert.Equal(t, l, ls[0])
			// Another writer's Create of the same lease is still refused.
			assert.ErrorIs(t, s.Create(ctxT(t), l), shardmap.ErrExists)
		})
	}
}

// TestAmbiguousLeaseUpdate: renewals, takes, releases and finishes whose first attempt was
// applied and whose answer was lost return the lease they stored, not a conflict.
func TestAmbiguousLeaseUpdate(t *testing.T) {
	base := shardmap.Lease{Projection: "p", ShardID: "s1", Owner: "w1", Counter: 5, Epoch: 2, State: shardmap.StateActive, Module: "sha256:aa"}
	writes := map[string]func(shardmap.Lease) shardmap.Lease{
		"renew": func(l shardmap.Lease) shardmap.Lease { return l },
		"take": func(l shardmap.Lease) shardmap.Lease {
			l.Owner, l.Module, l.Epoch = "w2", "sha256:bb", l.Epoch+1
			return l
		},
		"release": func(l shardmap.Lease) shardmap.Lease { l.Owner, l.Module = "", ""; return l },
		"finish": func(l shardmap.Lease) shardmap.Lease {
			l.Owner, l.Module, l.State = "", "", shardmap.StateFinished
			return l
		},
	}
	for name, change := range writes {
		for _, kind := range faultproxy.Kinds {
			t.Run(name+"/"+kind.String(), func(t *testing.T) {
				fe := newFaultEnv(t)
				s := openVia(t, fe, dynamo.NewLeaseStore)
				direct := open(t, fe.env, dynamo.NewLeaseStore)
				require.NoError(t, direct.Create(ctxT(t), base))
				w := change(base)
				fe.arm(kind, fe.names.Leases, `#c = :c`)
				got, err := s.Update(ctxT(t), w)
				require.NoError(t, err)
				fe.requireFaulted(t)
				want := w
				want.Counter = base.Counter + 1
				assert.Equal(t, want, got)
				ls, err := direct.List(ctxT(t), "p")
				require.NoError(t, err)
				require.Len(t, ls, 1)
				assert.Equal(t, want, ls[0])
			})
		}
	}
}

// TestAmbiguousLeaseConflict: when the faulted attempt met another worker's write (its
// condition failed at the server, the answer was lost), the retry's conflict is reported with
// the other worker's lease.
func TestAmbiguousLeaseConflict(t *testing.T) {
	for _, kind := range faultproxy.Kinds {
		t.Run(kind.String(), func(t *testing.T) {
			fe := newFaultEnv(t)
			s := openVia(t, fe, dynamo.NewLeaseStore)
			direct := open(t, fe.env, dynamo.NewLeaseStore)
			base := shardmap.Lease{Projection: "p", ShardID: "s1", Owner: "w1", Counter: 5, Epoch: 2, State: shardmap.StateActive}
			require.NoError(t, direct.Create(ctxT(t), base))
			thief := base
			thief.Owner, thief.Epoch = "w2", 3
			stolen, err := direct.Update(ctxT(t), thief)
			require.NoError(t, err)

			fe.arm(kind, fe.names.Leases, `#c = :c`)
			_, err = s.Update(ctxT(t), base) // w1's renewal at the old counter
			require.ErrorIs(t, err, shardmap.ErrConflict)
			var ce *shardmap.ConflictError
			require.ErrorAs(t, err, &ce)
			require.NotNil(t, ce.Stored)
			assert.Equal(t, stolen, *ce.Stored)
			fs := fe.proxy.Faults()
			require.Len(t, fs, 1)
			assert.Equal(t, 400, fs[0].Status, "the faulted attempt's condition failed at the server")
		})
	}
}

// TestAmbiguousLeaseEarlierCall: an Update whose applied write was answered with errors until
// the client gave up returns that error; the next Update from the same counter then reports a
// conflict carrying the lease the first call stored (shardmap.Manager writes again on top of
// it: only the request token proves a write of this call, and an earlier call's write started
// no validity period).
func TestAmbiguousLeaseEarlierCall(t *testing.T) {
	fe := newFaultEnv(t)
	c, err := dynamotables.NewClient(context.Background(), dynamotables.WithEndpoint(fe.proxy.URL()),
		dynamotables.WithAttemptTimeout(faultAttemptTimeout), dynamotables.WithMaxAttempts(2))
	require.NoError(t, err)
	s, err := dynamo.NewLeaseStore(c, fe.prefix)
	require.NoError(t, err)
	direct := open(t, fe.env, dynamo.NewLeaseStore)
	base := shardmap.Lease{Projection: "p", ShardID: "s1", Owner: "w1", Counter: 5, Epoch: 2, State: shardmap.StateActive}
	require.NoError(t, direct.Create(ctxT(t), base))

	fe.proxy.SetRule(faultproxy.Rule{Kind: faultproxy.ApplyThen500, Limit: 2})
	_, err = s.Update(ctxT(t), base)
	require.Error(t, err)
	assert.False(t, errors.Is(err, shardmap.ErrConflict), "an unknown outcome is no conflict: %v", err)
	require.Len(t, fe.proxy.Faults(), 2)

	_, err = s.Update(ctxT(t), base)
	var ce *shardmap.ConflictError
	require.ErrorAs(t, err, &ce)
	want := base
	want.Counter = 6
	require.NotNil(t, ce.Stored)
	assert.Equal(t, want, *ce.Stored, "the first call's write")
}
