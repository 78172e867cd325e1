package dynamo_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/shardmap/leasetest"
	"github.com/projhost/projhost/store/dynamo"
)

func TestLeaseConformance(t *testing.T) {
	s := open(t, newEnv(t), dynamo.NewLeaseStore)
	leasetest.Run(t, func(t *testing.T) shardmap.LeaseStore { return s })
}

// TestLeaseItemLayout checks the stored attributes, which other tools (and the SAM stack) rely
// on.
func TestLeaseItemLayout(t *testing.T) {
	e := newEnv(t)
	s := open(t, e, dynamo.NewLeaseStore)
	ctx := ctxT(t)
	l := shardmap.Lease{Projection: "p", ShardID: "shardId-000000000002", Owner: "w1", Counter: 7, Epoch: 3,
		ParentIDs: []string{"shardId-000000000000", "shardId-000000000001"}, State: shardmap.StateActive}
	if err := s.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	got, err := s.Update(ctx, shardmap.Lease{Projection: "p", ShardID: l.ShardID, Counter: 7, Epoch: 3,
		ParentIDs: l.ParentIDs, State: shardmap.StateFinished})
	if err != nil {
		t.Fatal(err)
	}
	if got.Counter != 8 || got.Owner != "" || got.State != shardmap.StateFinished {
		t.Fatalf("Update returned %+v, want counter 8, no owner, finished", got)
	}
	out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.names.Leases), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"projection": &types.AttributeValueMemberS{Value: "p"},
			"shard":      &types.AttributeValueMemberS{Value: l.ShardID},
		}})
	if err != nil {
		t.Fatal(err)
	}
	it := out.Item
	if _, ok := it["owner"]; ok {
		t.Errorf("free lease has an owner attribute: %v", it["owner"])
	}
	if n, ok := it["counter"].(*types.AttributeValueMemberN); !ok || n.Value != "8" {
		t.Errorf("counter = %#v, want N 8", it["counter"])
	}
	if n, ok := it["epoch"].(*types.AttributeValueMemberN); !ok || n.Value != "3" {
		t.Errorf("epoch = %#v, want N 3", it["epoch"])
	}
	if st, ok := it["state"].(*types.AttributeValueMemberS); !ok || st.Value != "finished" {
		t.Errorf("state = %#v, want S finished", it["state"])
	}
	if ps, ok := it["parents"].(*types.AttributeValueMemberL); !ok || len(ps.Value) != 2 {
		t.Errorf("parents = %#v, want L of 2", it["parents"])
	}
	// A stale counter (7) no longer matches.
	if _, err := s.Update(ctx, l); !errors.Is(err, shardmap.ErrConflict) {
		t.Fatalf("stale Update error = %v, want ErrConflict", err)
	}
}
