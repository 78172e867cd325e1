package dynamo_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/internal/faultproxy"
	"github.com/projhost/projhost/store/dynamo"
)

// Put writes the head unconditionally (its retry re-applies it, and its "old" item is then
// Put's own head) and Transition conditionally on the state (its retry fails once applied):
// the head carries the request token of the Put or Transition that wrote it last, so that
// both can tell their own write. These tests prove each write per fault kind.

type dlFaultEnv struct {
	*faultEnv
	proxied, direct *dynamo.DeadLetters
}

func newDLFaultEnv(t *testing.T) *dlFaultEnv {
	fe, proxied, direct := openBoth(t, dynamo.NewDeadLetters)
	return &dlFaultEnv{faultEnv: fe, proxied: proxied, direct: direct}
}

var ambT0 = time.UnixMilli(1_767_000_000_000).UTC()

// letterOf is a failed letter of projection with data of size bytes, first failing at ff.
func letterOf(projection string, size int, ff time.Time) deadletter.Letter {
	return deadletter.Letter{
		Projection: projection, ShardID: ambShard, Seq: "42", PartitionKey: "pk-1", ArrivalMs: 1_766_999_999_000,
		Data:      bytes.Repeat([]byte{byte(len(projection))}, size),
		ErrorKind: "fail", Error: "handler failed", Attempts: 1,
		FirstFailure: ff, LastFailure: ff.Add(time.Second), State: deadletter.StateFailed,
	}
}

func headKey(projection string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"projection": avS(projection), "sk": avS(ambShard + "#" + strings.Repeat("0", 127) + "42")}
}

// requireLetter fails t unless the stored letter is want, read directly, and no request token
// shows in it.
func (de *dlFaultEnv) requireLetter(t *testing.T, want deadletter.Letter) {
	t.Helper()
	got, err := de.direct.Get(ctxT(t), want.Projection, want.ShardID, want.Seq)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(want.Data) == 0 {
		want.Data = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("letter:\n got  %+v\n want %+v", briefLetter(got), briefLetter(want))
	}
}

func briefLetter(l deadletter.Letter) deadletter.Letter {
	l.Data = []byte(strings.Repeat("x", len(l.Data))) // the length, not the bytes
	return l
}

// chunkGens returns the number of chunk items of projection's letter per generation.
func (de *dlFaultEnv) chunkGens(t *testing.T, projection string) map[string]int {
	t.Helper()
	gens := map[string]int{}
	pg := dynamodb.NewQueryPaginator(de.client, &dynamodb.QueryInput{
		TableName:                 aws.String(de.names.DeadLetters),
		KeyConditionExpression:    aws.String("#p = :p"),
		ProjectionExpression:      aws.String("sk"),
		ExpressionAttributeNames:  map[string]string{"#p": "projection"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(projection)},
		ConsistentRead:            aws.Bool(true),
	})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if _, rest, ok := strings.Cut(it["sk"].(*types.AttributeValueMemberS).Value, "#chunk#"); ok {
				gen, _, _ := strings.Cut(rest, "#")
				gens[gen]++
			}
		}
	}
	return gens
}

func (de *dlFaultEnv) headGen(t *testing.T, projection string) string {
	t.Helper()
	g, _ := de.item(t, de.names.DeadLetters, headKey(projection))["chunk_gen"].(*types.AttributeValueMemberS)
	if g == nil {
		return ""
	}
	return g.Value
}

func (de *dlFaultEnv) putDirect(t *testing.T, l deadletter.Letter) {
	t.Helper()
	if err := de.direct.Put(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
}

func TestAmbiguousDeadLettersPut(t *testing.T) {
	de := newDLFaultEnv(t)
	const big = 2*dynamo.ChunkBytes + 1000 // three chunks
	cases := []struct {
		name string
		// stored: the letter stored before (size < 0: none); size: the Put's data; op and
		// part select the faulted write.
		stored, size int
		storedFF     time.Duration // the stored letter's first failure, after ambT0
		op, part     string
	}{
		{"inline new/head", -1, 100, 0, "UpdateItem", ""},
		{"inline over inline, later first failure/head", 50, 100, time.Minute, "UpdateItem", "UpdateExpression"},
		{"inline over inline, later first failure/keep earliest", 50, 100, time.Minute, "UpdateItem", "ConditionExpression"},
		{"inline over chunked/head", big, 100, 0, "UpdateItem", ""},
		{"inline over chunked/chunk delete", big, 100, 0, "DeleteItem", ""},
		{"chunked new/chunk", -1, big, 0, "PutItem", "#chunk#"},
		{"chunked new/head", -1, big, 0, "UpdateItem", ""},
		{"chunked over chunked/head", big + 5, big, 0, "UpdateItem", ""},
		{"chunked over chunked/chunk delete", big + 5, big, 0, "DeleteItem", ""},
		{"chunked over inline, earlier first failure/head", 50, big, -time.Minute, "UpdateItem", ""},
	}
	for i, c := range cases {
		for _, kind := range faultproxy.Kinds {
			t.Run(c.name+"/"+kind.String(), func(t *testing.T) {
				p := "put-" + kind.String() + "-" + string(rune('a'+i))
				var storedGen string
				want := letterOf(p, c.size, ambT0)
				if c.stored >= 0 {
					old := letterOf(p, c.stored, ambT0.Add(c.storedFF))
					old.Error, old.Attempts = "first error", 1
					de.putDirect(t, old)
					storedGen = de.headGen(t, p)
					if c.storedFF < 0 {
						want.FirstFailure = old.FirstFailure
					}
				}
				want.Attempts = 2
				de.armOp(kind, c.op, de.names.DeadLetters, `"`+p+`"`, c.part)
				if err := de.proxied.Put(ctxT(t), want); err != nil {
					t.Fatalf("Put: %v", err)
				}
				de.requireFaulted(t)
				de.requireLetter(t, want)
				gens := de.chunkGens(t, p)
				if gen := de.headGen(t, p); gen != "" {
					if n := gens[gen]; n != 3 {
						t.Fatalf("the head's generation %s has %d chunks, want 3 (all: %v)", gen, n, gens)
					}
					delete(gens, gen)
				}
				// The replaced generation is deleted, unless the faulted write was the head's
				// (its retry cannot tell what it replaced: garbage, never read).
				if storedGen != "" && c.op == "UpdateItem" && c.part == "" {
					if n := gens[storedGen]; n != 3 {
						t.Fatalf("the replaced generation %s has %d chunks left, want all 3 (garbage)", storedGen, n)
					}
					delete(gens, storedGen)
				}
				if len(gens) != 0 {
					t.Fatalf("chunks of other generations left: %v", gens)
				}
			})
		}
	}
}

func TestAmbiguousDeadLettersTransition(t *testing.T) {
	de := newDLFaultEnv(t)
	failed := []deadletter.State{deadletter.StateFailed}
	requested := []deadletter.State{deadletter.StateReplayRequested}
	cases := []struct {
		name   string
		stored deadletter.State // "": no letter
		from   []deadletter.State
		to     deadletter.State
		seq    string // replayed_seq
		// other, when set, is a Transition by another request between the applied attempt and
		// its retry: from requested to other.
		other     deadletter.State
		want      error // nil: success, else what the error must wrap
		wantState deadletter.State
	}{
		{"request replay", deadletter.StateFailed, failed, deadletter.StateReplayRequested, "", "", nil, deadletter.StateReplayRequested},
		{"replayed", deadletter.StateReplayRequested, requested, deadletter.StateReplayed, "77", "", nil, deadletter.StateReplayed},
		{"other state stored", deadletter.StateDropped, failed, deadletter.StateReplayRequested, "", "", deadletter.ErrState, deadletter.StateDropped},
		{"moved on after the applied attempt", deadletter.StateFailed, failed, deadletter.StateReplayRequested, "", deadletter.StateDropped,
			deadletter.ErrState, deadletter.StateDropped},
		{"missing", "", failed, deadletter.StateReplayRequested, "", "", deadletter.ErrNotFound, ""},
	}
	for i, c := range cases {
		for _, kind := range faultproxy.Kinds {
			t.Run(c.name+"/"+kind.String(), func(t *testing.T) {
				p := "tr-" + kind.String() + "-" + string(rune('a'+i))
				l := letterOf(p, 10, ambT0)
				if l.State = c.stored; c.stored != "" {
					de.putDirect(t, l)
				}
				de.arm(kind, de.names.DeadLetters, `"`+p+`"`)
				if c.other != "" {
					de.afterFault(t, func() {
						if err := de.direct.Transition(ctxT(t), p, ambShard, "42", requested, c.other, ""); err != nil {
							t.Errorf("the other Transition: %v", err)
						}
					})
				}
				err := de.proxied.Transition(ctxT(t), p, ambShard, "42", c.from, c.to, c.seq)
				if (c.want == nil) != (err == nil) || !errors.Is(err, c.want) {
					t.Fatalf("Transition error = %v, want %v", err, c.want)
				}
				if c.want != nil && c.other == "" {
					de.requireFaultedConflict(t)
				} else {
					de.requireFaulted(t)
				}
				if c.stored == "" {
					de.requireItem(t, de.names.DeadLetters, headKey(p), nil)
					return
				}
				if l.State = c.wantState; c.want == nil {
					l.ReplayedSeq = c.seq
				}
				de.requireLetter(t, l)
			})
		}
	}
}
