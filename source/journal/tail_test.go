package journal

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/projhost/projhost/source"
)

// TestTail: the last n events of a created shard, a closed parent and a child whose numbers
// continue its parents'; fewer when the shard holds fewer, none for n <= 0.
func TestTail(t *testing.T) {
	ctx := context.Background()
	j := create(t, t.TempDir(), 2)
	appendKeys(t, j, keyOn(t, 0, 2), 7) // shard 0: 1..7
	m, err := j.Merge(ctx, ShardID(0), ShardID(1))
	if err != nil {
		t.Fatal(err)
	}
	appendKeys(t, j, "x", 4) // the child: 8..11
	for _, tc := range []struct {
		shard string
		n     int
		want  []string
	}{
		{ShardID(0), 3, []string{"5", "6", "7"}},
		{ShardID(0), 7, []string{"1", "2", "3", "4", "5", "6", "7"}},
		{ShardID(0), 100, []string{"1", "2", "3", "4", "5", "6", "7"}},
		{ShardID(0), 0, nil},
		{ShardID(1), 5, nil},
		{m, 2, []string{"10", "11"}},
		{m, 10, []string{"8", "9", "10", "11"}},
	} {
		evs, err := j.Tail(ctx, tc.shard, tc.n)
		if err != nil {
			t.Fatalf("Tail(%s, %d): %v", tc.shard, tc.n, err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.Seq)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Tail(%s, %d) = %v, want %v", tc.shard, tc.n, got, tc.want)
		}
	}
	if _, err := j.Tail(ctx, "shardId-000000000099", 1); !errors.Is(err, source.ErrUnknownShard) {
		t.Fatalf("Tail of an unknown shard = %v, want ErrUnknownShard", err)
	}
}
