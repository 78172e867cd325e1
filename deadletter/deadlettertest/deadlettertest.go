// Package deadlettertest is the conformance suite for deadletter.Store implementations.
//
// Run it from an implementation's tests:
//
//	func TestConformance(t *testing.T) {
//		deadlettertest.Run(t, func(t *testing.T) deadletter.Store { return openStore(t) })
//	}
//
// The factory is called once per subtest and may return the same backing table every time: each
// subtest uses fresh projection names. The suite checks only the documented contract: letters
// come back field for field as stored (times at millisecond precision, data byte for byte, up to
// 1 MiB, the largest event the host delivers: wasmabi.MaxDataLen), List orders by shard id bytes
// then sequence number numerically, Transition is a compare-and-set. About 200 writes and 10 MB
// of data in all.
package deadlettertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/internal/suitekit"
)

// Run runs the suite. newStore returns the store under test.
func Run(t *testing.T, newStore func(t *testing.T) deadletter.Store) {
	t.Helper()
	suitekit.Run(t, newStore, []suitekit.Case[deadletter.Store]{
		{Name: "GetMissing", Fn: testGetMissing},
		{Name: "PutGet", Fn: testPutGet},
		{Name: "ZeroFields", Fn: testZeroFields},
		{Name: "PutReplaces", Fn: testPutReplaces},
		{Name: "FirstFailureKept", Fn: testFirstFailureKept},
		{Name: "Data", Fn: testData},
		{Name: "DataReplaced", Fn: testDataReplaced},
		{Name: "ListOrder", Fn: testListOrder},
		{Name: "ListFilter", Fn: testListFilter},
		{Name: "Isolation", Fn: testIsolation},
		{Name: "Transition", Fn: testTransition},
		{Name: "TransitionRefused", Fn: testTransitionRefused},
		{Name: "RaceTransition", Fn: testRaceTransition},
		{Name: "RacePut", Fn: testRacePut},
		{Name: "Invalid", Fn: testInvalid},
	})
}

const (
	shardA = "shardId-000000000000"
	shardB = "shardId-000000000001"
	// Real Kinesis sequence numbers: 56 decimal digits.
	bigSeq1 = "49590338271490256608559692538361571095921575989136588898"
	bigSeq2 = "49590338271490256608559692540925702759324208523137515618"
	// MaxData is the largest event data the suite stores: wasmabi.MaxDataLen (1 MiB).
	MaxData = 1 << 20
)

// seq129 is the longest sequence number the Kinesis API allows (129 digits).
var seq129 = "9" + strings.Repeat("0", 128)

// t0 has sub-millisecond digits and a non-UTC location: stores keep milliseconds only.
var t0 = time.Date(2026, 3, 14, 15, 9, 26, 535_897_932, time.FixedZone("UTC+5:30", 5*3600+1800))

func ctxT(t *testing.T) context.Context { return suitekit.Context(t) }

func projection(t *testing.T) string { return suitekit.Name(t, "dltest") }

// letter returns a failed letter with every field set.
func letter(proj, shard, seq string) deadletter.Letter {
	return deadletter.Letter{
		Projection:   proj,
		ShardID:      shard,
		Seq:          seq,
		PartitionKey: "key-" + seq,
		ArrivalMs:    1_773_500_000_123,
		Data:         []byte(`{"origin":"DTW","seq":"` + seq + `","note":"Détroit"}`),
		ErrorKind:    "fail",
		Error:        "projhost.fail: bad record at " + seq,
		Attempts:     1,
		FirstFailure: t0,
		LastFailure:  t0.Add(1500 * time.Millisecond),
		State:        deadletter.StateFailed,
	}
}

func put(t *testing.T, s deadletter.Store, ls ...deadletter.Letter) {
	t.Helper()
	for _, l := range ls {
		if err := s.Put(ctxT(t), l); err != nil {
			t.Fatalf("Put(%s/%s/%s, %d data bytes): %v", l.Projection, l.ShardID, l.Seq, len(l.Data), err)
		}
	}
}

// sameTime reports whether got is want at millisecond precision (zero stays zero).
func sameTime(got, want time.Time) bool {
	if want.IsZero() || got.IsZero() {
		return want.IsZero() == got.IsZero()
	}
	return got.UnixMilli() == want.UnixMilli()
}

// diff describes how got differs from want ("" when it does not).
func diff(got, want deadletter.Letter) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if got.Projection != want.Projection || got.ShardID != want.ShardID || got.Seq != want.Seq {
		add("identity", got.Projection+"/"+got.ShardID+"/"+got.Seq, want.Projection+"/"+want.ShardID+"/"+want.Seq)
	}
	if got.PartitionKey != want.PartitionKey {
		add("PartitionKey", fmt.Sprintf("%q", got.PartitionKey), fmt.Sprintf("%q", want.PartitionKey))
	}
	if got.ArrivalMs != want.ArrivalMs {
		add("ArrivalMs", got.ArrivalMs, want.ArrivalMs)
	}
	if !bytes.Equal(got.Data, want.Data) {
		add("Data", describe(got.Data), describe(want.Data))
	}
	if got.ErrorKind != want.ErrorKind || got.Error != want.Error {
		add("error", fmt.Sprintf("%q %q", got.ErrorKind, got.Error), fmt.Sprintf("%q %q", want.ErrorKind, want.Error))
	}
	if got.Attempts != want.Attempts {
		add("Attempts", got.Attempts, want.Attempts)
	}
	if !sameTime(got.FirstFailure, want.FirstFailure) {
		add("FirstFailure", got.FirstFailure, want.FirstFailure)
	}
	if !sameTime(got.LastFailure, want.LastFailure) {
		add("LastFailure", got.LastFailure, want.LastFailure)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.ReplayedSeq != want.ReplayedSeq {
		add("ReplayedSeq", fmt.Sprintf("%q", got.ReplayedSeq), fmt.Sprintf("%q", want.ReplayedSeq))
	}
	return strings.Join(d, "; ")
}

// describe summarises data for messages: short data in full, long data by length and ends.
func describe(b []byte) string {
	if len(b) <= 64 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%d bytes %q...%q", len(b), b[:16], b[len(b)-16:])
}

// expect checks that the store holds want (by Get).
func expect(t *testing.T, s deadletter.Store, want deadletter.Letter) {
	t.Helper()
	got, err := s.Get(ctxT(t), want.Projection, want.ShardID, want.Seq)
	if err != nil {
		t.Fatalf("Get(%s/%s/%s): %v", want.Projection, want.ShardID, want.Seq, err)
	}
	if d := diff(got, want); d != "" {
		t.Fatalf("Get(%s/%s/%s): %s", want.Projection, want.ShardID, want.Seq, d)
	}
}

func expectMissing(t *testing.T, s deadletter.Store, proj, shard, seq string) {
	t.Helper()
	l, err := s.Get(ctxT(t), proj, shard, seq)
	if !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("Get(%s/%s/%s) = %+v, %v; want ErrNotFound", proj, shard, seq, l, err)
	}
}

// expectList checks List(proj, f) against want, in order.
func expectList(t *testing.T, s deadletter.Store, proj string, f deadletter.Filter, want ...deadletter.Letter) {
	t.Helper()
	got, err := s.List(ctxT(t), proj, f)
	if err != nil {
		t.Fatalf("List(%s, %+v): %v", proj, f, err)
	}
	ids := func(ls []deadletter.Letter) string {
		var b strings.Builder
		for _, l := range ls {
			fmt.Fprintf(&b, "\n\t%s/%s %s", l.ShardID, l.Seq, l.State)
		}
		return b.String()
	}
	if len(got) != len(want) {
		t.Fatalf("List(%s, %+v) returned %d letters, want %d:%s\nwant:%s", proj, f, len(got), len(want), ids(got), ids(want))
	}
	for i := range want {
		if d := diff(got[i], want[i]); d != "" {
			t.Fatalf("List(%s, %+v)[%d]: %s\ngot:%s\nwant:%s", proj, f, i, d, ids(got), ids(want))
		}
	}
}

func transition(t *testing.T, s deadletter.Store, l deadletter.Letter, from []deadletter.State, to deadletter.State, replayedSeq string) {
	t.Helper()
	if err := s.Transition(ctxT(t), l.Projection, l.ShardID, l.Seq, from, to, replayedSeq); err != nil {
		t.Fatalf("Transition(%s/%s/%s, %v -> %s): %v", l.Projection, l.ShardID, l.Seq, from, to, err)
	}
}

func states(ss ...deadletter.State) []deadletter.State { return ss }

func testGetMissing(t *testing.T, s deadletter.Store) {
	proj := projection(t)
	expectMissing(t, s, proj, shardA, "1")
	put(t, s, letter(proj, shardA, "10"))
	expectMissing(t, s, proj, shardA, "1")  // another seq (a prefix of the stored one)
	expectMissing(t, s, proj, shardA, "11") // another seq
	expectMissing(t, s, proj, shardB, "10") // another shard
	expectMissing(t, s, projection(t), shardA, "10")
	expectList(t, s, projection(t), deadletter.Filter{})
}

func testPutGet(t *testing.T, s deadletter.Store) {
	proj := projection(t)
	l := letter(proj, shardA, bigSeq1)
	l.Attempts = 3
	put(t, s, l)
	expect(t, s, l)
	// A replayed letter keeps its ReplayedSeq; the longest sequence numbers the API allows work.
	r := letter(proj, shardA, seq129)
	r.State, r.ReplayedSeq = deadletter.StateReplayed, seq129
	put(t, s, r)
	expect(t, s, r)
	expectList(t, s, proj, deadletter.Filter{}, l, r)
}

// testZeroFields: optional fields left zero come back zero (Data may come back nil or empty).
func testZeroFields(t *testing.T, s deadletter.Store) {
	proj := projection(t)
	l := deadletter.Letter{Projection: proj, ShardID: shardA, Seq: "0", State: deadletter.StateDropped}
	put(t, s, l)
	expect(t, s, l)
	l.Data = []byte{}
	put(t, s, l)
	expect(t, s, l)
}

// testPutReplaces: a second Put replaces every field but an earlier FirstFailure.
func testPutReplaces(t *testing.T, s deadletter.Store) {
	proj := projection(t)
	l := letter(proj, shardA, "42")
	put(t, s, l)
	transition(t, s, l, states(deadletter.StateFailed), deadletter.StateReplayRequested, "")
	// The replay failed again: the owner stores the letter anew.
	again := l
	again.PartitionKey = "other-key"
	again.ArrivalMs = 7
	again.Data = []byte("not JSON \x00\xff")
	again.ErrorKind, again.Error = "trap", "wasm trap: unreachable"
	again.Attempts = 2
	again.FirstFailure = t0.Add(time.Hour) // later: the stored one is kept
	again.LastFailure = t0.Add(2 * time.Hour)
	again.State = deadletter.StateFailed
	put(t, s, again)
	want := again
	want.FirstFailure = l.FirstFailure
	expect(t, s, want)
	// Optional fields can be cleared by a Put.
	cleared := deadletter.Letter{Projection: proj, ShardID: shardA, Seq: "42", State: deadletter.StateFailed}
	put(t, s, cleared)
	want = cleared
	want.FirstFailure = l.FirstFailure // zero: unknown, the stored one is kept
	expect(t, s, want)
	expectList(t, s, proj, deadletter.Filter{}, want)
}

// testFirstFailureKept: the earliest known FirstFailure wins, whatever the order of the Puts.
func testFirstFailureKept(t *testing.T, s deadletter.Store) {
	proj := projection(t)
	l := letter(proj, shardA, "5")
	l.FirstFailure = time.Time{}
	put(t, s, l) // unknown first failure
	expect(t, s, l)
	for _, tt := range []struct{ put, want time.Time }{
		{t0.Add(time.Minute), t0.Add(time.Minute)}, // first known one
		{t0.Add(2 * time.Minute), t0.Add(time.Minute)},
		{t0, t0}, // earlier: replaces
		{t0.Add(-time.Millisecond), t0.Add(-time.Millisecond)},
		{time.Time{}, t0.Add(-time.Millisecond)},
		{t0.Add(time.Hour), t0.Add(-time.Millisecond)},
	} {
		l.FirstFailure = tt.put
		put(t, s, l)
		want := l
		want.FirstFailure = tt.want
		expect(t, s, want)
	}
}

// payloads returns event data the stores must keep byte for byte.
func payloads() map[string][]byte {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	bigJSON := []byte(`{"rows":[` + strings.Repeat(`{"k":"é\u2028😀","v":-1.5e300},`, 20000) + `{}]}`)
	return map[string][]byte{
		"every byte value":   all,
		"invalid UTF-8":      []byte("\xff\xfe\xc3\x28 \xed\xa0\x80"),
		"NUL bytes only":     make([]byte, 100),
		"JSON with unicode":  []byte(`{"name":"Détroit → Las Vegas","emoji":"😀","esc":"\"\\\u0000"}`),
		"whitespace":         []byte(" \t\r\n"),
		"one byte":           {0x80},
		"~330 KB random":     random(330_000),
		"~400 KB random":     random(400 * 1024),
		"~800 KB JSON":       bigJSON,
		"1 MiB random (max)": random(MaxData),
	}
}

// testData: every payload round-trips byte for byte through Get and List.
func testData(t *testing.T, s deadletter.Store) {
	proj := projection(t)
	var want []deadletter.Letter
	i := 0
	for name, data := range payloads() {
		i++
		l := letter(proj, shardA, fmt.Sprint(i))
		l.PartitionKey = name
		l.Data = data
		put(t, s, l)
		expect(t, s, l)
		want = append(want, l)
	}
	// The map's order is random; List's is by sequence number.
	ordered := make([]deadletter.Letter, len(want))
	for _, l := range want {
		var n int
		fmt.Sscan(l.Seq, &n)
		ordered[n-1] = l
	}
	expectList(t, s, proj, deadletter.Filter{}, ordered...)
}

// testDataReplaced: a letter's data can be replaced by larger and smaller data; the old data
// never shows through.
func testDataReplaced(t *testing.T, s deadletter.Store) {
	proj := projection(t)
	p := payloads()
	l := letter(proj, shardA, "1")
	for _, name := range []string{"1 MiB random (max)", "one byte", "~800 KB JSON", "1 MiB random (max)", "~400 KB random", "whitespace"} {
		l.Data = p[name]
		put(t, s, l)
		expect(t, s, l)
	}
	expectList(t, s, proj, deadletter.Filter{}, l)
}

// testListOrder: shard ids order by their bytes (a shorter prefix first), sequence numbers
// numerically, whatever the order of the Puts.
func testListOrder(t *testing.T, s deadletter.Store) {
	proj := projection(t)
	var want []deadletter.Letter
	// Shard ids chosen so that a composite key shard+separator+seq would misorder them
	// unless the separator sorts below every shard id byte.
	for _, shard := range []string{"a", "a b", "a!", "a#", "a#b", "a-1", shardA, shardB} {
		for _, seq := range []string{"0", "9", "10", "99", "100", bigSeq1, bigSeq2, seq129} {
			want = append(want, letter(proj, shard, seq))
		}
	}
	shuffled := append([]deadletter.Letter(nil), want...)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, l := range shuffled {
		l.Data = []byte(l.ShardID + "/" + l.Seq) // small, so the suite stays fast
		put(t, s, l)
	}
	for i := range want {
		want[i].Data = []byte(want[i].ShardID + "/" + want[i].Seq)
	}
	put(t, s, letter(projection(t), "a", "1")) // another projection: not listed
	expectList(t, s, proj, deadletter.Filter{}, want...)
}

// testListFilter: filters by exact shard id and by state, alone and together.
func testListFilter(t *testing.T, s deadletter.Store) {
	proj := projection(t)
	ls := map[string]deadletter.Letter{}
	for _, k := range []struct {
		shard, seq string
		state      deadletter.State
	}{
		{"a", "1", deadletter.StateFailed}, {"a", "2", deadletter.StateReplayRequested}, {"a", "10", deadletter.StateFailed},
		{"a#", "1", deadletter.StateFailed}, {"a#b", "3", deadletter.StateReplayed}, {"ab", "1", deadletter.StateFailed},
		{"b", "7", deadletter.StateDropped},
	} {
		l := letter(proj, k.shard, k.seq)
		l.State = k.state
		if k.state == deadletter.StateReplayed {
			l.ReplayedSeq = "99"
		}
		put(t, s, l)
		ls[k.shard+"/"+k.seq] = l
	}
	f := func(shard string, st deadletter.State) deadletter.Filter {
		return deadletter.Filter{ShardID: shard, State: st}
	}
	expectList(t, s, proj, f("a", ""), ls["a/1"], ls["a/2"], ls["a/10"])
	expectList(t, s, proj, f("a#", ""), ls["a#/1"])
	expectList(t, s, proj, f("a#b", ""), ls["a#b/3"])
	expectList(t, s, proj, f("", deadletter.StateFailed), ls["a/1"], ls["a/10"], ls["a#/1"], ls["ab/1"])
	expectList(t, s, proj, f("a", deadletter.StateFailed), ls["a/1"], ls["a/10"])
	expectList(t, s, proj, f("a", deadletter.StateReplayRequested), ls["a/2"])
	expectList(t, s, proj, f("", deadletter.StateReplayed), ls["a#b/3"])
	expectList(t, s, proj, f("b", deadletter.StateFailed))
	expectList(t, s, proj, f("c", ""))
	expectList(t, s, proj, f("", deadletter.StateDropped), ls["b/7"])
}

// testIsolation: the same shard and sequence number in two projections are two letters.
func testIsolation(t *testing.T, s deadletter.Store) {
	p1, p2 := projection(t), projection(t)
	l1, l2 := letter(p1, shardA, "1"), letter(p2, shardA, "1")
	l2.Error = "other projection"
	put(t, s, l1, l2)
	transition(t, s, l2, states(deadletter.StateFailed), deadletter.StateDropped, "")
	l2.State = deadletter.StateDropped
	expect(t, s, l1)
	expect(t, s, l2)
	expectList(t, s, p1, deadletter.Filter{}, l1)
	expectList(t, s, p2, deadletter.Filter{}, l2)
}

// testTransition walks a letter through its life; every other field stays as stored.
func testTransition(t *testing.T, s deadletter.Store) {
	proj := projection(t)
	l := letter(proj, shardA, bigSeq1)
	l.Data = payloads()["1 MiB random (max)"] // a transition must not lose or rewrite the data
	put(t, s, l)
	steps := []struct {
		from        []deadletter.State
		to          deadletter.State
		replayedSeq string
		wantReplay  string // ReplayedSeq afterwards
	}{
		{states(deadletter.StateFailed), deadletter.StateReplayRequested, "7", ""},         // replayedSeq ignored
		{states(deadletter.StateReplayRequested), deadletter.StateReplayRequested, "", ""}, // to the state it has
		{states(deadletter.StateReplayRequested), deadletter.StateFailed, "", ""},          // the replay failed
		{states(deadletter.StateFailed, deadletter.StateReplayRequested), deadletter.StateReplayRequested, "", ""},
		{states(deadletter.StateReplayRequested), deadletter.StateReplayed, bigSeq2, bigSeq2},
		{states(deadletter.StateReplayed), deadletter.StateDropped, "8", bigSeq2}, // left alone
	}
	for _, st := range steps {
		transition(t, s, l, st.from, st.to, st.replayedSeq)
		l.State, l.ReplayedSeq = st.to, st.wantReplay
		expect(t, s, l)
	}
	// A Put's ReplayedSeq is kept by transitions that do not replay.
	m := letter(proj, shardB, "3")
	m.ReplayedSeq = "2"
	put(t, s, m)
	transition(t, s, m, states(deadletter.StateFailed), deadletter.StateDropped, "9")
	m.State = deadletter.StateDropped
	expect(t, s, m)
}

// testTransitionRefused: ErrState when the letter is in none of the from states (nothing
// changes), ErrNotFound when there is no letter; the two are told apart.
func testTransitionRefused(t *testing.T, s deadletter.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	l := letter(proj, shardA, "12")
	put(t, s, l)
	for _, tt := range []struct {
		from []deadletter.State
		to   deadletter.State
	}{
		{states(deadletter.StateReplayRequested), deadletter.StateReplayed},
		{states(deadletter.StateReplayed, deadletter.StateDropped), deadletter.StateFailed},
		{states(deadletter.StateReplayRequested), deadletter.StateFailed}, // even to the state it has
	} {
		err := s.Transition(ctx, proj, shardA, "12", tt.from, tt.to, "20")
		if !errors.Is(err, deadletter.ErrState) || errors.Is(err, deadletter.ErrNotFound) {
			t.Fatalf("Transition of a failed letter from %v to %s: err = %v, want ErrState only", tt.from, tt.to, err)
		}
		expect(t, s, l)
	}
	for _, k := range [][2]string{{shardA, "13"}, {shardA, "1"}, {shardB, "12"}} {
		err := s.Transition(ctx, proj, k[0], k[1], states(deadletter.StateFailed), deadletter.StateDropped, "")
		if !errors.Is(err, deadletter.ErrNotFound) || errors.Is(err, deadletter.ErrState) {
			t.Fatalf("Transition of missing letter %s/%s: err = %v, want ErrNotFound only", k[0], k[1], err)
		}
		expectMissing(t, s, proj, k[0], k[1])
	}
	if err := s.Transition(ctx, projection(t), shardA, "12", states(deadletter.StateFailed), deadletter.StateDropped, ""); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("Transition in another projection: err = %v, want ErrNotFound", err)
	}
	// A final state refuses what the life cycle does not allow, when the caller says so.
	transition(t, s, l, states(deadletter.StateFailed), deadletter.StateDropped, "")
	err := s.Transition(ctx, proj, shardA, "12", states(deadletter.StateFailed, deadletter.StateReplayRequested), deadletter.StateReplayRequested, "")
	if !errors.Is(err, deadletter.ErrState) {
		t.Fatalf("replay request of a dropped letter: err = %v, want ErrState", err)
	}
	l.State = deadletter.StateDropped
	expect(t, s, l)
}

// testRaceTransition: operators racing on one failed letter (replay against drop): exactly one
// Transition wins, the others get ErrState, and the letter ends in the winner's state.
func testRaceTransition(t *testing.T, s deadletter.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	const racers = 8
	for round := range 3 {
		l := letter(proj, shardA, fmt.Sprint(round+1))
		put(t, s, l)
		var wg sync.WaitGroup
		errs := make([]error, racers)
		start := make(chan struct{})
		to := func(i int) deadletter.State {
			if i%2 == 0 {
				return deadletter.StateReplayRequested
			}
			return deadletter.StateDropped
		}
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = s.Transition(ctx, proj, shardA, l.Seq, states(deadletter.StateFailed), to(i), "")
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: Transitions %d and %d both succeeded", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, deadletter.ErrState):
				t.Fatalf("round %d: Transition %d: err = %v, want nil or ErrState", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no Transition succeeded: %v", round, errs)
		}
		l.State = to(winner)
		expect(t, s, l)
	}
}

// testRacePut: concurrent Puts of one letter (an owner and a zombie re-processing the event)
// leave one Put's fields and the earliest FirstFailure.
func testRacePut(t *testing.T, s deadletter.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := letter(proj, shardA, "77")
			l.Attempts = i + 1
			l.FirstFailure = t0.Add(time.Duration(n-i) * time.Second) // the last one is the earliest
			errs[i] = s.Put(ctx, l)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, proj, shardA, "77")
	if err != nil {
		t.Fatal(err)
	}
	want := letter(proj, shardA, "77")
	want.FirstFailure = t0.Add(time.Second)
	want.Attempts = got.Attempts
	if d := diff(got, want); d != "" || got.Attempts < 1 || got.Attempts > n {
		t.Fatalf("after racing Puts: %s (attempts %d, want one Put's, 1..%d)", d, got.Attempts, n)
	}
}

// testInvalid: input a store cannot hold is refused with ErrInvalid and stores nothing.
func testInvalid(t *testing.T, s deadletter.Store) {
	ctx := ctxT(t)
	proj := projection(t)
	ok := letter(proj, shardA, "1")
	bad := map[string]func(l *deadletter.Letter){
		"empty projection":       func(l *deadletter.Letter) { l.Projection = "" },
		"empty shard":            func(l *deadletter.Letter) { l.ShardID = "" },
		"empty seq":              func(l *deadletter.Letter) { l.Seq = "" },
		"seq not decimal":        func(l *deadletter.Letter) { l.Seq = "12a" },
		"seq with leading zeros": func(l *deadletter.Letter) { l.Seq = "007" },
		"negative seq":           func(l *deadletter.Letter) { l.Seq = "-1" },
		"seq of 130 digits":      func(l *deadletter.Letter) { l.Seq = "1" + strings.Repeat("0", 129) },
		"empty state":            func(l *deadletter.Letter) { l.State = "" },
		"unknown state":          func(l *deadletter.Letter) { l.State = "lost" },
		"bad replayed seq":       func(l *deadletter.Letter) { l.ReplayedSeq = "x" },
		"negative attempts":      func(l *deadletter.Letter) { l.Attempts = -1 },
	}
	for name, mutate := range bad {
		l := ok
		mutate(&l)
		if err := s.Put(ctx, l); !errors.Is(err, deadletter.ErrInvalid) {
			t.Errorf("Put with %s: err = %v, want ErrInvalid", name, err)
		}
	}
	expectList(t, s, proj, deadletter.Filter{})
	for _, k := range [][3]string{{"", shardA, "1"}, {proj, "", "1"}, {proj, shardA, ""}, {proj, shardA, "01"}} {
		if _, err := s.Get(ctx, k[0], k[1], k[2]); !errors.Is(err, deadletter.ErrInvalid) {
			t.Errorf("Get(%q, %q, %q): err = %v, want ErrInvalid", k[0], k[1], k[2], err)
		}
	}
	if _, err := s.List(ctx, "", deadletter.Filter{}); !errors.Is(err, deadletter.ErrInvalid) {
		t.Errorf("List of an empty projection: err = %v, want ErrInvalid", err)
	}
	if _, err := s.List(ctx, proj, deadletter.Filter{State: "lost"}); !errors.Is(err, deadletter.ErrInvalid) {
		t.Errorf("List filtered by an unknown state: err = %v, want ErrInvalid", err)
	}
	put(t, s, ok)
	for _, tt := range []struct {
		name string
		seq  string
		from []deadletter.State
		to   deadletter.State
		rs   string
	}{
		{"no from state", "1", nil, deadletter.StateDropped, ""},
		{"unknown from state", "1", states("lost"), deadletter.StateDropped, ""},
		{"unknown to state", "1", states(deadletter.StateFailed), "lost", ""},
		{"replayed without seq", "1", states(deadletter.StateFailed), deadletter.StateReplayed, ""},
		{"replayed with a bad seq", "1", states(deadletter.StateFailed), deadletter.StateReplayed, "1.5"},
		{"bad seq", "x", states(deadletter.StateFailed), deadletter.StateDropped, ""},
	} {
		if err := s.Transition(ctx, proj, shardA, tt.seq, tt.from, tt.to, tt.rs); !errors.Is(err, deadletter.ErrInvalid) {
			t.Errorf("Transition with %s: err = %v, want ErrInvalid", tt.name, err)
		}
	}
	expect(t, s, ok)
}
