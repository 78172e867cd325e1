package journal

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/sqlitefile"
	"github.com/projhost/projhost/source"
)

// v2Schema is a schema version 2 journal (a row per event) of 2 created shards, shard 1 split
// into shards 2 and 3 after its 3 events: shard 0 holds 6 events appended at 1000 ms (1-3, of
// which 2 and 3 are 40,000 bytes: ChunkBytes holds one of them with event 1) and 2000 ms (4-6),
// shard 2 holds 4 and 5.
var v2Schema = `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE heads (shard INTEGER PRIMARY KEY, seq INTEGER NOT NULL);
CREATE TABLE shards (shard INTEGER PRIMARY KEY, parents TEXT NOT NULL, hash_start TEXT NOT NULL,
	hash_end TEXT NOT NULL, closed INTEGER NOT NULL, base INTEGER NOT NULL);
CREATE TABLE events (
	shard INTEGER NOT NULL, seq INTEGER NOT NULL, partition_key TEXT NOT NULL,
	arrival_ms INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (shard, seq)
) WITHOUT ROWID;
INSERT INTO meta VALUES ('shards', 'resharded'), ('created_shards', '2'), ('version', '2'), ('generation', '1');
INSERT INTO heads VALUES (0, 6), (1, 3), (2, 5), (3, 3);
INSERT INTO shards VALUES (0, '', '%s', '%s', 0, 0), (1, '', '%s', '%s', 1, 0),
	(2, '1', '%[3]s', '%[5]s', 0, 3), (3, '1', '%[6]s', '%[4]s', 0, 3);
INSERT INTO events VALUES
	(0, 1, 'a', 1000, 'e1'), (0, 2, 'a', 1000, '` + strings.Repeat("x", 40000) + `'),
	(0, 3, 'b', 1000, '` + strings.Repeat("y", 40000) + `'),
	(0, 4, 'a', 2000, 'e4'), (0, 5, 'c', 2000, ''), (0, 6, 'a', 2000, 'e6'),
	(1, 1, 'k', 500, 'p1'), (1, 2, 'k', 500, 'p2'), (1, 3, 'k', 600, 'p3'),
	(2, 4, 'k', 3000, 'c4'), (2, 5, 'k', 3000, 'c5');
`

type stored struct {
	seq, key, data string
	arrival        int64
}

// v2Events is what v2Schema holds, by shard index.
var v2Events = map[int][]stored{
	0: {{"1", "a", "e1", 1000}, {"2", "a", strings.Repeat("x", 40000), 1000}, {"3", "b", strings.Repeat("y", 40000), 1000},
		{"4", "a", "e4", 2000}, {"5", "c", "", 2000}, {"6", "a", "e6", 2000}},
	1: {{"1", "k", "p1", 500}, {"2", "k", "p2", 500}, {"3", "k", "p3", 600}},
	2: {{"4", "k", "c4", 3000}, {"5", "k", "c5", 3000}},
	3: nil,
}

// readAllShards reads every shard of j from its start, 2 events per read (so reads end inside
// chunks), checking that the closed shard 1 ends.
func readAllShards(t *testing.T, j *Journal) map[int][]stored {
	t.Helper()
	ctx := context.Background()
	out := map[int][]stored{}
	for s := range 4 {
		r, err := j.Open(ctx, ShardID(s), "")
		if err != nil {
			t.Fatal(err)
		}
		out[s] = nil
		for {
			b, err := r.Read(ctx, 2, 0)
			if errors.Is(err, source.ErrShardEnded) && s == 1 {
				break
			}
			if err != nil {
				t.Fatalf("shard %d: %v", s, err)
			}
			for _, e := range b.Events {
				out[s] = append(out[s], stored{e.Seq, e.PartitionKey, string(e.Data), e.ArrivalMs})
			}
			if len(b.Events) == 0 {
				if s == 1 {
					t.Fatal("the closed shard 1 read to its end did not end")
				}
				break
			}
		}
	}
	return out
}

// TestSchemaV2: a journal of schema version 2 reads read-only as it is, and a writable open
// moves its events to chunks in one transaction: same events, sequence numbers, arrival times,
// positions by time and heads; the events table is gone; appends continue the numbers.
func TestSchemaV2(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlitefile.Open(filepath.Join(dir, FileName), time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	s0, e0 := source.EvenHashKeyRange(0, 2)
	s1, e1 := source.EvenHashKeyRange(1, 2)
	at, _ := new(big.Int).SetString(s1, 10) // shard 1 split at its midpoint
	end, _ := new(big.Int).SetString(e1, 10)
	at.Add(at, new(big.Int).Rsh(new(big.Int).Sub(new(big.Int).Add(end, big.NewInt(1)), at), 1))
	if _, err := db.Exec(fmt.Sprintf(v2Schema, s0, e0, s1, e1, new(big.Int).Sub(at, big.NewInt(1)), at)); err != nil {
		t.Fatal(err)
	}
	db.Close()

	check := func(j *Journal) {
		t.Helper()
		got := readAllShards(t, j)
		for s, want := range v2Events {
			if len(got[s]) != len(want) {
				t.Fatalf("shard %d: %d events, want %d", s, len(got[s]), len(want))
			}
			for i := range want {
				if got[s][i] != want[i] {
					t.Fatalf("shard %d event %d = %.40v, want %.40v", s, i, got[s][i], want[i])
				}
			}
		}
		for _, c := range []struct {
			shard int
			ms    int64
			want  string
		}{{0, 0, ""}, {0, 1000, ""}, {0, 1001, "3"}, {0, 2000, "3"}, {0, 2001, "6"}, {2, 2999, "3"}, {2, 3001, "5"}} {
			if got, err := j.SeqBefore(ctx, ShardID(c.shard), time.UnixMilli(c.ms)); err != nil || got != c.want {
				t.Fatalf("SeqBefore(%d, %d ms) = %q, %v; want %q", c.shard, c.ms, got, err, c.want)
			}
		}
		tail, err := j.Tail(ctx, ShardID(0), 2)
		if err != nil || len(tail) != 2 || tail[0].Seq != "5" || string(tail[1].Data) != "e6" {
			t.Fatalf("Tail(0, 2) = %v, %v; want events 5 and 6", tail, err)
		}
	}
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	check(ro)
	ro.Close()

	j, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	check(j)
	var version string
	var tables, chunks0 int
	if err := j.db.QueryRow(`SELECT value FROM meta WHERE key = 'version'`).Scan(&version); err != nil || version != strconv.Itoa(schemaVersion) {
		t.Fatalf("version = %q, %v; want %d", version, err, schemaVersion)
	}
	if err := j.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'events'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("events tables after the upgrade: %d, %v; want 0", tables, err)
	}
	// Shard 0: events 1-2 (ChunkBytes holds no more), 3, then 4-6 (another arrival time).
	if err := j.db.QueryRow(`SELECT count(*) FROM chunks WHERE shard = 0`).Scan(&chunks0); err != nil || chunks0 != 3 {
		t.Fatalf("shard 0 has %d chunks, %v; want 3", chunks0, err)
	}
	pos := appendKeys(t, j, keyOn(t, 0, 2), 2)
	if pos[0].ShardID != ShardID(0) || pos[0].Seq != "7" || pos[1].Seq != "8" {
		t.Fatalf("appended at %+v, want shard 0 seq 7 and 8", pos)
	}
	ro, err = OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if h, err := ro.Head(ctx, ShardID(0)); err != nil || h != "8" {
		t.Fatalf("Head(0) read-only after the upgrade = %q, %v; want 8", h, err)
	}
}
