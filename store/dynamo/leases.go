package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/shardmap"
)

// Attribute names of a lease item besides the keys (see the package documentation, Leases).
const (
	attrLeaseOwner   = "owner"
	attrLeaseCounter = "counter"
	attrLeaseEpoch   = "epoch"
	attrLeaseParents = "parents"
	attrLeaseState   = "state"
	attrLeaseModule  = "module"
)

// LeaseStore is a shardmap.LeaseStore on the leases table (DESIGN §4; item layout: the package
// documentation, Leases). Every write is one conditional PutItem. It is safe for concurrent use.
//
// It is no shardmap.BatchUpdater: DynamoDB's only multi-item conditional write,
// TransactWriteItems, is all-or-nothing (one stale counter fails every lease of the call, and a
// renewal round would lose them all), and BatchWriteItem takes no conditions. The Manager
// renews through Update then, several at a time, which DynamoDB serves in parallel.
type LeaseStore struct {
	api   dynamotables.ItemAPI
	table string
}

var _ shardmap.LeaseStore = (*LeaseStore)(nil)

// NewLeaseStore returns a LeaseStore on the leases table of prefix (see Config.Prefix;
// "" is no prefix) through api (a *dynamodb.Client); the table must exist (CreateTables).
// Errors: ErrBadPrefix.
func NewLeaseStore(api dynamotables.ItemAPI, prefix string) (*LeaseStore, error) {
	n, err := dynamotables.NamesFor(prefix)
	if err != nil {
		return nil, err
	}
	return &LeaseStore{api: api, table: n.Leases}, nil
}

// List returns every lease of projection ordered by shard id (strongly consistent Query).
func (s *LeaseStore) List(ctx context.Context, projection string) ([]shardmap.Lease, error) {
	p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": dynamotables.LeasesPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(projection)},
		ConsistentRead:            aws.Bool(true),
	})
	var out []shardmap.Lease
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("store/dynamo: list leases of %q: %w", projection, err)
		}
		for _, it := range page.Items {
			l, err := decodeLease(it)
			if err != nil {
				return nil, fmt.Errorf("store/dynamo: list leases of %q: %w", projection, err)
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// Create stores l unless a lease for (l.Projection, l.ShardID) exists: shardmap.ErrExists.
func (s *LeaseStore) Create(ctx context.Context, l shardmap.Lease) error {
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     encodeLease(l),
		ConditionExpression:      aws.String("attribute_not_exists(#p)"),
		ExpressionAttributeNames: map[string]string{"#p": dynamotables.LeasesPK},
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("%w: projection %q shard %q", shardmap.ErrExists, l.Projection, l.ShardID)
	}
	if err != nil {
		return fmt.Errorf("store/dynamo: create lease %q/%q: %w", l.Projection, l.ShardID, err)
	}
	return nil
}

// Update replaces the lease if its stored counter equals l.Counter, storing l.Counter+1, and
// returns the stored lease. shardmap.ErrConflict when the counter differs or the lease is
// missing.
func (s *LeaseStore) Update(ctx context.Context, l shardmap.Lease) (shardmap.Lease, error) {
	next := l
	next.Counter = l.Counter + 1
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      encodeLease(next),
		ConditionExpression:       aws.String("#c = :c"),
		ExpressionAttributeNames:  map[string]string{"#c": attrLeaseCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": num(l.Counter)},
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return shardmap.Lease{}, fmt.Errorf("%w: projection %q shard %q counter %d", shardmap.ErrConflict, l.Projection, l.ShardID, l.Counter)
	}
	if err != nil {
		return shardmap.Lease{}, fmt.Errorf("store/dynamo: update lease %q/%q: %w", l.Projection, l.ShardID, err)
	}
	next.ParentIDs = append([]string(nil), l.ParentIDs...)
	return next, nil
}

// encodeLease returns the item of l, keys included.
func encodeLease(l shardmap.Lease) map[string]types.AttributeValue {
	parents := make([]types.AttributeValue, len(l.ParentIDs))
	for i, p := range l.ParentIDs {
		parents[i] = &types.AttributeValueMemberS{Value: p}
	}
	it := map[string]types.AttributeValue{
		dynamotables.LeasesPK: &types.AttributeValueMemberS{Value: l.Projection},
		dynamotables.LeasesSK: &types.AttributeValueMemberS{Value: l.ShardID},
		attrLeaseCounter:      num(l.Counter),
		attrLeaseEpoch:        num(l.Epoch),
		attrLeaseParents:      &types.AttributeValueMemberL{Value: parents},
		attrLeaseState:        &types.AttributeValueMemberS{Value: string(l.State)},
	}
	if l.Owner != "" {
		it[attrLeaseOwner] = &types.AttributeValueMemberS{Value: l.Owner}
	}
	if l.Module != "" {
		it[attrLeaseModule] = &types.AttributeValueMemberS{Value: l.Module}
	}
	return it
}

// decodeLease reads a lease item. Errors: counter or epoch missing or not an integer N.
func decodeLease(it map[string]types.AttributeValue) (shardmap.Lease, error) {
	var l shardmap.Lease
	var err error
	text := func(name string, dst *string) {
		if v, ok := it[name].(*types.AttributeValueMemberS); ok {
			*dst = v.Value
		}
	}
	integer := func(name string, dst *int64) {
		n, ok, aerr := intAttr(it, name)
		if !ok && aerr == nil {
			aerr = fmt.Errorf("attribute %s missing", name)
		}
		if aerr != nil && err == nil {
			err = fmt.Errorf("lease item: %w", aerr)
		}
		*dst = n
	}
	text(dynamotables.LeasesPK, &l.Projection)
	text(dynamotables.LeasesSK, &l.ShardID)
	text(attrLeaseOwner, &l.Owner)
	text(attrLeaseModule, &l.Module)
	var state string
	text(attrLeaseState, &state)
	l.State = shardmap.State(state)
	integer(attrLeaseCounter, &l.Counter)
	integer(attrLeaseEpoch, &l.Epoch)
	if ps, ok := it[attrLeaseParents].(*types.AttributeValueMemberL); ok {
		for _, p := range ps.Value {
			if s, ok := p.(*types.AttributeValueMemberS); ok {
				l.ParentIDs = append(l.ParentIDs, s.Value)
			}
		}
	}
	return l, err
}
