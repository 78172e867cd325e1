// Package dynamo implements deadletter.Store on DynamoDB, without transactions, so it runs on
// dynalite as on AWS.
//
// # Items (dead-letter table of internal/dynamotables, keys projection S / sk S)
//
//	head   sk = shard id + "#" + sequence number zero-padded to event.SeqWidth (129) digits
//	       shard S, seq S (as given), state S, attempts N, arrival_ms N, and when not empty:
//	       partition_key S, error_kind S, error S, first_failure_ms N, last_failure_ms N
//	       (ms since the Unix epoch), replayed_seq S; the data either inline (data B) or in
//	       chunks (chunks N, chunk_gen S, data_len N)
//	chunk  sk = head sk + "#chunk#" + chunk_gen + "#" + 4-digit index
//	       chunk N (the index), data B (at most ChunkBytes)
//
// The padded sequence number makes a shard's letters sort numerically in a Query; List also
// sorts what it read by shard id then sequence number, because shard id + "#" alone does not
// order shard ids that contain bytes below '#' (it is still a unique key: the padded part has a
// fixed width of digits). Any DynamoDB client reads a letter with GetItem(projection, sk).
//
// # Data larger than an item
//
// An item holds at most 400 KB (MaxItemBytes), events up to 1 MiB (the host's limit; Kinesis
// allows more). Data that does not fit inline next to the other fields is stored in chunk items
// of ChunkBytes, written before the head, under a generation id that is new for every Put (16
// random hex digits); the head names the generation, count and length. The head write switches
// a letter to its new data atomically; the chunks of the generation it replaced are deleted
// afterwards. A Put that crashes between its chunk writes and its head write leaves unreferenced
// chunks behind (garbage, never read). Fields other than Data that do not fit one item (an
// error message of hundreds of KB) fail Put with ErrTooLarge.
//
// # Writes
//
// Put: the chunk PutItems (large data only), then one UpdateItem of the head that sets every
// field, removes the fields now empty, and sets first_failure_ms only if_not_exists; when the
// stored first failure was later than the new one, a second conditional UpdateItem lowers it.
// Transition: one UpdateItem conditional on the state (state IN from); when the condition
// fails, a GetItem tells deadletter.ErrNotFound from deadletter.ErrState (dynalite returns no
// item with ReturnValuesOnConditionCheckFailure). Reads are strongly consistent.
package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// Size limits (bytes).
const (
	// MaxItemBytes is DynamoDB's item size limit (400 KB, attribute names and values).
	MaxItemBytes = 400 * 1024
	// ChunkBytes is the data held by one chunk item: the item limit less room for the keys
	// (at most 2048 + 1024 bytes) and attribute names.
	ChunkBytes = 360 * 1024
	// inlineBytes bounds a head item with inline data (the rest of MaxItemBytes is margin for
	// DynamoDB's own accounting).
	inlineBytes = MaxItemBytes - 4*1024
	// MaxProjectionBytes and MaxShardIDBytes follow from DynamoDB's key limits (partition key
	// 2048 bytes, sort key 1024: a chunk's sort key is the shard id and 158 bytes).
	MaxProjectionBytes = 2048
	MaxShardIDBytes    = 512
)

// ErrTooLarge is returned (wrapped) by Put for a letter whose fields other than Data do not fit
// in one DynamoDB item. Data of any size is stored (in chunks).
var ErrTooLarge = errors.New("deadletter/dynamo: the dead letter's fields other than its data exceed a DynamoDB item")

// Store is a deadletter.Store on DynamoDB. It is safe for concurrent use.
type Store struct {
	api   dynamotables.ItemAPI
	table string
}

var _ deadletter.Store = (*Store)(nil)

// New returns a Store on the dead-letter table of prefix (see dynamotables.NamesFor); the table
// must exist (dynamotables.CreateTables). Errors: dynamotables.ErrBadPrefix.
func New(api dynamotables.ItemAPI, prefix string) (*Store, error) {
	n, err := dynamotables.NamesFor(prefix)
	if err != nil {
		return nil, err
	}
	return &Store{api: api, table: n.DeadLetters}, nil
}

func key(projection, sk string) map[string]types.AttributeValue {
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
func (s *Store) Put(ctx context.Context, l deadletter.Letter) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("deadletter/dynamo: put: %w", err)
	}
	if err := validateKey(l.Projection, l.ShardID, l.Seq); err != nil {
		return fmt.Errorf("deadletter/dynamo: put: %w", err)
	}
	sk := headSK(l.ShardID, l.Seq)
	keys := itemSize(key(l.Projection, sk))
	head := encodeHead(l, chunkRef{})
	if keys+itemSize(head) > inlineBytes {
		// The data goes to chunks: the rest must fit the head, with the chunks' reference.
		rest := l
		rest.Data = nil
		size := keys + itemSize(encodeHead(rest, chunkRef{n: 1, gen: strings.Repeat("0", genDigits), len: len(l.Data)}))
		if size > inlineBytes {
			return fmt.Errorf("deadletter/dynamo: put %s/%s/%s: %w (%d bytes without the data, at most %d)",
				l.Projection, l.ShardID, l.Seq, ErrTooLarge, size, inlineBytes)
		}
		var err error
		if head, err = s.putChunks(ctx, l, sk); err != nil {
			return err
		}
	}
	old, err := s.writeHead(ctx, l.Projection, sk, head)
	if err != nil {
		return fmt.Errorf("deadletter/dynamo: put %s/%s/%s: %w", l.Projection, l.ShardID, l.Seq, err)
	}
	if err := s.keepEarliest(ctx, l, sk, old); err != nil {
		return fmt.Errorf("deadletter/dynamo: put %s/%s/%s: %w", l.Projection, l.ShardID, l.Seq, err)
	}
	// The chunks of the data this Put replaced are no longer referenced.
	if _, ref, err := decodeHead(l.Projection, old); err == nil && ref.n > 0 {
		if err := s.deleteChunks(ctx, l.Projection, sk, ref); err != nil {
			return fmt.Errorf("deadletter/dynamo: put %s/%s/%s: %w", l.Projection, l.ShardID, l.Seq, err)
		}
	}
	return nil
}

// putChunks writes l.Data as chunk items of a new generation and returns the head attributes
// that refer to them.
func (s *Store) putChunks(ctx context.Context, l deadletter.Letter, sk string) (map[string]types.AttributeValue, error) {
	var g [genDigits / 2]byte
	if _, err := rand.Read(g[:]); err != nil {
		return nil, fmt.Errorf("deadletter/dynamo: chunk generation: %w", err)
	}
	ref := chunkRef{gen: hex.EncodeToString(g[:]), len: len(l.Data)}
	parts := split(l.Data, ChunkBytes)
	ref.n = len(parts)
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it := key(l.Projection, chunkSK(sk, ref.gen, i))
			it[attrChunkIndex], it[attrData] = num(int64(i)), &types.AttributeValueMemberB{Value: part}
			if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: it}); err != nil {
				errs[i] = fmt.Errorf("deadletter/dynamo: put %s/%s/%s: data chunk %d of %d: %w", l.Projection, l.ShardID, l.Seq, i, ref.n, err)
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
func (s *Store) writeHead(ctx context.Context, projection, sk string, head map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
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
		if name == attrFirstFailure {
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
		Key:                       key(projection, sk),
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
func (s *Store) keepEarliest(ctx context.Context, l deadletter.Letter, sk string, old map[string]types.AttributeValue) error {
	if l.FirstFailure.IsZero() {
		return nil
	}
	v, ok := old[attrFirstFailure].(*types.AttributeValueMemberN)
	if !ok {
		return nil // absent: the head write stored l's
	}
	mine := l.FirstFailure.UnixMilli()
	if stored, err := strconv.ParseInt(v.Value, 10, 64); err == nil && stored <= mine {
		return nil
	}
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(l.Projection, sk),
		UpdateExpression:          aws.String("SET #f = :f"),
		ConditionExpression:       aws.String("attribute_not_exists(#f) OR #f > :f"),
		ExpressionAttributeNames:  map[string]string{"#f": attrFirstFailure},
		ExpressionAttributeValues: map[string]types.AttributeValue{":f": num(mine)},
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return nil // a concurrent Put stored an earlier one still
	}
	return err
}

func (s *Store) deleteChunks(ctx context.Context, projection, sk string, ref chunkRef) error {
	for i := range ref.n {
		if _, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(s.table),
			Key:       key(projection, chunkSK(sk, ref.gen, i)),
		}); err != nil {
			return fmt.Errorf("delete replaced data chunk %d of %d: %w", i, ref.n, err)
		}
	}
	return nil
}

// genDigits is the length of a chunk generation id (hex digits).
const genDigits = 16

// readAttempts bounds how often Get and List re-read a head whose chunks a concurrent Put
// replaced between the two reads.
const readAttempts = 3

// Get returns one letter. Errors: deadletter.ErrNotFound, deadletter.ErrInvalid for an invalid
// identity, DynamoDB errors, an error for an item projhost did not write.
func (s *Store) Get(ctx context.Context, projection, shardID, seq string) (deadletter.Letter, error) {
	if err := validateKey(projection, shardID, seq); err != nil {
		return deadletter.Letter{}, fmt.Errorf("deadletter/dynamo: get: %w", err)
	}
	sk := headSK(shardID, seq)
	var last error
	for range readAttempts {
		out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(s.table),
			Key:            key(projection, sk),
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return deadletter.Letter{}, fmt.Errorf("deadletter/dynamo: get %s/%s/%s: %w", projection, shardID, seq, err)
		}
		if out.Item == nil {
			return deadletter.Letter{}, fmt.Errorf("deadletter/dynamo: %s/%s/%s: %w", projection, shardID, seq, deadletter.ErrNotFound)
		}
		l, err := s.decode(ctx, projection, out.Item)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, errChunksGone) {
			return deadletter.Letter{}, fmt.Errorf("deadletter/dynamo: get %s/%s/%s: %w", projection, shardID, seq, err)
		}
		last = err
	}
	return deadletter.Letter{}, fmt.Errorf("deadletter/dynamo: get %s/%s/%s: %w", projection, shardID, seq, last)
}

// errChunksGone: the head's chunks were not all found (a concurrent Put replaced them): read the
// head again.
var errChunksGone = errors.New("data chunks replaced while reading")

// decode decodes a head item and loads its chunks.
func (s *Store) decode(ctx context.Context, projection string, it map[string]types.AttributeValue) (deadletter.Letter, error) {
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
func (s *Store) List(ctx context.Context, projection string, f deadletter.Filter) ([]deadletter.Letter, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("deadletter/dynamo: list: %w", err)
	}
	if projection == "" || len(projection) > MaxProjectionBytes {
		return nil, fmt.Errorf("deadletter/dynamo: list: %w: projection of %d bytes", deadletter.ErrInvalid, len(projection))
	}
	var letters []deadletter.Letter
	for attempt := 1; ; attempt++ {
		var err error
		letters, err = s.list(ctx, projection, f)
		if err == nil {
			break
		}
		if !errors.Is(err, errChunksGone) || attempt == readAttempts {
			return nil, fmt.Errorf("deadletter/dynamo: list %s: %w", projection, err)
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

func (s *Store) list(ctx context.Context, projection string, f deadletter.Filter) ([]deadletter.Letter, error) {
	names := map[string]string{"#pk": dynamotables.DeadLettersPK, "#ci": attrChunkIndex}
	values := map[string]types.AttributeValue{":pk": str(projection)}
	keyCond, filter := "#pk = :pk", []string{"attribute_not_exists(#ci)"}
	if f.ShardID != "" {
		keyCond += " AND begins_with(#sk, :prefix)"
		names["#sk"], names["#sh"] = dynamotables.DeadLettersSK, attrShard
		values[":prefix"], values[":sh"] = str(f.ShardID+"#"), str(f.ShardID)
		filter = append(filter, "#sh = :sh") // the prefix also matches shard ids that extend it
	}
	if f.State != "" {
		names["#st"], values[":st"] = attrState, str(string(f.State))
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
			l, err := s.decode(ctx, projection, it)
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
// deadletter.ValidateTransition), DynamoDB errors.
func (s *Store) Transition(ctx context.Context, projection, shardID, seq string, from []deadletter.State, to deadletter.State, replayedSeq string) error {
	if err := deadletter.ValidateTransition(projection, shardID, seq, from, to, replayedSeq); err != nil {
		return fmt.Errorf("deadletter/dynamo: transition: %w", err)
	}
	if err := validateKey(projection, shardID, seq); err != nil {
		return fmt.Errorf("deadletter/dynamo: transition: %w", err)
	}
	names := map[string]string{"#st": attrState}
	values := map[string]types.AttributeValue{":to": str(string(to))}
	update := "SET #st = :to"
	if to == deadletter.StateReplayed {
		names["#rs"], values[":rs"] = attrReplayedSeq, str(replayedSeq)
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
		Key:                       key(projection, sk),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#st IN (" + strings.Join(in, ", ") + ")"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err == nil {
		return nil
	}
	if !dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("deadletter/dynamo: transition %s/%s/%s to %s: %w", projection, shardID, seq, to, err)
	}
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.table),
		Key:                      key(projection, sk),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#st"),
		ExpressionAttributeNames: map[string]string{"#st": attrState},
	})
	if err != nil {
		return fmt.Errorf("deadletter/dynamo: transition %s/%s/%s to %s: condition failed and reading the state failed: %w",
			projection, shardID, seq, to, err)
	}
	st, ok := out.Item[attrState].(*types.AttributeValueMemberS)
	if !ok {
		return fmt.Errorf("deadletter/dynamo: %s/%s/%s: %w", projection, shardID, seq, deadletter.ErrNotFound)
	}
	return fmt.Errorf("deadletter/dynamo: transition %s/%s/%s to %s: %w: it is %s, not %v", projection, shardID, seq, to,
		deadletter.ErrState, st.Value, from)
}
