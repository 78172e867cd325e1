// Package dynamo implements cursorstore.Store on DynamoDB (DESIGN §3).
//
// One item per (projection, shard) in the cursors table (internal/dynamotables):
//
//	projection S (HASH), shard S (RANGE), epoch N, seq S (as saved), seqp S (seq zero-padded to
//	source.SeqWidth so that a string comparison in a condition is a numeric one), stopped S and
//	stopped_ms N (only while the shard is stopped: Cursor.Stopped, Cursor.StoppedMs)
//
// Claim is one UpdateItem conditional on epoch <= new; Save is one UpdateItem conditional on
// epoch = mine and seqp <= new. When a Save's condition fails the item is read (dynalite returns
// no item with ReturnValuesOnConditionCheckFailure) to tell ErrFenced from ErrBackwards. Stop is
// one UpdateItem conditional on epoch = mine; Resume one UpdateItem removing the stopped
// attributes, conditional on them existing (so it never creates an item). Claim and Save do not
// name the stopped attributes, so they keep them.
package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/source"
)

// Attribute names of a cursor item besides the keys.
const (
	attrEpoch = "epoch"
	attrSeq   = "seq"
	attrSeqP  = "seqp"
	// Present only while stopped.
	attrStopped   = "stopped"
	attrStoppedMs = "stopped_ms"
)

// Store is a cursorstore.Store on DynamoDB. It is safe for concurrent use.
type Store struct {
	api   dynamotables.ItemAPI
	table string
}

var _ cursorstore.Store = (*Store)(nil)

// New returns a Store on the cursors table of prefix (see dynamotables.NamesFor); the table must
// exist (dynamotables.CreateTables). Errors: dynamotables.ErrBadPrefix.
func New(api dynamotables.ItemAPI, prefix string) (*Store, error) {
	n, err := dynamotables.NamesFor(prefix)
	if err != nil {
		return nil, err
	}
	return &Store{api: api, table: n.Cursors}, nil
}

func (s *Store) key(projection, shardID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		dynamotables.CursorsPK: &types.AttributeValueMemberS{Value: projection},
		dynamotables.CursorsSK: &types.AttributeValueMemberS{Value: shardID},
	}
}

// Get returns the cursor (strongly consistent read); a missing one is Seq "" Epoch 0.
func (s *Store) Get(ctx context.Context, projection, shardID string) (cursorstore.Cursor, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.key(projection, shardID),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return cursorstore.Cursor{}, fmt.Errorf("cursorstore/dynamo: get cursor %q/%q: %w", projection, shardID, err)
	}
	c, err := decode(projection, shardID, out.Item)
	if err != nil {
		return cursorstore.Cursor{}, fmt.Errorf("cursorstore/dynamo: get cursor %q/%q: %w", projection, shardID, err)
	}
	return c, nil
}

// Claim raises the stored epoch to epoch (creating the cursor when missing) and returns the
// cursor. cursorstore.ErrFenced when the stored epoch is greater.
func (s *Store) Claim(ctx context.Context, projection, shardID string, epoch int64) (cursorstore.Cursor, error) {
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(projection, shardID),
		UpdateExpression:          aws.String("SET #e = :e"),
		ConditionExpression:       aws.String("attribute_not_exists(#e) OR #e <= :e"),
		ExpressionAttributeNames:  map[string]string{"#e": attrEpoch},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": num(epoch)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return cursorstore.Cursor{}, fmt.Errorf("%w: claim of %q/%q with epoch %d", cursorstore.ErrFenced, projection, shardID, epoch)
	}
	if err != nil {
		return cursorstore.Cursor{}, fmt.Errorf("cursorstore/dynamo: claim cursor %q/%q: %w", projection, shardID, err)
	}
	c, err := decode(projection, shardID, out.Attributes)
	if err != nil {
		return cursorstore.Cursor{}, fmt.Errorf("cursorstore/dynamo: claim cursor %q/%q: %w", projection, shardID, err)
	}
	return c, nil
}

// Save stores seq if the stored epoch equals epoch (a missing cursor has epoch 0):
// cursorstore.ErrFenced otherwise; a seq numerically below the stored one: an error wrapping
// cursorstore.ErrBackwards. Saving the stored seq again succeeds.
func (s *Store) Save(ctx context.Context, projection, shardID string, epoch int64, seq string) error {
	cond := epochCondition(epoch) + " AND (attribute_not_exists(#sp) OR #sp <= :sp)"
	padded := source.PadSeq(seq)
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.key(projection, shardID),
		UpdateExpression:         aws.String("SET #e = :e, #s = :s, #sp = :sp"),
		ConditionExpression:      aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#e": attrEpoch, "#s": attrSeq, "#sp": attrSeqP},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":e":  num(epoch),
			":s":  &types.AttributeValueMemberS{Value: seq},
			":sp": &types.AttributeValueMemberS{Value: padded},
		},
	})
	if err == nil {
		return nil
	}
	if !dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("cursorstore/dynamo: save cursor %q/%q at %s: %w", projection, shardID, seq, err)
	}
	// Tell which condition failed. The epoch never goes down, so a mismatch seen now was a
	// mismatch at the write too; otherwise the stored seq was ahead.
	// Read back even when the caller's context was just cancelled (a lost lease cancels the
	// shard): the caller must learn ErrFenced, not "context canceled".
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	cur, gerr := s.Get(rctx, projection, shardID)
	if gerr != nil {
		return fmt.Errorf("cursorstore/dynamo: save cursor %q/%q at %s: condition failed and reading it back failed: %w",
			projection, shardID, seq, gerr)
	}
	if cur.Epoch != epoch {
		return fmt.Errorf("%w: save of %q/%q by epoch %d (stored epoch %d)", cursorstore.ErrFenced, projection, shardID, epoch, cur.Epoch)
	}
	return fmt.Errorf("%w: %q/%q is at %s, save of %s refused", cursorstore.ErrBackwards, projection, shardID, cur.Seq, seq)
}

// epochCondition is the condition "the stored epoch is epoch" (a missing item has epoch 0), on
// the attribute named #e and the value :e.
func epochCondition(epoch int64) string {
	if epoch == 0 {
		return "(attribute_not_exists(#e) OR #e = :e)"
	}
	return "#e = :e"
}

// Stop records reason as the cursor's stopped state with the current time if the stored epoch
// equals epoch (a missing cursor has epoch 0; Stop with epoch 0 then creates it):
// cursorstore.ErrFenced otherwise. Seq is not changed. An empty reason is an error. Stopping a
// stopped cursor replaces its reason and time.
func (s *Store) Stop(ctx context.Context, projection, shardID string, epoch int64, reason string) error {
	if reason == "" {
		return fmt.Errorf("cursorstore/dynamo: stop cursor %q/%q: empty reason", projection, shardID)
	}
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.key(projection, shardID),
		UpdateExpression:         aws.String("SET #e = :e, #st = :st, #sm = :sm"),
		ConditionExpression:      aws.String(epochCondition(epoch)),
		ExpressionAttributeNames: map[string]string{"#e": attrEpoch, "#st": attrStopped, "#sm": attrStoppedMs},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":e":  num(epoch),
			":st": &types.AttributeValueMemberS{Value: reason},
			":sm": num(time.Now().UnixMilli()),
		},
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("%w: stop of %q/%q by epoch %d", cursorstore.ErrFenced, projection, shardID, epoch)
	}
	if err != nil {
		return fmt.Errorf("cursorstore/dynamo: stop cursor %q/%q: %w", projection, shardID, err)
	}
	return nil
}

// Resume clears the stopped state (not fenced). A cursor that is not stopped, or does not exist,
// is left as it is (the write is conditional on the stopped attribute, so no item is created).
func (s *Store) Resume(ctx context.Context, projection, shardID string) error {
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.key(projection, shardID),
		UpdateExpression:         aws.String("REMOVE #st, #sm"),
		ConditionExpression:      aws.String("attribute_exists(#st)"),
		ExpressionAttributeNames: map[string]string{"#st": attrStopped, "#sm": attrStoppedMs},
	})
	if err != nil && !dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("cursorstore/dynamo: resume cursor %q/%q: %w", projection, shardID, err)
	}
	return nil
}

func num(n int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func decode(projection, shardID string, it map[string]types.AttributeValue) (cursorstore.Cursor, error) {
	c := cursorstore.Cursor{Projection: projection, ShardID: shardID}
	if v, ok := it[attrSeq].(*types.AttributeValueMemberS); ok {
		c.Seq = v.Value
	}
	if v, ok := it[attrStopped].(*types.AttributeValueMemberS); ok {
		c.Stopped = v.Value
	}
	var err error
	if c.Epoch, err = intAttr(it, attrEpoch); err != nil {
		return c, err
	}
	if c.StoppedMs, err = intAttr(it, attrStoppedMs); err != nil {
		return c, err
	}
	return c, nil
}

// intAttr returns the number attribute name of it, 0 when absent.
func intAttr(it map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cursor item %s %q: %w", name, v.Value, err)
	}
	return n, nil
}
