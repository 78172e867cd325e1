package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/dynamotables"
)

// Size limits of the dead-letter store (bytes).
const (
	// MaxItemBytes is DynamoDB's item size limit (400 KB, attribute names and values).
	MaxItemBytes = 400 * 1024
	// ChunkBytes is the data held by one chunk item: the item limit less room for the keys
	// (at most 2048 + 1024 bytes) and attribute names.
	ChunkBytes = 360 * 1024
	// inlineBytes bounds a head item with inline data (the rest of MaxItemBytes is margin for
	// DynamoDB's own accounting).
	inlineBytes = MaxItemBytes - 4*1024
	// MaxProjectionBytes and MaxShardIDBytes bound a dead letter's projection and shard id
	// (longer ones are deadletter.ErrInvalid). They follow from DynamoDB's key limits (partition
	// key 2048 bytes, sort key 1024: a chunk's sort key is the shard id and 158 bytes).
	MaxProjectionBytes = 2048
	MaxShardIDBytes    = 512
)

// ErrTooLarge is returned (wrapped) by Put for a letter whose fields other than Data do not fit
// in one DynamoDB item. Data of any size is stored (in chunks).
var ErrTooLarge = errors.New("store/dynamo: the dead letter's fields other than its data exceed a DynamoDB item")

// DeadLetters is a deadletter.Store on the dead-letter table, without transactions (items,
// chunked data and requests: the package documentation, Dead letters). It is safe for
// concurrent use.
type DeadLetters struct {
	api   dynamotables.ItemAPI
	table string
}

var _ deadletter.Store = (*DeadLetters)(nil)

// NewDeadLetters returns a DeadLetters on the dead-letter table of prefix (see
// Config.Prefix; "" is no prefix) through api (a *dynamodb.Client); the table must exist
// (CreateTables). Errors: ErrBadPrefix.
func NewDeadLetters(api dynamotables.ItemAPI, prefix string) (*DeadLetters, error) {
	n, err := dynamotables.NamesFor(prefix)
	if err != nil {
		return nil, err
	}
	return &DeadLetters{api: api, table: n.DeadLetters}, nil
}

// letterKey is the key of the dead-letter item (projection, sk).
func letterKey(projection, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		dynamotables.DeadLettersPK: str(projection),
		dynamotables.DeadLettersSK: str(sk),
	}
}

// validateKey is deadletter.ValidateKey plus the lengths DynamoDB keys can hold.
func validateKey(projection, shardID, seq string) error {
	if err := deadletter.ValidateKey(projection, shardID, seq); err != nil {
		return err
	}
	if len(projection) > MaxProjectionBytes || len(shardID) > MaxShardIDBytes {
		return fmt.Errorf("%w: projection of %d bytes or shard id of %d bytes: DynamoDB keys hold at most %d and %d",
			deadletter.ErrInvalid, len(projection), len(shardID), MaxProjectionBytes, MaxShardIDBytes)
	}
	return nil
}

// Put creates the letter or replaces the stored one, keeping the stored FirstFailure when it is
// earlier (a zero FirstFailure is unknown: the stored one is kept). Errors: an error wrapping
// deadletter.ErrInvalid (see deadletter.Letter.Validate; also projection or shard id too long
// for a key), ErrTooLarge, DynamoDB errors after the SDK's retries (Put again to complete it).
// A head write the SDK retried after an attempt that was applied (its answer lost) is this
// Put's own: Put succeeds, and the chunks of the data it replaced, if any, stay unreferenced
// (the package documentation, Dead letters: writes).
func (s *DeadLetters) Put(ctx context.Context, l deadletter.Letter) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("store/dynamo: put dead letter: %w", err)
	}
	if err := validateKey(l.Projection, l.ShardID, l.Seq); err != nil {
		return fmt.Errorf("store/dynamo: put dead letter: %w", err)
	}
	sk := headSK(l.ShardID, l.Seq)
	token := requestToken() // also the chunk generation
	keys := itemSize(letterKey(l.Projection, sk)) + len(attrLetterToken) + len(token)
	head := encodeHead(l, chunkRef{})
	if keys+itemSize(head) > inlineBytes {
		// The data goes to chunks: the rest must fit the head, with the chunks' reference.
		rest := l
		rest.Data = nil
		size := keys + itemSize(encodeHead(rest, chunkRef{n: 1, gen: token, len: len(l.Data)}))
		if size > inlineBytes {
			return fmt.Errorf("store/dynamo: put dead letter %s/%s/%s: %w (%d bytes without the data, at most %d)",
				l.Projection, l.ShardID, l.Seq, ErrTooLarge, size, inlineBytes)
		}
		var err error
		if head, err = s.putChunks(ctx, l, sk, token); err != nil {
			return err
		}
	}
	head[attrLetterToken] = str(token)
	old, err := s.writeHead(ctx, l.Projection, sk, head)
	if err != nil {
		return fmt.Errorf("store/dynamo: put dead letter %s/%s/%s: %w", l.Projection, l.ShardID, l.Seq, err)
	}
	if err := s.keepEarliest(ctx, l, sk, old); err != nil {
		return fmt.Errorf("store/dynamo: put dead letter %s/%s/%s: %w", l.Projection, l.ShardID, l.Seq, err)
	}
	if ownToken(old, token) {
		// The head write was retried after an attempt that was applied: old is this Put's own
		// head, and what the applied attempt replaced is unknown. Its chunks (if any) stay,
		// unreferenced (see the package documentation, Dead letters: writes).
		return nil
	}
	// The chunks of the data this Put replaced are no longer referenced.
	if _, ref, err := decodeHead(l.Projection, old); err == nil && ref.n > 0 {
		if err := s.deleteChunks(ctx, l.Projection, sk, ref); err != nil {
			return fmt.Errorf("store/dynamo: put dead letter %s/%s/%s: %w", l.Projection, l.ShardID, l.Seq, err)
		}
	}
	return nil
}

// ownToken reports whether the head item it was last written by the request with token.
func ownToken(it map[string]types.AttributeValue, token string) bool {
	v, ok := it[attrLetterToken].(*types.AttributeValueMemberS)
	return ok && v.Value == token
}

// putChunks writes l.Data as chunk items of generation gen (new for every Put) and returns the
// head attributes that refer to them.
func (s *DeadLetters) putChunks(ctx context.Context, l deadletter.Letter, sk, gen string) (map[string]types.AttributeValue, error) {
	ref := chunkRef{gen: gen, len: len(l.Data)}
	parts := split(l.Data, ChunkBytes)
	ref.n = len(parts)
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it := letterKey(l.Projection, chunkSK(sk, ref.gen, i))
			it[attrLetterChunkIndex], it[attrLetterData] = num(int64(i)), &types.AttributeValueMemberB{Value: part}
			if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: it}); err != nil {
				errs[i] = fmt.Errorf("store/dynamo: put dead letter %s/%s/%s: data chunk %d of %d: %w", l.Projection, l.ShardID, l.Seq, i, ref.n, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return encodeHead(l, ref), nil
}

// writeHead sets the head's attributes to head (first_failure_ms only if not stored yet) and
// removes the optional ones head lacks. It returns the item as it was before.
func (s *DeadLetters) writeHead(ctx context.Context, projection, sk string, head map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	names := map[string]string{}
	values := map[string]types.AttributeValue{}
	var set, remove []string
	attrs := make([]string, 0, len(head))
	for name := range head {
		attrs = append(attrs, name)
	}
	slices.Sort(attrs)
	for i, name := range attrs {
		n, v := "#a"+strconv.Itoa(i), ":a"+strconv.Itoa(i)
		names[n], values[v] = name, head[name]
		if name == attrLetterFirstFailure {
			set = append(set, n+" = if_not_exists("+n+", "+v+")")
		} else {
			set = append(set, n+" = "+v)
		}
	}
	for i, name := range optionalAttrs {
		if _, ok := head[name]; !ok {
			n := "#r" + strconv.Itoa(i)
			names[n] = name
			remove = append(remove, n)
		}
	}
	update := "SET " + strings.Join(set, ", ")
	if len(remove) > 0 {
		update += " REMOVE " + strings.Join(remove, ", ")
	}
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       letterKey(projection, sk),
		UpdateExpression:          aws.String(update),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllOld,
	})
	if err != nil {
		return nil, err
	}
	return out.Attributes, nil
}

// keepEarliest lowers the stored first failure to l's when the head write kept a later one.
func (s *DeadLetters) keepEarliest(ctx context.Context, l deadletter.Letter, sk string, old map[string]types.AttributeValue) error {
	if l.FirstFailure.IsZero() {
		return nil
	}
	v, ok := old[attrLetterFirstFailure].(*types.AttributeValueMemberN)
	if !ok {
		return nil // absent: the head write stored l's
	}
	mine := l.FirstFailure.UnixMilli()
	if stored, err := strconv.ParseInt(v.Value, 10, 64); err == nil && stored <= mine {
		return nil
	}
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       letterKey(l.Projection, sk),
		UpdateExpression:          aws.String("SET #f = :f"),
		ConditionExpression:       aws.String("attribute_not_exists(#f) OR #f > :f"),
		ExpressionAttributeNames:  map[string]string{"#f": attrLetterFirstFailure},
		ExpressionAttributeValues: map[string]types.AttributeValue{":f": num(mine)},
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return nil // a concurrent Put stored an earlier one still
	}
	return err
}

func (s *DeadLetters) deleteChunks(ctx context.Context, projection, sk string, ref chunkRef) error {
	for i := range ref.n {
		if _, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(s.table),
			Key:       letterKey(projection, chunkSK(sk, ref.gen, i)),
		}); err != nil {
			return fmt.Errorf("delete replaced data chunk %d of %d: %w", i, ref.n, err)
		}
	}
	return nil
}

// genDigits is the length of a chunk generation id (hex digits): a Put's requestToken.
const genDigits = 16

// readAttempts bounds how often Get and List re-read a head whose chunks a concurrent Put
// replaced between the two reads.
const readAttempts = 3

// Get returns one letter. Errors: deadletter.ErrNotFound, deadletter.ErrInvalid for an invalid
// identity, DynamoDB errors, an error for an item projhost did not write.
func (s *DeadLetters) Get(ctx context.Context, projection, shardID, seq string) (deadletter.Letter, error) {
	if err := validateKey(projection, shardID, seq); err != nil {
		return deadletter.Letter{}, fmt.Errorf("store/dynamo: get dead letter: %w", err)
	}
	sk := headSK(shardID, seq)
	var last error
	for range readAttempts {
		out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(s.table),
			Key:            letterKey(projection, sk),
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return deadletter.Letter{}, fmt.Errorf("store/dynamo: get dead letter %s/%s/%s: %w", projection, shardID, seq, err)
		}
		if out.Item == nil {
			return deadletter.Letter{}, fmt.Errorf("store/dynamo: dead letter %s/%s/%s: %w", projection, shardID, seq, deadletter.ErrNotFound)
		}
		l, err := s.load(ctx, projection, out.Item)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, errChunksGone) {
			return deadletter.Letter{}, fmt.Errorf("store/dynamo: get dead letter %s/%s/%s: %w", projection, shardID, seq, err)
		}
		last = err
	}
	return deadletter.Letter{}, fmt.Errorf("store/dynamo: get dead letter %s/%s/%s: %w", projection, shardID, seq, last)
}

// errChunksGone: the head's chunks were not all found (a concurrent Put replaced them): read the
// head again.
var errChunksGone = errors.New("data chunks replaced while reading")

// load decodes a head item and loads its chunks.
func (s *DeadLetters) load(ctx context.Context, projection string, it map[string]types.AttributeValue) (deadletter.Letter, error) {
	l, ref, err := decodeHead(projection, it)
	if err != nil || ref.n == 0 {
		return l, err
	}
	sk := headSK(l.ShardID, l.Seq)
	var items []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :prefix)"),
		ExpressionAttributeNames:  map[string]string{"#pk": dynamotables.DeadLettersPK, "#sk": dynamotables.DeadLettersSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(projection), ":prefix": str(chunkPrefix(sk, ref.gen))},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return l, fmt.Errorf("read data chunks: %w", err)
		}
		items = append(items, page.Items...)
	}
	if len(items) < ref.n {
		return l, fmt.Errorf("%w: %d of %d found", errChunksGone, len(items), ref.n)
	}
	if l.Data, err = assemble(ref, items); err != nil {
		return l, err
	}
	return l, nil
}

// List returns the projection's letters matching f, ordered by shard id (bytes) then sequence
// number (numerically). One paged Query of the projection (of the shard's key range with
// f.ShardID), plus one per letter with chunked data. Errors: deadletter.ErrInvalid for an empty
// projection or an unknown f.State, DynamoDB errors.
func (s *DeadLetters) List(ctx context.Context, projection string, f deadletter.Filter) ([]deadletter.Letter, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("store/dynamo: list dead letters: %w", err)
	}
	if projection == "" || len(projection) > MaxProjectionBytes {
		return nil, fmt.Errorf("store/dynamo: list dead letters: %w: projection of %d bytes", deadletter.ErrInvalid, len(projection))
	}
	var letters []deadletter.Letter
	for attempt := 1; ; attempt++ {
		var err error
		letters, err = s.list(ctx, projection, f)
		if err == nil {
			break
		}
		if !errors.Is(err, errChunksGone) || attempt == readAttempts {
			return nil, fmt.Errorf("store/dynamo: list dead letters of %s: %w", projection, err)
		}
	}
	slices.SortFunc(letters, func(a, b deadletter.Letter) int {
		if c := strings.Compare(a.ShardID, b.ShardID); c != 0 {
			return c
		}
		return event.CompareSeq(a.Seq, b.Seq)
	})
	return letters, nil
}

func (s *DeadLetters) list(ctx context.Context, projection string, f deadletter.Filter) ([]deadletter.Letter, error) {
	names := map[string]string{"#pk": dynamotables.DeadLettersPK, "#ci": attrLetterChunkIndex}
	values := map[string]types.AttributeValue{":pk": str(projection)}
	keyCond, filter := "#pk = :pk", []string{"attribute_not_exists(#ci)"}
	if f.ShardID != "" {
		keyCond += " AND begins_with(#sk, :prefix)"
		names["#sk"], names["#sh"] = dynamotables.DeadLettersSK, attrLetterShard
		values[":prefix"], values[":sh"] = str(f.ShardID+"#"), str(f.ShardID)
		filter = append(filter, "#sh = :sh") // the prefix also matches shard ids that extend it
	}
	if f.State != "" {
		names["#st"], values[":st"] = attrLetterState, str(string(f.State))
		filter = append(filter, "#st = :st")
	}
	p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String(keyCond),
		FilterExpression:          aws.String(strings.Join(filter, " AND ")),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ConsistentRead:            aws.Bool(true),
	})
	var out []deadletter.Letter
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			l, err := s.load(ctx, projection, it)
			if err != nil {
				return nil, err
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// Transition sets the letter's state to to if it is in one of from (and replayed_seq to
// replayedSeq when to is deadletter.StateReplayed): one conditional UpdateItem. Errors:
// deadletter.ErrNotFound, deadletter.ErrState, deadletter.ErrInvalid (see
// deadletter.ValidateTransition), DynamoDB errors. A Transition the SDK retried after an
// attempt that was applied (its answer lost) succeeds: the head carries its request token.
func (s *DeadLetters) Transition(ctx context.Context, projection, shardID, seq string, from []deadletter.State, to deadletter.State, replayedSeq string) error {
	if err := deadletter.ValidateTransition(projection, shardID, seq, from, to, replayedSeq); err != nil {
		return fmt.Errorf("store/dynamo: transition dead letter: %w", err)
	}
	if err := validateKey(projection, shardID, seq); err != nil {
		return fmt.Errorf("store/dynamo: transition dead letter: %w", err)
	}
	token := requestToken()
	names := map[string]string{"#st": attrLetterState, "#tok": attrLetterToken}
	values := map[string]types.AttributeValue{":to": str(string(to)), ":tok": str(token)}
	update := "SET #st = :to, #tok = :tok"
	if to == deadletter.StateReplayed {
		names["#rs"], values[":rs"] = attrLetterReplayedSeq, str(replayedSeq)
		update += ", #rs = :rs"
	}
	in := make([]string, len(from))
	for i, st := range from {
		in[i] = ":f" + strconv.Itoa(i)
		values[in[i]] = str(string(st))
	}
	sk := headSK(shardID, seq)
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       letterKey(projection, sk),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#st IN (" + strings.Join(in, ", ") + ")"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err == nil {
		return nil
	}
	if !dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("store/dynamo: transition dead letter %s/%s/%s to %s: %w", projection, shardID, seq, to, err)
	}
	// Tell ErrNotFound from ErrState, and both from this Transition's own write: an attempt that
	// was applied but whose answer was lost, retried by the SDK (the state alone cannot tell
	// whose transition it was; the token can).
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.table),
		Key:                      letterKey(projection, sk),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#st, #tok"),
		ExpressionAttributeNames: map[string]string{"#st": attrLetterState, "#tok": attrLetterToken},
	})
	if err != nil {
		return fmt.Errorf("store/dynamo: transition dead letter %s/%s/%s to %s: condition failed and reading the state failed: %w",
			projection, shardID, seq, to, err)
	}
	if ownToken(out.Item, token) {
		return nil
	}
	st, ok := out.Item[attrLetterState].(*types.AttributeValueMemberS)
	if !ok {
		return fmt.Errorf("store/dynamo: dead letter %s/%s/%s: %w", projection, shardID, seq, deadletter.ErrNotFound)
	}
	return fmt.Errorf("store/dynamo: transition dead letter %s/%s/%s to %s: %w: it is %s, not %v", projection, shardID, seq, to,
		deadletter.ErrState, st.Value, from)
}
