package journal

import (
	"context"
	"database/sql"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/sqlitefile"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/sourcetest"
)

func resharder(j *Journal) sourcetest.Resharder {
	return sourcetest.Resharder{
		Split: func(ctx context.Context, id string) ([2]string, error) { return j.Split(ctx, id, "") },
		Merge: j.Merge,
	}
}

// TestConformanceResharding: the journal declares the Resharding feature.
func TestConformanceResharding(t *testing.T) {
	sourcetest.RunResharding(t, func(t *testing.T, shards int) (source.Source, sourcetest.Appender, sourcetest.Resharder) {
		j := create(t, t.TempDir(), shards, WithPollInterval(5*time.Millisecond))
		return j, appender(j), resharder(j)
	})
}

// TestConformanceReshardingSecondHandle reads and lists through a second handle (as another
// process would) while appending and resharding through the first: Shards, Open and Read see
// the other handle's splits and merges.
func TestConformanceReshardingSecondHandle(t *testing.T) {
	sourcetest.RunResharding(t, func(t *testing.T, shards int) (source.Source, sourcetest.Appender, sourcetest.Resharder) {
		dir := t.TempDir()
		w := create(t, dir, shards)
		r := openSecond(t, dir)
		if _, err := r.Shards(context.Background()); err != nil { // caches the first layout
			t.Fatal(err)
		}
		// Appends through the reader's handle too: its cached layout must follow w's changes.
		return r, appender(r), resharder(w)
	})
}

func shardsByID(t *testing.T, j *Journal) map[string]source.Shard {
	t.Helper()
	ss, err := j.Shards(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]source.Shard{}
	for _, s := range ss {
		m[s.ID] = s
	}
	return m
}

func TestSplitMergeShape(t *testing.T) {
	ctx := context.Background()
	j := create(t, t.TempDir(), 2)
	s0, s1 := ShardID(0), ShardID(1)
	start0, end0 := source.EvenHashKeyRange(0, 2)
	start1, end1 := source.EvenHashKeyRange(1, 2)
	// 2^126: a quarter of the range.
	const quarter = "85070591730234615865843651857942052864"
	kids, err := j.Split(ctx, s0, quarter)
	if err != nil {
		t.Fatal(err)
	}
	if kids != [2]string{ShardID(2), ShardID(3)} {
		t.Fatalf("Split children = %v, want the next ids 2 and 3", kids)
	}
	m, err := j.Merge(ctx, s1, kids[1])
	if err != nil {
		t.Fatal(err)
	}
	if m != ShardID(4) {
		t.Fatalf("Merge child = %s, want %s", m, ShardID(4))
	}
	got, err := j.Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []source.Shard{
		{ID: s0, HashKeyStart: start0, HashKeyEnd: end0, Closed: true},
		{ID: s1, HashKeyStart: start1, HashKeyEnd: end1, Closed: true},
		{ID: ShardID(2), ParentIDs: []string{s0}, HashKeyStart: start0, HashKeyEnd: "85070591730234615865843651857942052863"},
		{ID: ShardID(3), ParentIDs: []string{s0}, HashKeyStart: quarter, HashKeyEnd: end0, Closed: true},
		{ID: ShardID(4), ParentIDs: []string{s1, ShardID(3)}, HashKeyStart: quarter, HashKeyEnd: end1},
	}
	if !slices.EqualFunc(got, want, func(a, b source.Shard) bool {
		return a.ID == b.ID && slices.Equal(a.ParentIDs, b.ParentIDs) && a.HashKeyStart == b.HashKeyStart &&
			a.HashKeyEnd == b.HashKeyEnd && a.Closed == b.Closed
	}) {
		t.Fatalf("Shards =\n%+v\nwant\n%+v", got, want)
	}
}

// TestChildSequenceNumbers: a child's numbers continue after its parents' largest last one.
func TestChildSequenceNumbers(t *testing.T) {
	ctx := context.Background()
	j := create(t, t.TempDir(), 2)
	// 7 events on shard 0, 3 on shard 1.
	appendKeys(t, j, keyOn(t, 0, 2), 7)
	appendKeys(t, j, keyOn(t, 1, 2), 3)
	m, err := j.Merge(ctx, ShardID(0), ShardID(1))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := j.Head(ctx, m); err != nil || h != "" {
		t.Fatalf("Head(empty child) = %q, %v; want \"\"", h, err)
	}
	if s, err := j.Start(ctx, m); err != nil || s != "7" {
		t.Fatalf("Start(child) = %q, %v; want 7", s, err)
	}
	if s, err := j.Start(ctx, ShardID(0)); err != nil || s != "" {
		t.Fatalf("Start(created shard) = %q, %v; want \"\"", s, err)
	}
	pos := appendKeys(t, j, "x", 2)
	if pos[0].ShardID != m || pos[0].Seq != "8" || pos[1].Seq != "9" {
		t.Fatalf("positions after the merge = %+v, want %s 8 and 9", pos, m)
	}
	r, err := j.Open(ctx, m, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Read(ctx, 1, 0)
	if err != nil || len(b.Events) != 1 || b.Events[0].Seq != "8" || b.EventsBehind != 1 {
		t.Fatalf("Read(child) = %+v, %v; want event 8 with 1 behind", b, err)
	}
	if h, err := j.Head(ctx, ShardID(0)); err != nil || h != "7" {
		t.Fatalf("Head(closed parent) = %q, %v; want 7", h, err)
	}
}

func keyOn(t *testing.T, shard, of int) string {
	t.Helper()
	for i := 0; ; i++ {
		if k := "k" + strconv.Itoa(i); ShardFor(k, of) == shard {
			return k
		}
	}
}

func appendKeys(t *testing.T, j *Journal, key string, n int) []Position {
	t.Helper()
	evs := make([]AppendEvent, n)
	for i := range evs {
		evs[i] = AppendEvent{PartitionKey: key, Data: []byte(strconv.Itoa(i))}
	}
	pos, err := j.Append(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

func TestReshardErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	j := create(t, dir, 3)
	start1, end1 := source.EvenHashKeyRange(1, 3)
	if _, err := j.Split(ctx, ShardID(2), ""); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	tests := []struct {
		name   string
		change func() error
		want   error
	}{
		{"split a closed shard", func() error { _, err := j.Split(ctx, ShardID(2), ""); return err }, ErrShardClosed},
		{"split an unknown shard", func() error { _, err := j.Split(ctx, ShardID(5), ""); return err }, source.ErrUnknownShard},
		{"split a malformed id", func() error { _, err := j.Split(ctx, "shard-1", ""); return err }, source.ErrUnknownShard},
		{"split at the start", func() error { _, err := j.Split(ctx, ShardID(1), start1); return err }, ErrInvalid},
		{"split past the end", func() error {
			_, err := j.Split(ctx, ShardID(1), end1+"0")
			return err
		}, ErrInvalid},
		{"split at a non-number", func() error { _, err := j.Split(ctx, ShardID(1), "-5"); return err }, ErrInvalid},
		{"split at a key beyond 2^128-1", func() error {
			_, err := j.Split(ctx, ShardID(1), "340282366920938463463374607431768211456")
			return err
		}, ErrInvalid},
		{"merge with itself", func() error { _, err := j.Merge(ctx, ShardID(0), ShardID(0)); return err }, ErrInvalid},
		{"merge non-adjacent", func() error { _, err := j.Merge(ctx, ShardID(0), ShardID(4)); return err }, ErrNotAdjacent},
		{"merge a closed shard", func() error { _, err := j.Merge(ctx, ShardID(1), ShardID(2)); return err }, ErrShardClosed},
		{"merge an unknown shard", func() error { _, err := j.Merge(ctx, ShardID(1), ShardID(9)); return err }, source.ErrUnknownShard},
		{"split read-only", func() error { _, err := ro.Split(ctx, ShardID(1), ""); return err }, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := shardsByID(t, j)
			err := tt.change()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if after := shardsByID(t, j); len(after) != len(before) {
				t.Fatalf("a refused change changed the shards from %v to %v", before, after)
			}
		})
	}
}

// v1Schema is the journal schema before resharding (schema version 1).
const v1Schema = `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE heads (shard INTEGER PRIMARY KEY, seq INTEGER NOT NULL);
CREATE TABLE events (
	shard INTEGER NOT NULL, seq INTEGER NOT NULL, partition_key TEXT NOT NULL,
	arrival_ms INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (shard, seq)
) WITHOUT ROWID;
INSERT INTO meta VALUES ('shards', '2');
INSERT INTO heads VALUES (0, 0), (1, 2);
INSERT INTO events VALUES (1, 1, 'LAS', 1000, 'a'), (1, 2, 'LAS', 1001, 'b');
`

func writeV1(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlitefile.Open(filepath.Join(dir, FileName), time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(v1Schema); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSchemaV1: a journal written before resharding reads read-only as it is, and is upgraded by
// a writable open: same shards, events and heads, and it splits.
func TestSchemaV1(t *testing.T) {
	ctx := context.Background()
	dir := writeV1(t)
	check := func(j *Journal) {
		t.Helper()
		ss, err := j.Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) != 2 || ss[1].ID != ShardID(1) || ss[1].Closed {
			t.Fatalf("Shards = %+v, want 2 open shards", ss)
		}
		if s, e := source.EvenHashKeyRange(1, 2); ss[1].HashKeyStart != s || ss[1].HashKeyEnd != e {
			t.Fatalf("shard 1 range [%s, %s], want the even split", ss[1].HashKeyStart, ss[1].HashKeyEnd)
		}
		if h, err := j.Head(ctx, ShardID(1)); err != nil || h != "2" {
			t.Fatalf("Head = %q, %v; want 2", h, err)
		}
		r, err := j.Open(ctx, ShardID(1), "1")
		if err != nil {
			t.Fatal(err)
		}
		if b, err := r.Read(ctx, 10, 0); err != nil || len(b.Events) != 1 || string(b.Events[0].Data) != "b" {
			t.Fatalf("Read = %+v, %v; want event b", b, err)
		}
	}
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	check(ro)
	ro.Close()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'shards'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("a read-only open changed the schema: %d shards tables, %v", tables, err)
	}
	j, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	check(j)
	var v string
	if err := db.QueryRow(`SELECT value FROM meta WHERE key = 'version'`).Scan(&v); err != nil || v != strconv.Itoa(schemaVersion) {
		t.Fatalf("version after a writable open = %q, %v; want %d", v, err, schemaVersion)
	}
	kids, err := j.Split(ctx, ShardID(1), "")
	if err != nil {
		t.Fatal(err)
	}
	pos := appendKeys(t, j, "LAS", 1)
	if !slices.Contains(kids[:], pos[0].ShardID) || pos[0].Seq != "3" {
		t.Fatalf("LAS after the split at %+v, want on %v with seq 3", pos[0], kids)
	}
	again, err := Create(dir, 2) // the upgraded journal opens again with its count
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
}

// TestMultiProcessReshard: three processes append while this one splits and merges; every event
// is on the open shard of its key at the time, each key's events in order along its lineage.
func TestMultiProcessReshard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	j := create(t, dir, 2)
	const procs, count = 3, 600
	var cmds []*exec.Cmd
	for p := 0; p < procs; p++ {
		cmds = append(cmds, startChild(t, "append", dir, strconv.Itoa(p), strconv.Itoa(count)))
	}
	waitTotal := func(n int64) {
		n = min(n, procs*count) // the appenders may be done already
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if totalEvents(t, j) >= n {
				return
			}
		}
		t.Fatalf("the appenders did not reach %d events in 30 s", n)
	}
	waitTotal(100)
	kids, err := j.Split(ctx, ShardID(0), "")
	if err != nil {
		t.Fatal(err)
	}
	waitTotal(totalEvents(t, j) + 100)
	if _, err := j.Merge(ctx, kids[1], ShardID(1)); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	// Read in lineage order: the listing is parents first, and each key lives on one path.
	ss, err := j.Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[string][]string{}
	perShard := map[string]int{}
	for _, s := range ss {
		evs := drainShard(t, j, s)
		for _, e := range evs {
			perKey[e.PartitionKey] = append(perKey[e.PartitionKey], string(e.Data))
		}
		perShard[s.ID] = len(evs)
	}
	checkAppended(t, perKey, procs, count) // in lineage order
	t.Logf("events by shard: %v", perShard)
}

func totalEvents(t *testing.T, j *Journal) int64 {
	t.Helper()
	var n int64
	if err := j.db.QueryRow(`SELECT coalesce(sum(last_seq - first_seq + 1), 0) FROM chunks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReshardedCount: the first change moves the created shard count to "created_shards" and
// leaves in "shards" a value a projhost without resharding refuses (it reads the count with
// strconv.Atoi); Create still checks the created count.
func TestReshardedCount(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	j := create(t, dir, 2)
	if _, err := j.Split(ctx, ShardID(1), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Split(ctx, ShardID(2), ""); err != nil {
		t.Fatal(err)
	}
	var shards, created string
	if err := j.db.QueryRow(`SELECT (SELECT value FROM meta WHERE key = 'shards'), (SELECT value FROM meta WHERE key = 'created_shards')`).Scan(&shards, &created); err != nil {
		t.Fatal(err)
	}
	if _, err := strconv.Atoi(shards); err == nil || created != "2" {
		t.Fatalf(`meta shards = %q, created_shards = %q; want a non-number and "2"`, shards, created)
	}
	if _, err := Create(dir, 3); !errors.Is(err, ErrShardCount) {
		t.Fatalf("Create with another count: err = %v, want ErrShardCount", err)
	}
	for _, open := range []func(string, ...Option) (*Journal, error){Open, OpenReadOnly} {
		o, err := open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := o.Shards(ctx); err != nil || len(n) != 6 || o.ShardCount() != 2 {
			t.Fatalf("reopened: %d shards listed (%v), ShardCount %d; want 6 and 2", len(n), err, o.ShardCount())
		}
		o.Close()
	}
}

// reshardLoop splits the open shard with the lowest hash keys, appends 100 events, and merges
// the two children back, for ever (the "reshard" child process).
func reshardLoop(ctx context.Context, j *Journal) error {
	for i := 0; ; i++ {
		ss, err := j.Shards(ctx)
		if err != nil {
			return err
		}
		var low source.Shard
		for _, s := range ss {
			if !s.Closed && s.HashKeyStart == "0" {
				low = s
			}
		}
		kids, err := j.Split(ctx, low.ID, "")
		if err != nil {
			return err
		}
		evs := make([]AppendEvent, 100)
		for k := range evs {
			evs[k] = AppendEvent{PartitionKey: "k" + strconv.Itoa(k), Data: []byte(strconv.Itoa(i))}
		}
		if _, err := j.Append(ctx, evs); err != nil {
			return err
		}
		if _, err := j.Merge(ctx, kids[0], kids[1]); err != nil {
			return err
		}
	}
}

// TestKillDuringReshard: kill -9 a process that splits, appends and merges in a loop; the
// journal reopens with a consistent layout (open shards covering the hash key range without
// gaps: loadLayout checks it), every closed shard ends, and appends go on.
func TestKillDuringReshard(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	j := create(t, dir, 2)
	cmd := startChild(t, "reshard", dir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ss, err := j.Shards(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) > 30 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(7 * time.Millisecond) // land somewhere inside a change or an append
	j2 := killAndReopen(t, cmd, dir)
	ss, err := j2.Shards(ctx)
	if err != nil {
		t.Fatalf("Shards after kill -9 during resharding: %v", err)
	}
	if len(ss) < 30 {
		t.Fatalf("the child made %d shards before it was killed, want more than 30", len(ss))
	}
	open := 0
	for _, s := range ss {
		if !s.Closed {
			open++
		}
	}
	if open != 2 && open != 3 { // after a merge, or after a split
		t.Fatalf("%d open shards after kill -9 during resharding, want 2 or 3: %+v", open, ss)
	}
	events := 0
	for _, s := range ss {
		events += len(drainShard(t, j2, s))
	}
	if events%100 != 0 {
		t.Fatalf("%d events visible: not whole appends of 100", events)
	}
	pos := appendKeys(t, j2, "after", 3)
	if sh := shardsByID(t, j2)[pos[0].ShardID]; sh.Closed {
		t.Fatalf("an append after the kill went to the closed shard %s", pos[0].ShardID)
	}
	t.Logf("%d shards and %d events after kill -9 during resharding", len(ss), events)
}

// drainShard reads s from its start: a closed shard to ErrShardEnded (an empty read before it
// fails t), an open one to its head.
func drainShard(t *testing.T, j *Journal, s source.Shard) []source.Event {
	t.Helper()
	ctx := context.Background()
	r, err := j.Open(ctx, s.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []source.Event
	for {
		b, err := r.Read(ctx, 1000, 0)
		if errors.Is(err, source.ErrShardEnded) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Events) == 0 {
			if s.Closed {
				t.Fatalf("closed shard %s: an empty read before its end", s.ID)
			}
			return out
		}
		out = append(out, b.Events...)
	}
}
