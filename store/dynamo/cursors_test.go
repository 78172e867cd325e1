package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/cursorstore/cursortest"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/store/dynamo"
)

func TestCursorConformance(t *testing.T) {
	s := open(t, newEnv(t), dynamo.NewCursorStore)
	cursortest.Run(t, func(t *testing.T) cursorstore.Store { return s })
}

// TestCursorSaveOutcomes walks one cursor through the cases Save must tell apart.
func TestCursorSaveOutcomes(t *testing.T) {
	e := newEnv(t)
	s := open(t, e, dynamo.NewCursorStore)
	ctx := ctxT(t)
	const p, sh = "proj", "shardId-000000000000"
	steps := []struct {
		name  string
		claim int64 // >0: Claim with this epoch before the Save
		epoch int64
		seq   string
		want  error
	}{
		{"save without claim at epoch 0", 0, 0, "5", nil},
		{"claim 1 then save", 1, 1, "49590338271490256608559692538361571095921575989136588898", nil},
		{"numerically lower, longer string", 0, 1, "9", cursorstore.ErrBackwards},
		{"same seq again", 0, 1, "49590338271490256608559692538361571095921575989136588898", nil},
		{"epoch 0 after claim", 0, 0, "49590338271490256608559692538361571095921575989136588899", cursorstore.ErrFenced},
		{"unclaimed newer epoch", 0, 2, "49590338271490256608559692538361571095921575989136588899", cursorstore.ErrFenced},
		{"zombie after claim 3", 3, 1, "49590338271490256608559692538361571095921575989136588899", cursorstore.ErrFenced},
	}
	for _, st := range steps {
		if st.claim > 0 {
			if _, err := s.Claim(ctx, p, sh, st.claim); err != nil {
				t.Fatalf("%s: claim: %v", st.name, err)
			}
		}
		err := s.Save(ctx, p, sh, st.epoch, st.seq)
		if (st.want == nil) != (err == nil) || (st.want != nil && !errors.Is(err, st.want)) {
			t.Fatalf("%s: Save error = %v, want %v", st.name, err, st.want)
		}
	}
	got, err := s.Get(ctx, p, sh)
	if err != nil {
		t.Fatal(err)
	}
	want := cursorstore.Cursor{Projection: p, ShardID: sh, Epoch: 3, Seq: "49590338271490256608559692538361571095921575989136588898"}
	if got != want {
		t.Fatalf("Get = %+v, want %+v", got, want)
	}
	// The padded sequence attribute is what conditions compare.
	out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.names.Cursors), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"projection": &types.AttributeValueMemberS{Value: p},
			"shard":      &types.AttributeValueMemberS{Value: sh},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if sp, ok := out.Item["seqp"].(*types.AttributeValueMemberS); !ok || len(sp.Value) != source.SeqWidth ||
		strings.TrimLeft(sp.Value, "0") != "49590338271490256608559692538361571095921575989136588898" {
		t.Fatalf("seqp = %#v, want the 56-digit sequence zero-padded to %d digits", out.Item["seqp"], source.SeqWidth)
	}
}

// BenchmarkCursorSave measures conditional cursor saves (one UpdateItem each) against the server,
// sequentially and from 8 goroutines on 8 shards.
func BenchmarkCursorSave(b *testing.B) {
	for _, par := range []int{1, 8} {
		b.Run(fmt.Sprintf("goroutines=%d", par), func(b *testing.B) {
			s := open(b, newEnv(b), dynamo.NewCursorStore)
			ctx := context.Background()
			for g := range par {
				if _, err := s.Claim(ctx, "p", fmt.Sprint("shard-", g), 1); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64 // Saves issued so far, across goroutines
			b.ResetTimer()
			var wg sync.WaitGroup
			for g := range par {
				wg.Add(1)
				go func() {
					defer wg.Done()
					shard := fmt.Sprint("shard-", g)
					for seq := 1; next.Add(1) <= int64(b.N); seq++ {
						if err := s.Save(ctx, "p", shard, 1, fmt.Sprint(seq)); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}
