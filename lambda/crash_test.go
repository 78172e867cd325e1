package lambda_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/lambda"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/readmodel"
)

// crashingReadModel applies only the mutations keep accepts of the first Write (after Apply
// raised the shard's write fence to the Write's sequence number), then blocks until its context
// ends: a process killed (kill -9, out of memory, the runtime's timeout) in the middle of a
// commit.
type crashingReadModel struct {
	readmodel.Store
	keep  func(event.Mutation) bool
	armed *atomic.Bool
}

func (c crashingReadModel) Apply(ctx context.Context, w readmodel.Write) error {
	if !c.armed.CompareAndSwap(true, false) {
		return c.Store.Apply(ctx, w)
	}
	part := w
	part.Mutations = nil
	for _, m := range w.Mutations {
		if c.keep(m) {
			part.Mutations = append(part.Mutations, m)
		}
	}
	if err := c.Store.Apply(ctx, part); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestCrashMidCommitThenPart: an invocation dies in the middle of its commit (the write fence
// raised to record 39, counts/b written, counts/a not, the cursor not saved). The ESM
// (BisectBatchOnFunctionError, as template.yaml sets it) delivers the first half of the batch
// again, then the second: each is committed, the first ending below the interrupted write's
// high-water mark, and the read model is exact. (Before, the first half committed nothing and
// named record 0 until the ESM gave it up; then the second half committed past it, and
// counts/a was lost.) The whole batch delivered again gives the same read model.
func TestCrashMidCommitThenPart(t *testing.T) {
	sid := shardID(0)
	recs := make([]events.KinesisEventRecord, 40)
	for i := range recs {
		pk := "a"
		if i >= 20 {
			pk = "b"
		}
		recs[i] = record(sid, i, pk, []byte(`{}`))
	}
	want := []readmodel.Doc{{Collection: "counts", Key: "a", Doc: []byte(`{"count":20}`)},
		{Collection: "counts", Key: "b", Doc: []byte(`{"count":20}`)}}
	for _, c := range []struct {
		name       string
		deliveries [][]events.KinesisEventRecord
	}{
		{"halves", [][]events.KinesisEventRecord{recs[:20], recs[20:]}},
		{"quarters", [][]events.KinesisEventRecord{recs[:10], recs[10:20], recs[20:30], recs[30:]}},
		{"whole", [][]events.KinesisEventRecord{recs}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, testwasm.CountAS)
			armed := &atomic.Bool{}
			armed.Store(true)
			st := *e.st
			st.ReadModel = crashingReadModel{Store: e.st.ReadModel, keep: func(m event.Mutation) bool { return m.Key == "b" }, armed: armed}
			small := func(c *lambda.Config) {
				c.BatchDeadline = 100 * time.Millisecond
				c.Core.Policy = projection.Policy{OnError: projection.DeadLetter, MaxAttempts: 2}
			}
			crashing := e.handler(t, func(c *lambda.Config) { small(c); c.Core.Stores = &st })
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			resp, err := crashing.Handle(ctx, events.KinesisEvent{Records: recs})
			cancel()
			require.NoError(t, err)
			require.Equal(t, []events.KinesisBatchItemFailure{{ItemIdentifier: seqOf(0)}}, resp.BatchItemFailures)
			seq, _ := e.cursorOf(t, sid)
			require.Empty(t, seq, "nothing committed")
			require.Equal(t, want[1:], e.docs(t), "the crashed commit wrote counts/b only")

			h := e.handler(t, small) // a new container
			for _, d := range c.deliveries {
				require.Empty(t, invoke(t, h, d))
				seq, _ := e.cursorOf(t, sid)
				require.Equal(t, d[len(d)-1].Kinesis.SequenceNumber, seq)
			}
			require.Equal(t, want, e.docs(t))
		})
	}
}
