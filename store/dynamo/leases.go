package dynamo

import (
	"context"
	"fmt"
	"slices"
	"time"

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
	attrLeaseToken   = "token"
)

// readBackTimeout bounds the read that follows a failed condition, which runs even when the
// caller's context was just cancelled.
const readBackTimeout = 5 * time.Second

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
// When the condition fails, the lease is read: one holding exactly l and this call's request
// token is this Create's own write, whose first attempt was applied without its answer reaching
// us (a 5xx, a timeout or a reset after the request was sent; the SDK's retry then met it),
// and Create succeeds. When that read fails, Create returns ErrExists too (the lease exists;
// the error also wraps the read's): a caller never takes a lease it may not have written for
// its own, and EnsureShards, which only needs the lease to exist, does not fail a worker's
// start on it.
func (s *LeaseStore) Create(ctx context.Context, l shardmap.Lease) error {
	tok := requestToken()
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     encodeLease(l, tok),
		ConditionExpression:      aws.String("attribute_not_exists(#p)"),
		ExpressionAttributeNames: map[string]string{"#p": dynamotables.LeasesPK},
	})
	if err != nil && !dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("store/dynamo: create lease %q/%q: %w", l.Projection, l.ShardID, err)
	}
	if err == nil {
		return nil
	}
	stored, stok, err := s.readBack(ctx, l)
	if err != nil {
		// The failed condition proves a lease exists; only whether it is this call's own write
		// is unknown. ErrExists is the answer that makes no caller assume it wrote the lease.
		return fmt.Errorf("%w: projection %q shard %q (whether it is this call's own write is unknown: reading it back failed: %w)",
			shardmap.ErrExists, l.Projection, l.ShardID, err)
	}
	if stored != nil && stok == tok && sameLease(*stored, l) {
		return nil
	}
	return fmt.Errorf("%w: projection %q shard %q", shardmap.ErrExists, l.Projection, l.ShardID)
}

// Update replaces the lease if its stored counter equals l.Counter, storing l.Counter+1, and
// returns the stored lease. When the condition fails, the lease is read (strongly consistent):
// one holding exactly l with counter l.Counter+1 and this call's request token was written by
// an attempt of this call whose answer was lost, and Update succeeds; otherwise a
// *shardmap.ConflictError with the stored lease (nil when missing) — which may be this
// worker's own write of an earlier call that failed (shardmap.Manager resolves that: only the
// token proves the write happened during this call, after the caller's clock started its
// validity). A failed read-back is returned as an error that is no conflict: the write may or
// may not have been applied.
func (s *LeaseStore) Update(ctx context.Context, l shardmap.Lease) (shardmap.Lease, error) {
	next := l
	next.Counter = l.Counter + 1
	next.ParentIDs = append([]string(nil), l.ParentIDs...)
	tok := requestToken()
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      encodeLease(next, tok),
		ConditionExpression:       aws.String("#c = :c"),
		ExpressionAttributeNames:  map[string]string{"#c": attrLeaseCounter},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": num(l.Counter)},
	})
	if err == nil {
		return next, nil
	}
	if !dynamotables.IsConditionalCheckFailed(err) {
		return shardmap.Lease{}, fmt.Errorf("store/dynamo: update lease %q/%q: %w", l.Projection, l.ShardID, err)
	}
	stored, stok, err := s.readBack(ctx, l)
	if err != nil {
		return shardmap.Lease{}, fmt.Errorf("store/dynamo: update lease %q/%q at counter %d: the condition failed and reading the lease back failed: %w",
			l.Projection, l.ShardID, l.Counter, err)
	}
	if stored != nil && stok == tok && sameLease(*stored, next) {
		return next, nil
	}
	return shardmap.Lease{}, fmt.Errorf("store/dynamo: update lease: %w", shardmap.NewConflict(l, stored))
}

// readBack reads the lease of l's shard (strongly consistent; nil when missing) and the token of
// the write that stored it, even when ctx was just cancelled: the caller must learn whether its
// write is there.
func (s *LeaseStore) readBack(ctx context.Context, l shardmap.Lease) (*shardmap.Lease, string, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
	defer cancel()
	out, err := s.api.GetItem(rctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table),
		Key: map[string]types.AttributeValue{
			dynamotables.LeasesPK: str(l.Projection),
			dynamotables.LeasesSK: str(l.ShardID),
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, "", err
	}
	if out.Item == nil {
		return nil, "", nil
	}
	stored, err := decodeLease(out.Item)
	if err != nil {
		return nil, "", err
	}
	tok, _ := out.Item[attrLeaseToken].(*types.AttributeValueMemberS)
	if tok == nil {
		return &stored, "", nil
	}
	return &stored, tok.Value, nil
}

// sameLease reports whether a and b are the same stored lease: every attribute equal.
func sameLease(a, b shardmap.Lease) bool {
	return a.Projection == b.Projection && a.ShardID == b.ShardID && a.Owner == b.Owner && a.Counter == b.Counter &&
		a.Epoch == b.Epoch && a.State == b.State && a.Module == b.Module && slices.Equal(a.ParentIDs, b.ParentIDs)
}

// encodeLease returns the item of l, keys included, written with the request token tok.
func encodeLease(l shardmap.Lease, tok string) map[string]types.AttributeValue {
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
		attrLeaseToken:        &types.AttributeValueMemberS{Value: tok},
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
