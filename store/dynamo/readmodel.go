package dynamo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/event"
	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/source"
)

// Attribute names and fixed sort keys of read-model items (see the package documentation, Read
// models).
const (
	AttrDoc          = "doc"
	SeqAttrPrefix    = "seq:"
	EpochAttrPref    = "epoch:"
	ReplayAttrPrefix = "r:" // see ReplayAttr
	attrFenceEpoch   = "epoch"
	attrFenceHi      = "hi"
	attrFenceSeq     = "seq"
	attrFenceGen     = "gen" // the shard's reset generation (ResetWrites); absent = 0
	attrCols         = "cols"
	fenceSKPrefix    = "fence#"
	registrySK       = "collections"
)

// ErrBadReplay is returned (wrapped) by Apply for a readmodel.Write.Replay that is not a
// canonical sequence number (event.ValidSeq); nothing is written then.
var ErrBadReplay = errors.New("store/dynamo: replay sequence number is not a canonical decimal number")

// DefaultMaxInFlight is the default bound on concurrent item writes of one Apply.
const DefaultMaxInFlight = 16

// ReadModelOption configures NewReadModel.
type ReadModelOption func(*readModelOptions)

type readModelOptions struct{ maxInFlight int }

// WithMaxInFlight bounds the concurrent item writes of one Apply (default DefaultMaxInFlight;
// values < 1 mean 1).
func WithMaxInFlight(n int) ReadModelOption {
	return func(o *readModelOptions) { o.maxInFlight = max(n, 1) }
}

// ReadModel is a readmodel.Store and readmodel.WriteClaimer on the read model table, with an
// exactly-once effect for per-key aggregates and without transactions (DESIGN §3; items,
// protocol and limits: the package documentation, Read models). It is safe for concurrent use;
// Applies of different shards run concurrently, Applies of one shard are expected one at a time
// (one owner).
type ReadModel struct {
	api         dynamotables.ItemAPI
	table       string
	maxInFlight int
	registered  sync.Map // projection+"#"+collection -> struct{}: already in the registry
}

var (
	_ readmodel.Store        = (*ReadModel)(nil)
	_ readmodel.WriteClaimer = (*ReadModel)(nil)
	_ readmodel.Resetter     = (*ReadModel)(nil)
)

// NewReadModel returns a ReadModel on the read model table of prefix (see
// Config.Prefix; "" is no prefix) through api (a *dynamodb.Client); the table must exist
// (CreateTables). Errors: ErrBadPrefix.
func NewReadModel(api dynamotables.ItemAPI, prefix string, opts ...ReadModelOption) (*ReadModel, error) {
	n, err := dynamotables.NamesFor(prefix)
	if err != nil {
		return nil, err
	}
	o := readModelOptions{maxInFlight: DefaultMaxInFlight}
	for _, fn := range opts {
		fn(&o)
	}
	return &ReadModel{api: api, table: n.ReadModel, maxInFlight: o.maxInFlight}, nil
}

// DocPK returns the partition key value of the documents of a collection.
func DocPK(projection, collection string) string { return projection + "#" + collection }

func metaPK(projection string) string { return projection + "#" }

// readModelKey is the key of the read-model item (pk, sk).
func readModelKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		dynamotables.ReadModelPK: str(pk),
		dynamotables.ReadModelSK: str(sk),
	}
}

// Get returns the document at collection/key (strongly consistent read) in canonical JSON (see
// AttributeValueToDoc: keys sorted, numbers normalised), or found=false when it is missing or
// deleted. A key the table cannot hold (over DynamoDB's key size limits, which CheckMutation
// refuses to write) has no document: found=false, without a request (DynamoDB would answer
// a ValidationException).
func (s *ReadModel) Get(ctx context.Context, projection, collection, k string) ([]byte, bool, error) {
	if len(DocPK(projection, collection)) > maxDocPKBytes || len(k) > maxDocSKBytes {
		return nil, false, nil
	}
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.table),
		Key:                      readModelKey(DocPK(projection, collection), k),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#d"),
		ExpressionAttributeNames: map[string]string{"#d": AttrDoc},
	})
	if err != nil {
		return nil, false, fmt.Errorf("store/dynamo: get document %s/%s of %q: %w", collection, k, projection, err)
	}
	av, ok := out.Item[AttrDoc]
	if !ok {
		return nil, false, nil
	}
	doc, err := AttributeValueToDoc(av)
	if err != nil {
		return nil, false, fmt.Errorf("store/dynamo: get document %s/%s of %q: %w", collection, k, projection, err)
	}
	return doc, true, nil
}

// Scan returns the documents of a collection ordered by key bytes; collection "" returns every
// collection of the projection (from the registry item) ordered by collection, then key.
// Tombstones are skipped. Reads are strongly consistent and paged (1 MB per Query page).
func (s *ReadModel) Scan(ctx context.Context, projection, collection string) ([]readmodel.Doc, error) {
	colls := []string{collection}
	if collection == "" {
		var err error
		if colls, err = s.collections(ctx, projection); err != nil {
			return nil, err
		}
	}
	var docs []readmodel.Doc
	for _, c := range colls {
		p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
			TableName:                 aws.String(s.table),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			FilterExpression:          aws.String("attribute_exists(#d)"),
			ProjectionExpression:      aws.String("#sk, #d"),
			ExpressionAttributeNames:  map[string]string{"#pk": dynamotables.ReadModelPK, "#sk": dynamotables.ReadModelSK, "#d": AttrDoc},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(DocPK(projection, c))},
			ConsistentRead:            aws.Bool(true),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("store/dynamo: scan collection %q of %q: %w", c, projection, err)
			}
			for _, it := range page.Items {
				sk, _ := it[dynamotables.ReadModelSK].(*types.AttributeValueMemberS)
				av, ok := it[AttrDoc]
				if sk == nil || !ok {
					continue
				}
				doc, err := AttributeValueToDoc(av)
				if err != nil {
					return nil, fmt.Errorf("store/dynamo: scan collection %q of %q: key %q: %w", c, projection, sk.Value, err)
				}
				docs = append(docs, readmodel.Doc{Collection: c, Key: sk.Value, Doc: doc})
			}
		}
	}
	return docs, nil
}

func (s *ReadModel) collections(ctx context.Context, projection string) ([]string, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            readModelKey(metaPK(projection), registrySK),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("store/dynamo: read the collections of %q: %w", projection, err)
	}
	ss, _ := out.Item[attrCols].(*types.AttributeValueMemberSS)
	if ss == nil {
		return nil, nil
	}
	cols := slices.Clone(ss.Value)
	slices.Sort(cols)
	return cols, nil
}

// HighWater returns the highest sequence number (as given to Apply, unpadded) that an Apply of
// (projection, shardID) began with, and the highest epoch seen; "" and 0 when none. Items of the
// shard carry effects up to at most this sequence number.
func (s *ReadModel) HighWater(ctx context.Context, projection, shardID string) (seq string, epoch int64, err error) {
	f, err := s.readFence(ctx, projection, shardID)
	return f.seq, f.epoch, err
}

// ClaimWrites implements readmodel.WriteClaimer: it raises the shard's write fence to epoch
// (one conditional UpdateItem; readmodel.ErrFenced when a newer epoch holds it), so that from
// then on no Apply of an older owner can begin, and returns the highest sequence number an Apply
// of the shard began with ("" when none). A new owner calls it before it reads anything.
func (s *ReadModel) ClaimWrites(ctx context.Context, projection, shardID string, epoch int64) (string, error) {
	fence, err := s.raiseEpoch(ctx, projection, shardID, epoch)
	if err != nil {
		return "", err
	}
	if v, ok := fence[attrFenceSeq].(*types.AttributeValueMemberS); ok {
		return v.Value, nil
	}
	return "", nil
}

// raiseEpoch raises the epoch of the shard's fence item to epoch (one UpdateItem conditional on
// the stored epoch <= epoch: readmodel.ErrFenced otherwise) and returns the item as it is now.
func (s *ReadModel) raiseEpoch(ctx context.Context, projection, shardID string, epoch int64) (map[string]types.AttributeValue, error) {
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       readModelKey(metaPK(projection), fenceSKPrefix+shardID),
		UpdateExpression:          aws.String("SET #e = :e"),
		ConditionExpression:       aws.String("attribute_not_exists(#e) OR #e <= :e"),
		ExpressionAttributeNames:  map[string]string{"#e": attrFenceEpoch},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": num(epoch)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return nil, fmt.Errorf("%w: %q/%q has an epoch above %d", readmodel.ErrFenced, projection, shardID, epoch)
	}
	if err != nil {
		return nil, fmt.Errorf("store/dynamo: raise the write fence of %q/%q to epoch %d: %w", projection, shardID, epoch, err)
	}
	return out.Attributes, nil
}

type fence struct {
	epoch, gen int64
	hi, seq    string
}

func (s *ReadModel) readFence(ctx context.Context, projection, shardID string) (fence, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            readModelKey(metaPK(projection), fenceSKPrefix+shardID),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fence{}, fmt.Errorf("store/dynamo: read the write fence of %q/%q: %w", projection, shardID, err)
	}
	var f fence
	if f.epoch, _, err = intAttr(out.Item, attrFenceEpoch); err != nil {
		return fence{}, fmt.Errorf("store/dynamo: write fence of %q/%q: %w", projection, shardID, err)
	}
	if f.gen, _, err = intAttr(out.Item, attrFenceGen); err != nil {
		return fence{}, fmt.Errorf("store/dynamo: write fence of %q/%q: %w", projection, shardID, err)
	}
	if v, ok := out.Item[attrFenceHi].(*types.AttributeValueMemberS); ok {
		f.hi = v.Value
	}
	if v, ok := out.Item[attrFenceSeq].(*types.AttributeValueMemberS); ok {
		f.seq = v.Value
	}
	return f, nil
}

// pending is one item write of an Apply.
type pending struct {
	collection, key string
	doc             *types.AttributeValueMemberM // nil: delete
}

// Apply applies w (see the package documentation, Read models, for the protocol). Errors:
// readmodel.ErrFenced (the shard has a newer epoch); ErrBadDocument for a document breaking the
// document rule (nothing is written then); a *readmodel.RejectedError (wrapping
// readmodel.ErrRejected) naming the document of an item DynamoDB refused as invalid (a
// ValidationException: retrying cannot help; other items may be written); DynamoDB errors after
// the SDK's retries (some items may be written: replaying w completes it). A write the SDK
// retried after an attempt that was applied (its answer lost) counts as done (the package
// documentation, Read models: Apply).
func (s *ReadModel) Apply(ctx context.Context, w readmodel.Write) error {
	if w.Replay != "" && !event.ValidSeq(w.Replay) {
		return fmt.Errorf("store/dynamo: apply %q/%q at %s: replay of %q: %w",
			w.Projection, w.ShardID, w.Seq, w.Replay, ErrBadReplay)
	}
	writes, err := coalesce(w.Mutations)
	if err != nil {
		return fmt.Errorf("store/dynamo: apply %q/%q at %s: %w", w.Projection, w.ShardID, w.Seq, err)
	}
	var m marker
	if w.Replay != "" {
		// A replay is fenced by its epoch only: the shard's high-water mark stays as it is.
		m = replayMarker(w)
		_, err = s.raiseEpoch(ctx, w.Projection, w.ShardID, w.Epoch)
	} else {
		var gen int64
		gen, err = s.raiseFence(ctx, w, source.PadSeq(w.Seq))
		m = seqMarker(w, gen)
	}
	if err != nil {
		return err
	}
	if len(writes) == 0 {
		return nil
	}
	if err := s.register(ctx, w.Projection, writes); err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, s.maxInFlight)
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		// ErrFenced wins over other errors: the caller must stop the shard.
		if firstErr == nil || (errors.Is(err, readmodel.ErrFenced) && !errors.Is(firstErr, readmodel.ErrFenced)) {
			firstErr = err
		}
		cancel(err)
	}
loop:
	for i := range writes {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break loop
		}
		wg.Add(1)
		go func(p *pending) {
			defer func() { <-sem; wg.Done() }()
			if err := s.writeItem(ctx, w, m, p); err != nil {
				fail(err)
			}
		}(&writes[i])
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("store/dynamo: apply %q/%q at %s: %w", w.Projection, w.ShardID, w.Seq, err)
	}
	return nil
}

// coalesce keeps the last mutation of every collection/key, in first-appearance order, and
// converts documents up front so that a bad document fails the Apply before any write.
// Key size limits of the read-model table (DynamoDB: a partition key of at most 2048 bytes, a
// sort key of at most 1024).
const (
	maxDocPKBytes = 2048
	maxDocSKBytes = 1024
)

// CheckMutation reports, with an error wrapping ErrBadDocument, a mutation of projection that
// the read model cannot store: a document breaking the document rule (event.CheckDoc, what
// DocToAttributeValue refuses), or a key over DynamoDB's key size limits.
// store.Stores.CheckMutation of Open.
func CheckMutation(projection string, m readmodel.Mutation) error {
	if pk := DocPK(projection, m.Collection); len(pk) > maxDocPKBytes {
		return fmt.Errorf("%w: projection and collection %q take %d bytes, DynamoDB's partition key limit is %d", ErrBadDocument, m.Collection, len(pk), maxDocPKBytes)
	}
	if len(m.Key) > maxDocSKBytes {
		return fmt.Errorf("%w: key of %d bytes, DynamoDB's sort key limit is %d", ErrBadDocument, len(m.Key), maxDocSKBytes)
	}
	if m.Doc != nil {
		if err := event.CheckDoc(m.Doc); err != nil {
			return fmt.Errorf("%w: %w", ErrBadDocument, err)
		}
	}
	return nil
}

func coalesce(ms []readmodel.Mutation) ([]pending, error) {
	idx := make(map[[2]string]int, len(ms))
	out := make([]pending, 0, len(ms))
	for _, m := range ms {
		var doc *types.AttributeValueMemberM
		if m.Doc != nil {
			var err error
			if doc, err = DocToAttributeValue(m.Doc); err != nil {
				return nil, fmt.Errorf("%s/%s: %w", m.Collection, m.Key, err)
			}
		}
		k := [2]string{m.Collection, m.Key}
		if i, ok := idx[k]; ok {
			out[i].doc = doc
			continue
		}
		idx[k] = len(out)
		out = append(out, pending{collection: m.Collection, key: m.Key, doc: doc})
	}
	return out, nil
}

func (s *ReadModel) raiseFence(ctx context.Context, w readmodel.Write, padded string) (int64, error) {
	fkey := readModelKey(metaPK(w.Projection), fenceSKPrefix+w.ShardID)
	names := map[string]string{"#e": attrFenceEpoch, "#h": attrFenceHi, "#s": attrFenceSeq}
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       fkey,
		UpdateExpression:          aws.String("SET #e = :e, #h = :h, #s = :s"),
		ConditionExpression:       aws.String("(attribute_not_exists(#e) OR #e <= :e) AND (attribute_not_exists(#h) OR #h <= :h)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": num(w.Epoch), ":h": str(padded), ":s": str(w.Seq)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err == nil {
		gen, _, gerr := intAttr(out.Attributes, attrFenceGen)
		if gerr != nil {
			return 0, fmt.Errorf("store/dynamo: write fence of %q/%q: %w", w.Projection, w.ShardID, gerr)
		}
		return gen, nil
	}
	if !dynamotables.IsConditionalCheckFailed(err) {
		return 0, fmt.Errorf("store/dynamo: raise the write fence of %q/%q: %w", w.Projection, w.ShardID, err)
	}
	// Either a newer epoch (fenced) or a replay below the high-water mark (keep hi, but still
	// raise the epoch so that older owners are fenced from now on).
	f, err := s.readFence(ctx, w.Projection, w.ShardID)
	if err != nil {
		return 0, err
	}
	if f.epoch > w.Epoch {
		return 0, fmt.Errorf("%w: %q/%q has epoch %d, write by epoch %d refused", readmodel.ErrFenced, w.Projection, w.ShardID, f.epoch, w.Epoch)
	}
	if f.epoch == w.Epoch {
		return f.gen, nil
	}
	fa, err := s.raiseEpoch(ctx, w.Projection, w.ShardID, w.Epoch)
	if err != nil {
		return 0, err
	}
	gen, _, err := intAttr(fa, attrFenceGen)
	return gen, err
}

// register adds the collections of writes to the projection's registry item, once per process.
func (s *ReadModel) register(ctx context.Context, projection string, writes []pending) error {
	var add []string
	for _, p := range writes {
		if _, ok := s.registered.Load(DocPK(projection, p.collection)); !ok && !slices.Contains(add, p.collection) {
			add = append(add, p.collection)
		}
	}
	if len(add) == 0 {
		return nil
	}
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       readModelKey(metaPK(projection), registrySK),
		UpdateExpression:          aws.String("ADD #c :c"),
		ExpressionAttributeNames:  map[string]string{"#c": attrCols},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberSS{Value: add}},
	})
	if err != nil {
		return fmt.Errorf("store/dynamo: register collections %v of %q: %w", add, projection, err)
	}
	for _, c := range add {
		s.registered.Store(DocPK(projection, c), struct{}{})
	}
	return nil
}

// marker is the per-item attribute that makes an item write idempotent: the write is
// conditional on cond (over #m and :m) and sets attribute name to value.
type marker struct {
	name  string
	value types.AttributeValue
	cond  string
	// covers reports whether a stored marker value (nil: absent) says the item already holds
	// this write's effect.
	covers func(stored types.AttributeValue) bool
}

// seqMarker: the shard's sequence-number marker, raised by every write of the shard. A stored
// marker at or past this write's covers it.
//
// Its value is the padded sequence number in reset generation 0, and "g" + the generation in 20
// digits + ":" + the padded sequence number after resets (ResetWrites): every marker of a
// later generation compares above every marker of an earlier one ('g' is above the digits), so
// the events after a reset cursor are applied again, whatever an item's marker of the earlier
// generation says.
func seqMarker(w readmodel.Write, gen int64) marker {
	padded := markerValue(gen, w.Seq)
	return marker{name: SeqAttrPrefix + w.ShardID, value: str(padded), cond: "(attribute_not_exists(#m) OR #m < :m)",
		covers: func(v types.AttributeValue) bool {
			s, ok := v.(*types.AttributeValueMemberS)
			return ok && s.Value >= padded
		}}
}

// markerValue is the value of a sequence-number marker of seq in reset generation gen.
func markerValue(gen int64, seq string) string {
	if gen == 0 {
		return source.PadSeq(seq)
	}
	return fmt.Sprintf("g%020d:%s", gen, source.PadSeq(seq))
}

// ResetWrites raises the shard's write fence to epoch (readmodel.ErrFenced when it holds a
// newer one), starts a new reset generation of its sequence-number markers and forgets the
// interrupted write's high-water mark, in one conditional UpdateItem of the fence item (SET
// epoch, ADD gen 1, REMOVE hi, seq). Writes of the new generation are applied over any marker
// of an older one (seqMarker); an Apply of an older epoch that passed the fence before is
// refused at every item the new owner wrote (epoch:S), and the items it writes elsewhere carry
// markers of the older generation, which the replay overwrites. Retried after an applied
// attempt, it starts one more generation: harmless (only the order of generations counts).
func (s *ReadModel) ResetWrites(ctx context.Context, projection, shardID string, epoch int64) error {
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       readModelKey(metaPK(projection), fenceSKPrefix+shardID),
		UpdateExpression:          aws.String("SET #e = :e REMOVE #h, #s ADD #g :one"),
		ConditionExpression:       aws.String("attribute_not_exists(#e) OR #e <= :e"),
		ExpressionAttributeNames:  map[string]string{"#e": attrFenceEpoch, "#g": attrFenceGen, "#h": attrFenceHi, "#s": attrFenceSeq},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": num(epoch), ":one": num(1)},
	})
	if dynamotables.IsConditionalCheckFailed(err) {
		return fmt.Errorf("%w: %q/%q has an epoch above %d", readmodel.ErrFenced, projection, shardID, epoch)
	}
	if err != nil {
		return fmt.Errorf("store/dynamo: reset the writes of %q/%q at epoch %d: %w", projection, shardID, epoch, err)
	}
	return nil
}

// ClearDocs deletes every document item of the projection (tombstones too): a Query of each
// registered collection's keys and a DeleteItem per item (up to MaxInFlight at a time). The fence and registry items
// stay (live workers remember the registered collections).
func (s *ReadModel) ClearDocs(ctx context.Context, projection string) error {
	cols, err := s.collections(ctx, projection)
	if err != nil {
		return err
	}
	for _, c := range cols {
		p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
			TableName:                 aws.String(s.table),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ProjectionExpression:      aws.String("#pk, #sk"),
			ExpressionAttributeNames:  map[string]string{"#pk": dynamotables.ReadModelPK, "#sk": dynamotables.ReadModelSK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(DocPK(projection, c))},
			ConsistentRead:            aws.Bool(true),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("store/dynamo: clear collection %q of %q: %w", c, projection, err)
			}
			if err := s.deleteItems(ctx, page.Items); err != nil {
				return fmt.Errorf("store/dynamo: clear collection %q of %q: %w", c, projection, err)
			}
		}
	}
	return nil
}

// deleteItems deletes the items of keys with DeleteItem, up to maxInFlight at a time.
func (s *ReadModel) deleteItems(ctx context.Context, keys []map[string]types.AttributeValue) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, s.maxInFlight)
	)
	for _, k := range keys {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: k})
			if err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// replayMarker: the marker of one dead-letter replay, set once (to the replaying epoch). Any
// stored value covers it: the replay's effect is on the item.
func replayMarker(w readmodel.Write) marker {
	return marker{name: ReplayAttr(w.ShardID, w.Replay), value: num(w.Epoch), cond: "attribute_not_exists(#m)",
		covers: func(v types.AttributeValue) bool { return v != nil }}
}

// ReplayAttr returns the name of the item attribute that marks an item as written by the replay
// of the dead-lettered event seq of shard shardID: "r:" + shard id + ":" + seq zero-padded to
// source.SeqWidth digits. Its value is the replaying writer's epoch (N).
func ReplayAttr(shardID, seq string) string {
	return ReplayAttrPrefix + shardID + ":" + source.PadSeq(seq)
}

// failedOn returns the item (at key k) whose condition failed with ccf: the one in the error
// when the server returned it (ReturnValuesOnConditionCheckFailure), else its epoch attribute
// epochAttr and marker m read back (strongly consistent).
func (s *ReadModel) failedOn(ctx context.Context, ccf error, k map[string]types.AttributeValue, epochAttr string, m marker) (map[string]types.AttributeValue, error) {
	var e *types.ConditionalCheckFailedException
	if errors.As(ccf, &e) && e.Item != nil {
		return e.Item, nil
	}
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:                aws.String(s.table),
		Key:                      k,
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#e, #m"),
		ExpressionAttributeNames: map[string]string{"#e": epochAttr, "#m": m.name},
	})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

func (s *ReadModel) writeItem(ctx context.Context, w readmodel.Write, m marker, p *pending) error {
	names := map[string]string{"#m": m.name, "#e": EpochAttrPref + w.ShardID, "#d": AttrDoc}
	values := map[string]types.AttributeValue{":m": m.value, ":e": num(w.Epoch)}
	update := "SET #m = :m, #e = :e REMOVE #d"
	if p.doc != nil {
		update = "SET #m = :m, #e = :e, #d = :d"
		values[":d"] = p.doc
	}
	k := readModelKey(DocPK(w.Projection, p.collection), p.key)
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       k,
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(m.cond + " AND (attribute_not_exists(#e) OR #e <= :e)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		// DynamoDB and DynamoDB Local return the item a condition failed on (saving the
		// read-back below); dynalite returns none.
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return nil
	}
	if !dynamotables.IsConditionalCheckFailed(err) {
		err = fmt.Errorf("store/dynamo: write document %s/%s of %q/%q at %s: %w", p.collection, p.key, w.Projection, w.ShardID, w.Seq, err)
		if dynamotables.IsInvalidRequest(err) {
			err = &readmodel.RejectedError{Collection: p.collection, Key: p.key, Err: err}
		}
		return err
	}
	// The condition failed: a newer epoch of this shard wrote the item (fenced), or the item
	// already holds this write's effect (an earlier Apply of the batch, or this request's own
	// attempt, applied but its answer lost, which the SDK retried). Read it back to tell which:
	// the epoch and the markers only grow, so what is read now decides. The document is not
	// compared: the markers say which batch (or replay) of which epoch the item holds, and the
	// first write of a batch is the one kept (a replayed batch changes nothing).
	item, err := s.failedOn(ctx, err, k, EpochAttrPref+w.ShardID, m)
	if err != nil {
		return fmt.Errorf("store/dynamo: read back document %s/%s of %q after a failed condition: %w", p.collection, p.key, w.Projection, err)
	}
	if e, _, err := intAttr(item, EpochAttrPref+w.ShardID); err == nil && e > w.Epoch {
		return fmt.Errorf("%w: %s/%s of %q was written by epoch %d of %q, write by epoch %d refused",
			readmodel.ErrFenced, p.collection, p.key, w.Projection, e, w.ShardID, w.Epoch)
	}
	if !m.covers(item[m.name]) {
		return fmt.Errorf("store/dynamo: write document %s/%s of %q/%q at %s: the condition failed, but the item holds neither a newer epoch nor this write's marker %s (changed by another client?); apply again",
			p.collection, p.key, w.Projection, w.ShardID, w.Seq, m.name)
	}
	return nil
}
