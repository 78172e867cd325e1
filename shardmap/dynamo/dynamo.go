// Package dynamo implements shardmap.LeaseStore on DynamoDB (DESIGN §4).
//
// One item per (projection, shard) in the leases table (internal/dynamotables):
//
//	projection S (HASH), shard S (RANGE), owner S (absent when free), counter N, epoch N,
//	parents L of S, state S ("active" | "finished")
//
// Every write is a single conditional PutItem: Create with attribute_not_exists(projection),
// Update with counter = <expected>. No transactions are used, so it runs on dynalite too.
package dynamo

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/shardmap"
)

// Attribute names of a lease item besides the keys.
const (
	attrOwner   = "owner"
	attrCounter = "counter"
	attrEpoch   = "epoch"
	attrParents = "parents"
	attrState   = "state"
)

// Store is a shardmap.LeaseStore on DynamoDB. It is safe for concurrent use.
type Store struct {
	api   dynamotables.ItemAPI
	table string
}

var _ shardmap.LeaseStore = (*Store)(nil)

// New returns a Store on the leases table of prefix (see dynamotables.NamesFor); the table must
// exist (dynamotables.CreateTables). Errors: dynamotables.ErrBadPrefix.
func New(api dynamotables.ItemAPI, prefix string) (*Store, error) {
	n, err := dynamotables.NamesFor(prefix)
	if err != nil {
		return nil, err
	}
	return &Store{api: api, table: n.Leases}, nil
}

// List returns every lease of projection ordered by shard id (strongly consistent Query).
func (s *Store) List(ctx context.Context, projection string) ([]shardmap.Lease, error) {
	p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": dynamotables.LeasesPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projection}},
		ConsistentRead:            aws.Bool(true),
	})
	var out []shardmap.Lease
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("shardmap/dynamo: list leases of %q: %w", projection, err)
		}
		for _, it := range page.Items {
			l, err := decode(it)
			if err != nil {
				return nil, fmt.Errorf("shardmap/dynamo: list leases of %q: %w", projection, err)
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// Create stores l unless a lease for (l.Projection, l.ShardID) exists: shardmap.ErrExists.
func (s *Store) Create(ctx context.Context, l shardmap.Lease) error {
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     encode(l),
		ConditionExpression:      aws.String("attribute_not_exists(#p)"),
		ExpressionAttributeNames: map[string]string{"#p": dynamotables.LeasesPK},
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("%w: projection %q shard %q", shardmap.ErrExists, l.Projection, l.ShardID)
	}
	if err != nil {
		return fmt.Errorf("shardmap/dynamo: create lease %q/%q: %w", l.Projection, l.ShardID, err)
	}
	return nil
}

// Update replaces the lease if its stored counter equals l.Counter, storing l.Counter+1, and
// returns the stored lease. shardmap.ErrConflict when the counter differs or the lease is
// missing.
func (s *Store) Update(ctx context.Context, l shardmap.Lease) (shardmap.Lease, error) {
	next := l
	next.Counter = l.Counter + 1
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      encode(next),
		ConditionExpression:       aws.String("#c = :c"),
		ExpressionAttributeNames:  map[string]string{"#c": attrCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": num(l.Counter)},
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return shardmap.Lease{}, fmt.Errorf("%w: projection %q shard %q counter %d", shardmap.ErrConflict, l.Projection, l.ShardID, l.Counter)
	}
	if err != nil {
		return shardmap.Lease{}, fmt.Errorf("shardmap/dynamo: update lease %q/%q: %w", l.Projection, l.ShardID, err)
	}
	next.ParentIDs = append([]string(nil), l.ParentIDs...)
	return next, nil
}

func num(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func encode(l shardmap.Lease) map[string]types.AttributeValue {
	parents := make([]types.AttributeValue, len(l.ParentIDs))
	for i, p := range l.ParentIDs {
		parents[i] = &types.AttributeValueMemberS{Value: p}
	}
	it := map[string]types.AttributeValue{
		dynamotables.LeasesPK: &types.AttributeValueMemberS{Value: l.Projection},
		dynamotables.LeasesSK: &types.AttributeValueMemberS{Value: l.ShardID},
		attrCounter:           num(l.Counter),
		attrEpoch:             num(l.Epoch),
		attrParents:           &types.AttributeValueMemberL{Value: parents},
		attrState:             &types.AttributeValueMemberS{Value: string(l.State)},
	}
	if l.Owner != "" {
		it[attrOwner] = &types.AttributeValueMemberS{Value: l.Owner}
	}
	return it
}

func decode(it map[string]types.AttributeValue) (shardmap.Lease, error) {
	var l shardmap.Lease
	var err error
	str := func(name string, dst *string) {
		if v, ok := it[name].(*types.AttributeValueMemberS); ok {
			*dst = v.Value
		}
	}
	integer := func(name string, dst *int64) {
		v, ok := it[name].(*types.AttributeValueMemberN)
		if !ok {
			if err == nil {
				err = fmt.Errorf("lease item lacks number attribute %q", name)
			}
			return
		}
		n, perr := strconv.ParseInt(v.Value, 10, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("lease item attribute %q: %w", name, perr)
		}
		*dst = n
	}
	str(dynamotables.LeasesPK, &l.Projection)
	str(dynamotables.LeasesSK, &l.ShardID)
	str(attrOwner, &l.Owner)
	var state string
	str(attrState, &state)
	l.State = shardmap.State(state)
	integer(attrCounter, &l.Counter)
	integer(attrEpoch, &l.Epoch)
	if ps, ok := it[attrParents].(*types.AttributeValueMemberL); ok {
		for _, p := range ps.Value {
			if s, ok := p.(*types.AttributeValueMemberS); ok {
				l.ParentIDs = append(l.ParentIDs, s.Value)
			}
		}
	}
	return l, err
}
