package lambda_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/lambda"
	"github.com/projhost/projhost/projection"
)

// emfDoc is an EMF line as CloudWatch reads it.
type emfDoc struct {
	AWS struct {
		Timestamp         int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	} `json:"_aws"`
	Members map[string]any `json:"-"`
}

// decodeEMF decodes the lines of out, checking the EMF structure of each: one directive of
// namespace projhost with the dimension set [projection, shard], both dimensions present as
// strings, every declared metric a number member with its unit.
func decodeEMF(t *testing.T, out []byte) []emfDoc {
	t.Helper()
	units := map[string]string{"Events": "Count", "Batches": "Count", "Mutations": "Count", "HandlerErrors": "Count",
		"DeadLetters": "Count", "CursorSaves": "Count", "LagEvents": "Count", "LagMillis": "Milliseconds",
		"HandlerDuration": "Milliseconds", "MemoryBytes": "Bytes"}
	var docs []emfDoc
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var d emfDoc
		require.NoError(t, json.Unmarshal(sc.Bytes(), &d))
		require.NoError(t, json.Unmarshal(sc.Bytes(), &d.Members))
		require.Len(t, d.AWS.CloudWatchMetrics, 1)
		dir := d.AWS.CloudWatchMetrics[0]
		require.Equal(t, lambda.EMFNamespace, dir.Namespace)
		require.Equal(t, "projhost", dir.Namespace)
		require.Equal(t, [][]string{{"projection", "shard"}}, dir.Dimensions)
		require.IsType(t, "", d.Members["projection"])
		require.IsType(t, "", d.Members["shard"])
		for _, m := range dir.Metrics {
			require.Equal(t, units[m.Name], m.Unit, "unit of %s", m.Name)
			require.IsType(t, 0.0, d.Members[m.Name], "%s is a number member", m.Name)
		}
		docs = append(docs, d)
	}
	return docs
}

func (d emfDoc) declared() map[string]bool {
	out := map[string]bool{}
	for _, m := range d.AWS.CloudWatchMetrics[0].Metrics {
		out[m.Name] = true
	}
	return out
}

// TestEMF: with Config.Metrics, each invocation writes one EMF line whose figures are the
// invocation's, as the user's hooks (chained with the EMF recorder's) saw them.
func TestEMF(t *testing.T) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:200]
	sid := shardID(2)
	const bad = 123
	cases := []struct {
		name      string
		policy    projection.OnError
		quoted    []int
		events    float64 // accepted
		dead      float64
		lagEvents float64
		lagFrom   int // the record whose age LagMillis is
	}{
		{"all committed", projection.Stop, nil, 200, 0, 0, 199},
		{"a dead letter", projection.DeadLetter, []int{bad}, 199, 1, 0, 199},
		{"stopped at a record", projection.Stop, []int{bad}, bad, 0, 200 - bad, bad},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, testwasm.FlightDelaysAS)
			var out bytes.Buffer
			var mu sync.Mutex
			var events, batches, errs, saves float64
			h := e.handler(t, func(cfg *lambda.Config) {
				cfg.Metrics = &out
				cfg.Core.Policy = projection.Policy{OnError: c.policy, MaxAttempts: 2}
				cfg.Core.Hooks = projection.Hooks{
					Batch:        func(i projection.BatchInfo) { mu.Lock(); events += float64(i.Events); batches++; mu.Unlock() },
					HandlerError: func(projection.HandlerErrorInfo) { mu.Lock(); errs++; mu.Unlock() },
					Flush:        func(projection.FlushInfo) { mu.Lock(); saves++; mu.Unlock() },
				}
			})
			before := time.Now()
			invoke(t, h, flightRecords(sid, fs, c.quoted...))
			after := time.Now()

			docs := decodeEMF(t, out.Bytes())
			require.Len(t, docs, 1, "one line per invocation: %s", out.String())
			d := docs[0]
			m := d.Members
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, proj, m["projection"])
			require.Equal(t, sid, m["shard"])
			require.Equal(t, c.events, events, "the user's hooks saw the same events")
			require.Equal(t, c.events, m["Events"])
			require.Equal(t, batches, m["Batches"])
			require.GreaterOrEqual(t, batches, 1.0)
			require.Equal(t, errs, m["HandlerErrors"])
			require.Equal(t, saves, m["CursorSaves"])
			require.GreaterOrEqual(t, saves, 1.0)
			require.Equal(t, c.dead, m["DeadLetters"])
			require.Equal(t, c.lagEvents, m["LagEvents"])
			if c.quoted == nil {
				require.Zero(t, errs)
				require.NotContains(t, m, "handlerErrorKinds")
			} else {
				require.Greater(t, errs, 0.0)
				require.Equal(t, map[string]any{projection.KindFail: errs}, m["handlerErrorKinds"])
			}
			arrived := arrival.Add(time.Duration(c.lagFrom) * time.Millisecond).UnixMilli()
			require.GreaterOrEqual(t, m["LagMillis"], float64(before.UnixMilli()-arrived))
			require.LessOrEqual(t, m["LagMillis"], float64(after.UnixMilli()-arrived))
			require.GreaterOrEqual(t, d.AWS.Timestamp, before.UnixMilli())
			require.LessOrEqual(t, d.AWS.Timestamp, after.UnixMilli())
			require.Greater(t, m["HandlerDuration"], 0.0)
			require.Greater(t, m["MemoryBytes"], 0.0)
			require.Zero(t, int64(m["MemoryBytes"].(float64))%(64<<10), "whole pages")
			require.Equal(t, "flights v1", m["module"])
			require.Equal(t, "1", m["version"])
			require.Len(t, d.declared(), 10, "every metric declared: %v", d.declared())
		})
	}
}
