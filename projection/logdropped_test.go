package projection_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
)

// Guest log lines past the rate limit are counted through Hooks.LogDropped (and traced as
// log_dropped), per handler call, and the host log stays bounded.
func TestLogDroppedHook(t *testing.T) {
	ctx := context.Background()
	var logBuf bytes.Buffer
	mod := loadWith(t, testwasm.LogFlood, slog.New(slog.NewTextHandler(&logBuf, nil)), host.WithBatchDeadline(time.Minute)) // slow under -race

	var drops []projection.LogDroppedInfo
	var trace bytes.Buffer
	st := storetest.Backends()[0].Open(t)
	p := newProc(t, st, projection.Fixed(mod), func(c *projection.Config) {
		c.Hooks = projection.Chain(projection.Hooks{LogDropped: func(i projection.LogDroppedInfo) { drops = append(drops, i) }},
			projection.TraceHooks(&trace))
		c.MaxBatchBytes = 1 // one handler call per event
	})
	sh, err := p.Open(ctx, shard, 1, projection.ShardOptions{})
	require.NoError(t, err)
	data := []byte(strings.Repeat("x", 2000)) // logflood: 200,000 log calls and stdout lines per event
	evs := []event.Event{{ShardID: shard, Seq: "1", PartitionKey: "k", Data: data}, {ShardID: shard, Seq: "2", PartitionKey: "k", Data: data}}
	start := time.Now()
	require.NoError(t, sh.Handle(ctx, evs))
	sh.Close(ctx)
	elapsed := time.Since(start)

	require.Len(t, drops, 2, "one LogDropped per handler call that dropped lines")
	const written = 2 * 2 * 200_000
	var sum uint64
	for _, d := range drops {
		sum += d.Lines
		require.Equal(t, shard, d.ShardID)
		require.Equal(t, sum, d.Total)
	}
	logged := uint64(strings.Count(logBuf.String(), "msg=flood"))
	require.Equal(t, uint64(written), sum+logged, "every line either logged or counted as dropped")
	require.LessOrEqual(t, logged, uint64(host.GuestLogBurst+elapsed.Seconds()*host.GuestLogRate+1), "host log bounded by the burst and the rate")

	var traced []projection.TraceRecord
	sc := bufio.NewScanner(&trace)
	for sc.Scan() {
		var r projection.TraceRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		if r.Event == "log_dropped" {
			traced = append(traced, r)
		}
	}
	require.Len(t, traced, 2)
	require.Equal(t, drops[1].Lines, traced[1].Dropped)
	require.Equal(t, sum, traced[1].Total)
}
