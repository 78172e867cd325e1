package dynamo_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/faultproxy"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/store/dynamo"
)

// TestLeaseCreateExistsReadBackFails: a Create that meets a lease another worker created, and
// whose read-back then fails (every GetItem dropped), still reports ErrExists (wrapping the
// read's error), so that EnsureShards (which takes ErrExists as done) does not fail a
// worker's start on it, and no caller takes the lease for its own write.
func TestLeaseCreateExistsReadBackFails(t *testing.T) {
	fe := newFaultEnv(t)
	s := openVia(t, fe, dynamo.NewLeaseStore)
	direct := open(t, fe.env, dynamo.NewLeaseStore)
	l := shardmap.Lease{Projection: "p", ShardID: "s1", State: shardmap.StateActive}
	require.NoError(t, direct.Create(ctxT(t), l))
	fe.proxy.SetRule(faultproxy.Rule{Kind: faultproxy.ApplyThenDrop, Match: func(r faultproxy.Request) bool { return r.Op == "GetItem" }})
	err := s.Create(ctxT(t), l)
	require.Error(t, err)
	assert.ErrorIs(t, err, shardmap.ErrExists)
	assert.Contains(t, err.Error(), "reading it back failed")
	assert.NotEmpty(t, fe.proxy.Faults(), "the read-back was not faulted")
	var ce *shardmap.ConflictError
	assert.False(t, errors.As(err, &ce))

}
