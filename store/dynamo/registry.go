package dynamo

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/registry"
)

// Attribute names of the modules table's items besides the keys (the package documentation,
// Modules).
const (
	attrModSHA      = "sha256"
	attrModSize     = "size"
	attrModABI      = "abi"
	attrModUploaded = "uploaded_ms"
	attrModNote     = "note"
	attrModVersion  = "version"
	attrModPrevious = "previous"
	attrModCounter  = "counter"
	attrModChanged  = "changed_ms"
	attrModToken    = "token"
)

// modActiveSK is the sort key of a projection's active pointer.
const modActiveSK = "active"

// modVersionSK is the sort key of version n: "v#" and n in 20 digits, so that the key order is
// the numbers' order.
func modVersionSK(n int64) string { return fmt.Sprintf("v#%020d", n) }

// maxAddTries bounds Add's attempts when other Adds keep taking the next number.
const maxAddTries = 50

// Registry is a registry.Store on the modules table. Add is a conditional PutItem of a new
// version item (attribute_not_exists), tried with the next number until one is free; Activate a
// conditional PutItem of the pointer item on its counter. Both write a request token and, when
// the condition fails, read the item back (strongly consistent): holding this call's token, the
// write is this call's own, applied with its answer lost (RATIONALE.md, "Writes of unknown
// outcome"). Safe for concurrent use.
type Registry struct {
	api   dynamotables.ItemAPI
	table string
}

var _ registry.Store = (*Registry)(nil)

// NewRegistry returns a Registry on the modules table of prefix through api; the table must
// exist (CreateTables). Errors: ErrBadPrefix.
func NewRegistry(api dynamotables.ItemAPI, prefix string) (*Registry, error) {
	n, err := dynamotables.NamesFor(prefix)
	if err != nil {
		return nil, err
	}
	return &Registry{api: api, table: n.Modules}, nil
}

func (r *Registry) key(projection, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dynamotables.ModulesPK: str(projection), dynamotables.ModulesSK: str(sk)}
}

// Add implements registry.Store.
func (r *Registry) Add(ctx context.Context, v registry.Version) (registry.Version, error) {
	if err := registry.CheckVersion(v); err != nil {
		return registry.Version{}, err
	}
	last, err := r.lastNumber(ctx, v.Projection)
	if err != nil {
		return registry.Version{}, err
	}
	for try := 0; try < maxAddTries; try++ {
		v.Number = last + 1
		tok := requestToken()
		item := r.key(v.Projection, modVersionSK(v.Number))
		item[attrModSHA] = str(v.SHA256)
		item[attrModSize] = num(v.Size)
		item[attrModABI] = num(int64(v.ABI))
		item[attrModUploaded] = num(v.UploadedMs)
		item[attrModNote] = str(v.Note)
		item[attrModToken] = str(tok)
		_, err := r.api.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                aws.String(r.table),
			Item:                     item,
			ConditionExpression:      aws.String("attribute_not_exists(#p)"),
			ExpressionAttributeNames: map[string]string{"#p": dynamotables.ModulesPK},
		})
		if err == nil {
			return v, nil
		}
		if !dynamotables.IsConditionalCheckFailed(err) {
			return registry.Version{}, fmt.Errorf("store/dynamo: add version %d of %q: %w", v.Number, v.Projection, err)
		}
		it, err := r.readBack(ctx, v.Projection, modVersionSK(v.Number))
		if err != nil {
			return registry.Version{}, fmt.Errorf("store/dynamo: add version %d of %q: the number was taken and reading it back failed: %w",
				v.Number, v.Projection, err)
		}
		if t, _ := it[attrModToken].(*types.AttributeValueMemberS); t != nil && t.Value == tok {
			return v, nil // this call's own write, its answer lost
		}
		last = v.Number // another Add took it: the next one
	}
	return registry.Version{}, fmt.Errorf("store/dynamo: add a version of %q: %d numbers in a row were taken by concurrent adds; try again",
		v.Projection, maxAddTries)
}

// lastNumber returns the projection's highest version number (0 when none): one strongly
// consistent Query of the last version item.
func (r *Registry) lastNumber(ctx context.Context, projection string) (int64, error) {
	out, err := r.api.Query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(r.table),
		KeyConditionExpression:   aws.String("#p = :p AND begins_with(#s, :v)"),
		ExpressionAttributeNames: map[string]string{"#p": dynamotables.ModulesPK, "#s": dynamotables.ModulesSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p": str(projection), ":v": str("v#"),
		},
		ScanIndexForward: aws.Bool(false),
		Limit:            aws.Int32(1),
		ConsistentRead:   aws.Bool(true),
	})
	if err != nil {
		return 0, fmt.Errorf("store/dynamo: read the last version of %q: %w", projection, err)
	}
	if len(out.Items) == 0 {
		return 0, nil
	}
	v, err := decodeVersion(projection, out.Items[0])
	if err != nil {
		return 0, fmt.Errorf("store/dynamo: read the last version of %q: %w", projection, err)
	}
	return v.Number, nil
}

// Versions implements registry.Store (a strongly consistent, paginated Query).
func (r *Registry) Versions(ctx context.Context, projection string) ([]registry.Version, error) {
	p := dynamodb.NewQueryPaginator(r.api, &dynamodb.QueryInput{
		TableName:                aws.String(r.table),
		KeyConditionExpression:   aws.String("#p = :p AND begins_with(#s, :v)"),
		ExpressionAttributeNames: map[string]string{"#p": dynamotables.ModulesPK, "#s": dynamotables.ModulesSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p": str(projection), ":v": str("v#"),
		},
		ConsistentRead: aws.Bool(true),
	})
	var out []registry.Version
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("store/dynamo: list the versions of %q: %w", projection, err)
		}
		for _, it := range page.Items {
			v, err := decodeVersion(projection, it)
			if err != nil {
				return nil, fmt.Errorf("store/dynamo: list the versions of %q: %w", projection, err)
			}
			out = append(out, v)
		}
	}
	return out, nil
}

func decodeVersion(projection string, it map[string]types.AttributeValue) (registry.Version, error) {
	v := registry.Version{Projection: projection}
	sk, _ := it[dynamotables.ModulesSK].(*types.AttributeValueMemberS)
	if sk == nil || len(sk.Value) < 3 {
		return v, fmt.Errorf("a version item without its sort key")
	}
	n, err := strconv.ParseInt(sk.Value[2:], 10, 64)
	if err != nil {
		return v, fmt.Errorf("version item %q: %w", sk.Value, err)
	}
	v.Number = n
	if s, ok := it[attrModSHA].(*types.AttributeValueMemberS); ok {
		v.SHA256 = s.Value
	}
	if s, ok := it[attrModNote].(*types.AttributeValueMemberS); ok {
		v.Note = s.Value
	}
	var abi int64
	for _, f := range []struct {
		name string
		dst  *int64
	}{{attrModSize, &v.Size}, {attrModABI, &abi}, {attrModUploaded, &v.UploadedMs}} {
		if *f.dst, _, err = intAttr(it, f.name); err != nil {
			return v, fmt.Errorf("version item %q: %w", sk.Value, err)
		}
	}
	v.ABI = int(abi)
	return v, nil
}

// Active implements registry.Store (a strongly consistent GetItem).
func (r *Registry) Active(ctx context.Context, projection string) (registry.Active, error) {
	out, err := r.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.table), Key: r.key(projection, modActiveSK),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return registry.Active{}, fmt.Errorf("store/dynamo: read the active version of %q: %w", projection, err)
	}
	a, err := decodeActive(projection, out.Item)
	if err != nil {
		return registry.Active{}, fmt.Errorf("store/dynamo: read the active version of %q: %w", projection, err)
	}
	return a, nil
}

func decodeActive(projection string, it map[string]types.AttributeValue) (registry.Active, error) {
	a := registry.Active{Projection: projection}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{attrModVersion, &a.Version}, {attrModPrevious, &a.Previous}, {attrModCounter, &a.Counter}, {attrModChanged, &a.ChangedMs}} {
		var err error
		if *f.dst, _, err = intAttr(it, f.name); err != nil {
			return a, fmt.Errorf("active item: %w", err)
		}
	}
	return a, nil
}

// Activate implements registry.Store: the version item is read (it must exist), then the
// pointer, then the pointer is written on condition that its counter is still expect.
func (r *Registry) Activate(ctx context.Context, projection string, n, expect int64) (registry.Active, error) {
	vo, err := r.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.table), Key: r.key(projection, modVersionSK(n)),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return registry.Active{}, fmt.Errorf("store/dynamo: activate version %d of %q: %w", n, projection, err)
	}
	if vo.Item == nil {
		return registry.Active{}, fmt.Errorf("store/dynamo: activate: %w: %s has no version %d", registry.ErrNoVersion, projection, n)
	}
	cur, err := r.Active(ctx, projection)
	if err != nil {
		return registry.Active{}, err
	}
	if cur.Counter != expect {
		return registry.Active{}, fmt.Errorf("store/dynamo: activate version %d: %w", n, &registry.ConflictError{Stored: cur})
	}
	next := registry.Active{Projection: projection, Version: n, Previous: cur.Version, Counter: expect + 1, ChangedMs: nowMs()}
	tok := requestToken()
	item := r.key(projection, modActiveSK)
	item[attrModVersion] = num(next.Version)
	item[attrModPrevious] = num(next.Previous)
	item[attrModCounter] = num(next.Counter)
	item[attrModChanged] = num(next.ChangedMs)
	item[attrModToken] = str(tok)
	in := &dynamodb.PutItemInput{TableName: aws.String(r.table), Item: item}
	if expect == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(#p)")
		in.ExpressionAttributeNames = map[string]string{"#p": dynamotables.ModulesPK}
	} else {
		in.ConditionExpression = aws.String("#c = :c")
		in.ExpressionAttributeNames = map[string]string{"#c": attrModCounter}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":c": num(expect)}
	}
	_, err = r.api.PutItem(ctx, in)
	if err == nil {
		return next, nil
	}
	if !dynamotables.IsConditionalCheckFailed(err) {
		return registry.Active{}, fmt.Errorf("store/dynamo: activate version %d of %q: %w", n, projection, err)
	}
	it, rerr := r.readBack(ctx, projection, modActiveSK)
	if rerr != nil {
		return registry.Active{}, fmt.Errorf("store/dynamo: activate version %d of %q: the condition failed and reading the pointer back failed: %w",
			n, projection, rerr)
	}
	if t, _ := it[attrModToken].(*types.AttributeValueMemberS); t != nil && t.Value == tok {
		return next, nil // this call's own write, its answer lost
	}
	stored, err := decodeActive(projection, it)
	if err != nil {
		return registry.Active{}, fmt.Errorf("store/dynamo: activate version %d of %q: %w", n, projection, err)
	}
	return registry.Active{}, fmt.Errorf("store/dynamo: activate version %d: %w", n, &registry.ConflictError{Stored: stored})
}

// readBack reads an item of the table (strongly consistent; nil when missing), even when ctx
// was just cancelled: the caller must learn whether its write is there.
func (r *Registry) readBack(ctx context.Context, projection, sk string) (map[string]types.AttributeValue, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
	defer cancel()
	out, err := r.api.GetItem(rctx, &dynamodb.GetItemInput{TableName: aws.String(r.table), Key: r.key(projection, sk),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// modShardSK is the sort key of a shard's version record.
func modShardSK(shardID string) string { return "shard#" + shardID }

const attrModShardEpoch, attrModSeq = "epoch", "seq"

// SetShard implements registry.Store: a PutItem on condition that no record of a newer epoch
// is stored (a failed condition is that case: no error). A retried write meets its own
// record, of the same epoch, and succeeds.
func (r *Registry) SetShard(ctx context.Context, v registry.ShardVersion) error {
	item := r.key(v.Projection, modShardSK(v.ShardID))
	item[attrModShardEpoch] = num(v.Epoch)
	item[attrModVersion] = num(v.Version)
	item[attrModSeq] = str(v.Seq)
	item[attrModChanged] = num(v.ChangedMs)
	_, err := r.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(r.table),
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(#e) OR #e <= :e"),
		ExpressionAttributeNames:  map[string]string{"#e": attrModShardEpoch},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": num(v.Epoch)},
	})
	if err != nil && !dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("store/dynamo: record the version of %q shard %q: %w", v.Projection, v.ShardID, err)
	}
	return nil
}

// Shards implements registry.Store (a strongly consistent, paginated Query).
func (r *Registry) Shards(ctx context.Context, projection string) ([]registry.ShardVersion, error) {
	p := dynamodb.NewQueryPaginator(r.api, &dynamodb.QueryInput{
		TableName:                aws.String(r.table),
		KeyConditionExpression:   aws.String("#p = :p AND begins_with(#s, :v)"),
		ExpressionAttributeNames: map[string]string{"#p": dynamotables.ModulesPK, "#s": dynamotables.ModulesSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p": str(projection), ":v": str("shard#"),
		},
		ConsistentRead: aws.Bool(true),
	})
	var out []registry.ShardVersion
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("store/dynamo: read the shard versions of %q: %w", projection, err)
		}
		for _, it := range page.Items {
			v := registry.ShardVersion{Projection: projection}
			if sk, ok := it[dynamotables.ModulesSK].(*types.AttributeValueMemberS); ok {
				v.ShardID = sk.Value[len("shard#"):]
			}
			if s, ok := it[attrModSeq].(*types.AttributeValueMemberS); ok {
				v.Seq = s.Value
			}
			for _, f := range []struct {
				name string
				dst  *int64
			}{{attrModShardEpoch, &v.Epoch}, {attrModVersion, &v.Version}, {attrModChanged, &v.ChangedMs}} {
				var err error
				if *f.dst, _, err = intAttr(it, f.name); err != nil {
					return nil, fmt.Errorf("store/dynamo: shard version item of %q: %w", projection, err)
				}
			}
			out = append(out, v)
		}
	}
	return out, nil
}
