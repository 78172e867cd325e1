package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/shardmap"
)

// Child processes: the test binary re-runs itself with LOCAL_TEST_CHILD="<dir> <proc>". Each
// takes the shared lease 30 times (read, conditional update, retry on conflict) and commits 20
// batches for its own shard, printing how many lease updates it won.
func TestMain(m *testing.M) {
	if args := os.Getenv("LOCAL_TEST_CHILD"); args != "" {
		if err := child(strings.Fields(args)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func child(args []string) error {
	ctx := context.Background()
	s, err := Open(args[0])
	if err != nil {
		return err
	}
	defer s.Close()
	proc := args[1]
	won := 0
	for won < 30 {
		ls, err := s.Leases().List(ctx, "mp")
		if err != nil {
			return err
		}
		l := ls[0]
		l.Owner = "proc" + proc
		if _, err := s.Leases().Update(ctx, l); errors.Is(err, shardmap.ErrConflict) {
			continue
		} else if err != nil {
			return err
		}
		won++
	}
	shard := "shard-" + proc
	if _, err := s.Cursors().Claim(ctx, "mp", shard, 1); err != nil {
		return err
	}
	for i := 1; i <= 20; i++ {
		w := readmodel.Write{Projection: "mp", ShardID: shard, Epoch: 1, Seq: strconv.Itoa(i), Mutations: []readmodel.Mutation{
			{Collection: "counts", Key: shard, Doc: fmt.Appendf(nil, `{"n":%d}`, i)},
			{Collection: "items", Key: fmt.Sprintf("%s-%02d", shard, i), Doc: []byte(`{"ok":true}`)},
		}}
		if err := s.ReadModels().Commit(ctx, w); err != nil {
			return err
		}
	}
	fmt.Println(won)
	return nil
}

func TestMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Leases().Create(ctx, shardmap.Lease{Projection: "mp", ShardID: "s", State: shardmap.StateActive}); err != nil {
		t.Fatal(err)
	}
	const procs = 3
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for p := 0; p < procs; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("LOCAL_TEST_CHILD=%s %d", dir, p))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		if got := strings.TrimSpace(outs[i].String()); got != "30" {
			t.Fatalf("child %d won %q lease updates, want 30", i, got)
		}
	}
	ls, err := s.Leases().List(ctx, "mp")
	if err != nil || ls[0].Counter != procs*30 {
		t.Fatalf("lease = %+v, %v; want counter %d (every conditional update applied once)", ls, err, procs*30)
	}
	for p := 0; p < procs; p++ {
		shard := fmt.Sprintf("shard-%d", p)
		c, err := s.Cursors().Get(ctx, "mp", shard)
		if err != nil || c.Seq != "20" {
			t.Fatalf("cursor of %s = %+v, %v; want 20", shard, c, err)
		}
	}
	items, err := s.ReadModels().Scan(ctx, "mp", "items")
	if err != nil || len(items) != procs*20 {
		t.Fatalf("items: %d, %v; want %d", len(items), err, procs*20)
	}
}

// TestQueryWithSQL checks the documented way to query read models.
func TestQueryWithSQL(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	err := s.ReadModels().Apply(ctx, readmodel.Write{Projection: "flights", ShardID: "s0", Epoch: 1, Seq: "3", Mutations: []readmodel.Mutation{
		{Collection: "airports", Key: "DTW", Doc: []byte(`{"count":3,"delay":{"max":66}}`)},
		{Collection: "airports", Key: "LAS", Doc: []byte(`{"count":7,"delay":{"max":12}}`)},
		{Collection: "routes", Key: "DTW-LAS", Doc: []byte(`{"count":100}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT key, json_extract(doc, '$.count') AS n, json_extract(doc, '$.delay.max'),
		shard_id, seq FROM docs WHERE projection = 'flights' AND collection = 'airports' ORDER BY n DESC`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var key, shard, seq string
		var n, mx int
		if err := rows.Scan(&key, &n, &mx, &shard, &seq); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s:%d:%d:%s:%s", key, n, mx, shard, seq))
	}
	if want := "LAS:7:12:s0:3 DTW:3:66:s0:3"; strings.Join(got, " ") != want {
		t.Fatalf("query = %v, want %s", got, want)
	}
}

func TestInvalidWrites(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	rm := s.ReadModels()
	for _, tt := range []struct {
		name string
		w    readmodel.Write
	}{
		{"empty seq", readmodel.Write{Projection: "p", ShardID: "s", Epoch: 1, Seq: ""}},
		{"non-decimal seq", readmodel.Write{Projection: "p", ShardID: "s", Epoch: 1, Seq: "12a"}},
		{"empty key", readmodel.Write{Projection: "p", ShardID: "s", Epoch: 1, Seq: "1",
			Mutations: []readmodel.Mutation{{Collection: "c", Key: "", Doc: []byte(`{}`)}}}},
		{"array doc", readmodel.Write{Projection: "p", ShardID: "s", Epoch: 1, Seq: "1",
			Mutations: []readmodel.Mutation{{Collection: "c", Key: "k", Doc: []byte(`[1]`)}}}},
		{"broken doc", readmodel.Write{Projection: "p", ShardID: "s", Epoch: 1, Seq: "1",
			Mutations: []readmodel.Mutation{{Collection: "c", Key: "ok", Doc: []byte(`{}`)}, {Collection: "c", Key: "k", Doc: []byte(`{"a":`)}}}},
	} {
		if err := rm.Apply(ctx, tt.w); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Apply err = %v, want ErrInvalid", tt.name, err)
		}
		if err := rm.Commit(ctx, tt.w); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Commit err = %v, want ErrInvalid", tt.name, err)
		}
	}
	if docs, _ := rm.Scan(ctx, "p", ""); len(docs) != 0 {
		t.Fatalf("invalid writes stored %d documents", len(docs))
	}
	if err := s.Cursors().Save(ctx, "p", "s", 0, "1.5"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Save of a non-decimal seq: %v", err)
	}
}

func TestBusy(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, WithBusyTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Another "process" holds the write lock.
	other, err := sql.Open("sqlite", "file:"+s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Cursors().Claim(context.Background(), "p", "s", 1)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("Claim while another connection holds the write lock: err = %v, want ErrBusy", err)
	}
	// Reads still work (WAL).
	if _, err := s.Cursors().Get(context.Background(), "p", "s"); err != nil {
		t.Fatalf("Get during another writer's transaction: %v", err)
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cursors().Claim(context.Background(), "p", "s", 1); err != nil {
		t.Fatalf("Claim after the lock was released: %v", err)
	}
}

func TestSchemaVersion(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(dir); !errors.Is(err, ErrSchema) {
		t.Fatalf("Open of a newer schema: err = %v, want ErrSchema", err)
	}
}

func FuzzLeaseParents(f *testing.F) {
	f.Add("a", "b")
	f.Add("", "\x00\"\\")
	f.Add("shardId-000000000001", "é")
	s, err := Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	n := 0
	f.Fuzz(func(t *testing.T, p1, p2 string) {
		n++
		ctx := context.Background()
		l := shardmap.Lease{Projection: "fuzz", ShardID: fmt.Sprintf("s%06d", n), ParentIDs: []string{p1, p2}, State: shardmap.StateActive}
		if err := s.Leases().Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		ls, err := s.Leases().List(ctx, "fuzz")
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range ls {
			if got.ShardID == l.ShardID {
				if len(got.ParentIDs) != 2 || got.ParentIDs[0] != p1 || got.ParentIDs[1] != p2 {
					if !(strings.ToValidUTF8(p1, "\uFFFD") != p1 || strings.ToValidUTF8(p2, "\uFFFD") != p2) {
						t.Fatalf("parents %q round-tripped as %q", l.ParentIDs, got.ParentIDs)
					}
				}
				return
			}
		}
		t.Fatalf("lease %s not listed", l.ShardID)
	})
}

func TestLeasesProjections(t *testing.T) {
	st, err := Open(t.TempDir())
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	got, err := st.Leases().Projections(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	for _, p := range []string{"zeta", "alpha", "zeta"} {
		for _, sh := range []string{"s1", "s2"} {
			err := st.Leases().Create(ctx, shardmap.Lease{Projection: p, ShardID: sh, State: shardmap.StateActive})
			if err != nil {
				require.ErrorIs(t, err, shardmap.ErrExists)
			}
		}
	}
	got, err = st.Leases().Projections(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"alpha", "zeta"}, got)
}
