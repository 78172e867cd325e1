package dynamo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/source"
)

// Attribute names of a cursor item besides the keys (see the package documentation, Cursors).
const (
	attrCursorEpoch = "epoch"
	attrCursorSeq   = "seq"
	attrCursorSeqP  = "seqp"
	// Present only while stopped.
	attrCursorStopped   = "stopped"
	attrCursorStoppedMs = "stopped_ms"
)

// CursorStore is a cursorstore.Store on the cursors table (DESIGN §3; item layout and requests:
// the package documentation, Cursors). It is safe for concurrent use.
type CursorStore struct {
	api   dynamotables.ItemAPI
	table string
}

var _ cursorstore.Store = (*CursorStore)(nil)

// NewCursorStore returns a CursorStore on the cursors table of prefix (see
// Config.Prefix; "" is no prefix) through api (a *dynamodb.Client); the table must exist
// (CreateTables). Errors: ErrBadPrefix.
func NewCursorStore(api dynamotables.ItemAPI, prefix string) (*CursorStore, error) {
	n, err := dynamotables.NamesFor(prefix)
	if err != nil {
		return nil, err
	}
	return &CursorStore{api: api, table: n.Cursors}, nil
}

func (s *CursorStore) key(projection, shardID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		dynamotables.CursorsPK: str(projection),
		dynamotables.CursorsSK: str(shardID),
	}
}

// Get returns the cursor (strongly consistent read); a missing one is Seq "" Epoch 0.
func (s *CursorStore) Get(ctx context.Context, projection, shardID string) (cursorstore.Cursor, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.key(projection, shardID),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return cursorstore.Cursor{}, fmt.Errorf("store/dynamo: get cursor %q/%q: %w", projection, shardID, err)
	}
	c, err := decodeCursor(projection, shardID, out.Item)
	if err != nil {
		return cursorstore.Cursor{}, fmt.Errorf("store/dynamo: get cursor %q/%q: %w", projection, shardID, err)
	}
	return c, nil
}

// Claim raises the stored epoch to epoch (creating the cursor when missing) and returns the
// cursor. cursorstore.ErrFenced when the stored epoch is greater.
func (s *CursorStore) Claim(ctx context.Context, projection, shardID string, epoch int64) (cursorstore.Cursor, error) {
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(projection, shardID),
		UpdateExpression:          aws.String("SET #e = :e"),
		ConditionExpression:       aws.String("attribute_not_exists(#e) OR #e <= :e"),
		ExpressionAttributeNames:  map[string]string{"#e": attrCursorEpoch},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": num(epoch)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return cursorstore.Cursor{}, fmt.Errorf("%w: claim of %q/%q with epoch %d", cursorstore.ErrFenced, projection, shardID, epoch)
	}
	if err != nil {
		return cursorstore.Cursor{}, fmt.Errorf("store/dynamo: claim cursor %q/%q: %w", projection, shardID, err)
	}
	c, err := decodeCursor(projection, shardID, out.Attributes)
	if err != nil {
		return cursorstore.Cursor{}, fmt.Errorf("store/dynamo: claim cursor %q/%q: %w", projection, shardID, err)
	}
	return c, nil
}

// Save stores seq if the stored epoch equals epoch (a missing cursor has epoch 0):
// cursorstore.ErrFenced otherwise; a seq numerically below the stored one: an error wrapping
// cursorstore.ErrBackwards. Saving the stored seq again succeeds.
func (s *CursorStore) Save(ctx context.Context, projection, shardID string, epoch int64, seq string) error {
	cond := epochCondition(epoch) + " AND (attribute_not_exists(#sp) OR #sp <= :sp)"
	padded := source.PadSeq(seq)
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.key(projection, shardID),
		UpdateExpression:         aws.String("SET #e = :e, #s = :s, #sp = :sp"),
		ConditionExpression:      aws.String(cond),
		ExpressionAttributeNames: map[string]string{"#e": attrCursorEpoch, "#s": attrCursorSeq, "#sp": attrCursorSeqP},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":e":  num(epoch),
			":s":  str(seq),
			":sp": str(padded),
		},
	})
	if err == nil {
		return nil
	}
	if !dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("store/dynamo: save cursor %q/%q at %s: %w", projection, shardID, seq, err)
	}
	// Tell which condition failed. The epoch never goes down, so a mismatch seen now was a
	// mismatch at the write too; otherwise the stored seq was ahead.
	// Read back even when the caller's context was just cancelled (a lost lease cancels the
	// shard): the caller must learn ErrFenced, not "context canceled".
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	cur, gerr := s.Get(rctx, projection, shardID)
	if gerr != nil {
		return fmt.Errorf("store/dynamo: save cursor %q/%q at %s: condition failed and reading it back failed: %w",
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
func (s *CursorStore) Stop(ctx context.Context, projection, shardID string, epoch int64, reason string) error {
	if reason == "" {
		return fmt.Errorf("store/dynamo: stop cursor %q/%q: empty reason", projection, shardID)
	}
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.key(projection, shardID),
		UpdateExpression:         aws.String("SET #e = :e, #st = :st, #sm = :sm"),
		ConditionExpression:      aws.String(epochCondition(epoch)),
		ExpressionAttributeNames: map[string]string{"#e": attrCursorEpoch, "#st": attrCursorStopped, "#sm": attrCursorStoppedMs},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":e":  num(epoch),
			":st": str(reason),
			":sm": num(time.Now().UnixMilli()),
		},
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("%w: stop of %q/%q by epoch %d", cursorstore.ErrFenced, projection, shardID, epoch)
	}
	if err != nil {
		return fmt.Errorf("store/dynamo: stop cursor %q/%q: %w", projection, shardID, err)
	}
	return nil
}

// Resume clears the stopped state (not fenced). A cursor that is not stopped, or does not exist,
// is left as it is (the write is conditional on the stopped attribute, so no item is created).
func (s *CursorStore) Resume(ctx context.Context, projection, shardID string) error {
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.key(projection, shardID),
		UpdateExpression:         aws.String("REMOVE #st, #sm"),
		ConditionExpression:      aws.String("attribute_exists(#st)"),
		ExpressionAttributeNames: map[string]string{"#st": attrCursorStopped, "#sm": attrCursorStoppedMs},
	})
	if err != nil && !dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("store/dynamo: resume cursor %q/%q: %w", projection, shardID, err)
	}
	return nil
}

// decodeCursor reads the cursor item it of (projection, shardID); a nil item is the missing
// cursor. Errors: epoch or stopped_ms not an integer N.
func decodeCursor(projection, shardID string, it map[string]types.AttributeValue) (cursorstore.Cursor, error) {
	c := cursorstore.Cursor{Projection: projection, ShardID: shardID}
	if v, ok := it[attrCursorSeq].(*types.AttributeValueMemberS); ok {
		c.Seq = v.Value
	}
	if v, ok := it[attrCursorStopped].(*types.AttributeValueMemberS); ok {
		c.Stopped = v.Value
	}
	var err error
	if c.Epoch, _, err = intAttr(it, attrCursorEpoch); err != nil {
		return c, fmt.Errorf("cursor item: %w", err)
	}
	if c.StoppedMs, _, err = intAttr(it, attrCursorStoppedMs); err != nil {
		return c, fmt.Errorf("cursor item: %w", err)
	}
	return c, nil
}

// PauseSK is the sort key of a projection's pause item in the cursors table (next to its
// cursors, under the projection's partition key): a shard cannot have this id. Its attributes:
// attrPauseAll (BOOL true, present while the projection as a whole is paused) and
// attrPauseShards (SS, the shards paused one by one; absent when none).
const PauseSK = "#pause"

const (
	attrPauseAll    = "all"
	attrPauseShards = "shards"
)

// SetPaused pauses or lifts the pause of shardID ("" = the projection as a whole) with one
// UpdateItem on the pause item (SET/REMOVE all, ADD/DELETE a shard in the set): idempotent,
// not fenced, and safe to retry.
func (s *CursorStore) SetPaused(ctx context.Context, projection, shardID string, paused bool) error {
	if shardID == PauseSK {
		return fmt.Errorf("store/dynamo: %q is not a shard id (reserved for the pause item)", shardID)
	}
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table),
		Key:       s.key(projection, PauseSK),
	}
	switch {
	case shardID == "" && paused:
		in.UpdateExpression = aws.String("SET #a = :t")
		in.ExpressionAttributeNames = map[string]string{"#a": attrPauseAll}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}}
	case shardID == "":
		in.UpdateExpression = aws.String("REMOVE #a")
		in.ExpressionAttributeNames = map[string]string{"#a": attrPauseAll}
	default:
		op := "DELETE"
		if paused {
			op = "ADD"
		}
		in.UpdateExpression = aws.String(op + " #s :s")
		in.ExpressionAttributeNames = map[string]string{"#s": attrPauseShards}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":s": &types.AttributeValueMemberSS{Value: []string{shardID}}}
	}
	if _, err := s.api.UpdateItem(ctx, in); err != nil {
		return fmt.Errorf("store/dynamo: set the pause of %q shard %q to %v: %w", projection, shardID, paused, err)
	}
	return nil
}

// Pauses reads the projection's pause item (one strongly consistent GetItem).
func (s *CursorStore) Pauses(ctx context.Context, projection string) (cursorstore.Pauses, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.key(projection, PauseSK),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return cursorstore.Pauses{}, fmt.Errorf("store/dynamo: read the pauses of %q: %w", projection, err)
	}
	var p cursorstore.Pauses
	if v, ok := out.Item[attrPauseAll].(*types.AttributeValueMemberBOOL); ok {
		p.All = v.Value
	}
	if v, ok := out.Item[attrPauseShards].(*types.AttributeValueMemberSS); ok {
		p.Shards = append([]string(nil), v.Value...)
		slices.Sort(p.Shards)
	}
	return p, nil
}

// Reset stores seq ("" removes it) and raises the epoch to epoch in one conditional UpdateItem
// (cursorstore.ErrFenced when the stored epoch is greater); the stopped state is kept.
func (s *CursorStore) Reset(ctx context.Context, projection, shardID string, epoch int64, seq string) error {
	if seq != "" && !event.ValidSeq(seq) {
		return fmt.Errorf("store/dynamo: reset cursor %q/%q: sequence number %q is not a canonical decimal number", projection, shardID, seq)
	}
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(projection, shardID),
		UpdateExpression:          aws.String("SET #e = :e REMOVE #s, #sp"),
		ConditionExpression:       aws.String("attribute_not_exists(#e) OR #e <= :e"),
		ExpressionAttributeNames:  map[string]string{"#e": attrCursorEpoch, "#s": attrCursorSeq, "#sp": attrCursorSeqP},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": num(epoch)},
	}
	if seq != "" {
		in.UpdateExpression = aws.String("SET #e = :e, #s = :s, #sp = :sp")
		in.ExpressionAttributeValues[":s"] = str(seq)
		in.ExpressionAttributeValues[":sp"] = str(source.PadSeq(seq))
	}
	_, err := s.api.UpdateItem(ctx, in)
	if dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("%w: reset of %q/%q by epoch %d", cursorstore.ErrFenced, projection, shardID, epoch)
	}
	if err != nil {
		return fmt.Errorf("store/dynamo: reset cursor %q/%q to %q: %w", projection, shardID, seq, err)
	}
	return nil
}
