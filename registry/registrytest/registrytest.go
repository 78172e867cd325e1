// Package registrytest is the conformance suite for registry.Store and registry.Blobs
// implementations.
//
// Run it from an implementation's tests:
//
//	func TestRegistryConformance(t *testing.T) {
//		registrytest.RunStore(t, func(t *testing.T) registry.Store { return openStore(t) })
//	}
//
// The factory is called once per subtest and may return the same backing store every time:
// each subtest uses its own fresh projection name (and fresh module bytes), so leftovers of
// other subtests or earlier runs never interfere. Write counts are low (about 60 conditional
// writes in all) so that it runs in seconds against a local DynamoDB-compatible server.
package registrytest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/suitekit"
	"github.com/projhost/projhost/registry"
)

// RunStore runs the Store suite.
func RunStore(t *testing.T, newStore func(t *testing.T) registry.Store) {
	t.Helper()
	suitekit.Run(t, newStore, []suitekit.Case[registry.Store]{
		{Name: "Empty", Fn: testEmpty},
		{Name: "AddNumbersAndFields", Fn: testAdd},
		{Name: "AddInvalid", Fn: testAddInvalid},
		{Name: "Isolation", Fn: testIsolation},
		{Name: "Activate", Fn: testActivate},
		{Name: "ActivateConflict", Fn: testActivateConflict},
		{Name: "ActivateUnknownVersion", Fn: testActivateUnknown},
		{Name: "RaceAdd", Fn: testRaceAdd},
		{Name: "RaceActivate", Fn: testRaceActivate},
		{Name: "ShardVersions", Fn: testShardVersions},
	})
}

// RunBlobs runs the Blobs suite.
func RunBlobs(t *testing.T, newBlobs func(t *testing.T) registry.Blobs) {
	t.Helper()
	suitekit.Run(t, newBlobs, []suitekit.Case[registry.Blobs]{
		{Name: "PutGet", Fn: testPutGet},
		{Name: "PutTwice", Fn: testPutTwice},
		{Name: "PutWrongSum", Fn: testPutWrongSum},
		{Name: "GetMissing", Fn: testGetMissing},
		{Name: "BadSum", Fn: testBadSum},
		{Name: "RacePut", Fn: testRacePut},
	})
}

func projection(t *testing.T) string { return suitekit.Name(t, "regtest") }

// version returns a valid version of proj for fresh random bytes of size n.
func version(proj string, n int, note string) registry.Version {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return registry.Version{Projection: proj, SHA256: registry.Sum(b), Size: int64(n), ABI: 1,
		UploadedMs: time.Now().UnixMilli(), Note: note}
}

func mustAdd(t *testing.T, s registry.Store, v registry.Version) registry.Version {
	t.Helper()
	got, err := s.Add(suitekit.Context(t), v)
	if err != nil {
		t.Fatalf("Add(%+v): %v", v, err)
	}
	return got
}

func mustActive(t *testing.T, s registry.Store, proj string) registry.Active {
	t.Helper()
	a, err := s.Active(suitekit.Context(t), proj)
	if err != nil {
		t.Fatalf("Active(%q): %v", proj, err)
	}
	return a
}

func mustVersions(t *testing.T, s registry.Store, proj string) []registry.Version {
	t.Helper()
	vs, err := s.Versions(suitekit.Context(t), proj)
	if err != nil {
		t.Fatalf("Versions(%q): %v", proj, err)
	}
	return vs
}

func testEmpty(t *testing.T, s registry.Store) {
	proj := projection(t)
	if vs := mustVersions(t, s, proj); len(vs) != 0 {
		t.Fatalf("Versions of a new projection = %+v, want none", vs)
	}
	if a := mustActive(t, s, proj); a != (registry.Active{Projection: proj}) {
		t.Fatalf("Active of a new projection = %+v, want version 0, counter 0", a)
	}
}

func testAdd(t *testing.T, s registry.Store) {
	proj := projection(t)
	var want []registry.Version
	for i, note := range []string{"first", "", "third: ünïcode"} {
		v := version(proj, 100+i, note)
		got := mustAdd(t, s, v)
		v.Number = int64(i + 1)
		if got != v {
			t.Fatalf("Add #%d returned %+v, want %+v", i+1, got, v)
		}
		want = append(want, v)
	}
	if got := mustVersions(t, s, proj); !slices.Equal(got, want) {
		t.Fatalf("Versions = %+v, want %+v", got, want)
	}
	// The same bytes again: a new version with the same SHA-256.
	again := want[0]
	again.Number, again.Note = 0, "again"
	if got := mustAdd(t, s, again); got.Number != 4 || got.SHA256 != want[0].SHA256 {
		t.Fatalf("Add of the first version's bytes again = %+v, want number 4 with its SHA-256", got)
	}
}

func testAddInvalid(t *testing.T, s registry.Store) {
	proj := projection(t)
	ok := version(proj, 10, "")
	for _, tc := range []struct {
		name string
		edit func(v *registry.Version)
	}{
		{"no projection", func(v *registry.Version) { v.Projection = "" }},
		{"short sum", func(v *registry.Version) { v.SHA256 = v.SHA256[:63] }},
		{"upper-case sum", func(v *registry.Version) { v.SHA256 = "AB" + v.SHA256[2:] }},
		{"zero size", func(v *registry.Version) { v.Size = 0 }},
		{"no ABI", func(v *registry.Version) { v.ABI = 0 }},
		{"long note", func(v *registry.Version) { v.Note = string(make([]byte, registry.MaxNoteBytes+1)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ok
			tc.edit(&v)
			if _, err := s.Add(suitekit.Context(t), v); !errors.Is(err, registry.ErrInvalid) {
				t.Fatalf("Add(%s) = %v, want ErrInvalid", tc.name, err)
			}
		})
	}
	if vs := mustVersions(t, s, proj); len(vs) != 0 {
		t.Fatalf("invalid Adds stored %+v", vs)
	}
}

func testIsolation(t *testing.T, s registry.Store) {
	a, b := projection(t), projection(t)+"-b"
	mustAdd(t, s, version(a, 10, ""))
	mustAdd(t, s, version(a, 11, ""))
	if got := mustAdd(t, s, version(b, 12, "")); got.Number != 1 {
		t.Fatalf("first version of %s numbered %d, want 1 (numbers are per projection)", b, got.Number)
	}
	if _, err := s.Activate(suitekit.Context(t), a, 2, 0); err != nil {
		t.Fatal(err)
	}
	if act := mustActive(t, s, b); act.Version != 0 {
		t.Fatalf("activating %s changed %s: %+v", a, b, act)
	}
	if vs := mustVersions(t, s, b); len(vs) != 1 {
		t.Fatalf("%s lists %d versions, want 1", b, len(vs))
	}
}

func testActivate(t *testing.T, s registry.Store) {
	proj := projection(t)
	ctx := suitekit.Context(t)
	for i := 0; i < 3; i++ {
		mustAdd(t, s, version(proj, 10+i, ""))
	}
	before := time.Now().UnixMilli()
	a, err := s.Activate(ctx, proj, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Projection != proj || a.Version != 2 || a.Previous != 0 || a.Counter != 1 || a.ChangedMs < before-1000 {
		t.Fatalf("first Activate = %+v, want version 2, previous 0, counter 1, changed now", a)
	}
	if got := mustActive(t, s, proj); got != a {
		t.Fatalf("Active = %+v, want what Activate returned: %+v", got, a)
	}
	b, err := s.Activate(ctx, proj, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b.Version != 3 || b.Previous != 2 || b.Counter != 2 {
		t.Fatalf("second Activate = %+v, want version 3, previous 2, counter 2", b)
	}
	// Activating the active version again is a change too (the counter moves).
	c, err := s.Activate(ctx, proj, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != 3 || c.Previous != 3 || c.Counter != 3 {
		t.Fatalf("Activate of the active version = %+v, want version 3, previous 3, counter 3", c)
	}
}

func testActivateConflict(t *testing.T, s registry.Store) {
	proj := projection(t)
	ctx := suitekit.Context(t)
	mustAdd(t, s, version(proj, 10, ""))
	mustAdd(t, s, version(proj, 11, ""))
	first, err := s.Activate(ctx, proj, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, expect := range []int64{0, 2, 7} {
		_, err := s.Activate(ctx, proj, 2, expect)
		var ce *registry.ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, registry.ErrConflict) {
			t.Fatalf("Activate with counter %d (stored 1) = %v, want a *ConflictError", expect, err)
		}
		if ce.Stored != first {
			t.Fatalf("ConflictError.Stored = %+v, want %+v", ce.Stored, first)
		}
	}
	if got := mustActive(t, s, proj); got != first {
		t.Fatalf("after refused Activates the pointer is %+v, want %+v", got, first)
	}
}

func testActivateUnknown(t *testing.T, s registry.Store) {
	proj := projection(t)
	ctx := suitekit.Context(t)
	if _, err := s.Activate(ctx, proj, 1, 0); !errors.Is(err, registry.ErrNoVersion) {
		t.Fatalf("Activate(1) with no version = %v, want ErrNoVersion", err)
	}
	mustAdd(t, s, version(proj, 10, ""))
	for _, n := range []int64{0, -1, 2} {
		if _, err := s.Activate(ctx, proj, n, 0); !errors.Is(err, registry.ErrNoVersion) {
			t.Fatalf("Activate(%d) with version 1 only = %v, want ErrNoVersion", n, err)
		}
	}
	if got := mustActive(t, s, proj); got.Version != 0 || got.Counter != 0 {
		t.Fatalf("refused Activates changed the pointer: %+v", got)
	}
}

func testRaceAdd(t *testing.T, s registry.Store) {
	proj := projection(t)
	ctx := suitekit.Context(t)
	const n = 6
	got := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.Add(ctx, version(proj, 20+i, fmt.Sprint(i)))
			got[i], errs[i] = v.Number, err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Adds: %v", err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("numbers of %d concurrent Adds = %v, want 1..%d once each", n, got, n)
	}
	vs := mustVersions(t, s, proj)
	if len(vs) != n {
		t.Fatalf("%d versions listed after %d Adds", len(vs), n)
	}
	for _, v := range vs {
		if v.Size != 20+int64(mustAtoi(t, v.Note)) {
			t.Fatalf("version %d holds another Add's fields: %+v", v.Number, v)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("note %q: %v", s, err)
	}
	return n
}

func testRaceActivate(t *testing.T, s registry.Store) {
	proj := projection(t)
	ctx := suitekit.Context(t)
	const n = 5
	for i := range n {
		mustAdd(t, s, version(proj, 10+i, ""))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []int64
	var other []error
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := s.Activate(ctx, proj, int64(i+1), 0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, a.Version)
			case !errors.Is(err, registry.ErrConflict):
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("concurrent Activates failed otherwise than with ErrConflict: %v", other)
	}
	if len(won) != 1 {
		t.Fatalf("%d of %d concurrent Activates from counter 0 succeeded (versions %v), want exactly 1", len(won), n, won)
	}
	if a := mustActive(t, s, proj); a.Version != won[0] || a.Counter != 1 {
		t.Fatalf("pointer %+v, want the winner's version %d with counter 1", a, won[0])
	}
}

func randomModule(n int) ([]byte, string) {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b, registry.Sum(b)
}

func testPutGet(t *testing.T, s registry.Blobs) {
	ctx := suitekit.Context(t)
	for _, n := range []int{1, 1000, 3 << 20} {
		b, sum := randomModule(n)
		if err := s.Put(ctx, sum, b); err != nil {
			t.Fatalf("Put(%d bytes): %v", n, err)
		}
		got, err := s.Get(ctx, sum)
		if err != nil {
			t.Fatalf("Get(%d bytes): %v", n, err)
		}
		if !slices.Equal(got, b) {
			t.Fatalf("Get returned %d bytes that differ from the %d put", len(got), n)
		}
	}
}

func testPutTwice(t *testing.T, s registry.Blobs) {
	ctx := suitekit.Context(t)
	b, sum := randomModule(500)
	for i := 0; i < 2; i++ {
		if err := s.Put(ctx, sum, b); err != nil {
			t.Fatalf("Put #%d: %v", i+1, err)
		}
	}
	if got, err := s.Get(ctx, sum); err != nil || !slices.Equal(got, b) {
		t.Fatalf("Get after two Puts: %d bytes, %v", len(got), err)
	}
}

func testPutWrongSum(t *testing.T, s registry.Blobs) {
	ctx := suitekit.Context(t)
	b, _ := randomModule(100)
	_, other := randomModule(100)
	if err := s.Put(ctx, other, b); !errors.Is(err, registry.ErrCorrupt) {
		t.Fatalf("Put under another SHA-256 = %v, want ErrCorrupt", err)
	}
	if _, err := s.Get(ctx, other); !errors.Is(err, registry.ErrNoModule) {
		t.Fatalf("Get after a refused Put = %v, want ErrNoModule", err)
	}
}

func testGetMissing(t *testing.T, s registry.Blobs) {
	_, sum := randomModule(10)
	if _, err := s.Get(suitekit.Context(t), sum); !errors.Is(err, registry.ErrNoModule) {
		t.Fatalf("Get of bytes never put = %v, want ErrNoModule", err)
	}
}

func testBadSum(t *testing.T, s registry.Blobs) {
	ctx := suitekit.Context(t)
	for _, sum := range []string{"", "../../etc/passwd", "abc", "G" + string(make([]byte, 63))} {
		if _, err := s.Get(ctx, sum); !errors.Is(err, registry.ErrInvalid) {
			t.Fatalf("Get(%q) = %v, want ErrInvalid", sum, err)
		}
		if err := s.Put(ctx, sum, []byte("x")); !errors.Is(err, registry.ErrInvalid) {
			t.Fatalf("Put(%q) = %v, want ErrInvalid", sum, err)
		}
	}
}

func testRacePut(t *testing.T, s registry.Blobs) {
	ctx := suitekit.Context(t)
	b, sum := randomModule(1 << 20)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Put(ctx, sum, b) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Puts of the same bytes: %v", err)
	}
	if got, err := s.Get(ctx, sum); err != nil || !slices.Equal(got, b) {
		t.Fatalf("Get after concurrent Puts: %d bytes, %v", len(got), err)
	}
}

func testShardVersions(t *testing.T, s registry.Store) {
	proj := projection(t)
	ctx := suitekit.Context(t)
	shards := func() []registry.ShardVersion {
		t.Helper()
		got, err := s.Shards(ctx, proj)
		if err != nil {
			t.Fatalf("Shards: %v", err)
		}
		return got
	}
	if got := shards(); len(got) != 0 {
		t.Fatalf("Shards of a new projection = %+v", got)
	}
	a := registry.ShardVersion{Projection: proj, ShardID: "shardId-000000000001", Epoch: 3, Version: 1, Seq: "", ChangedMs: 10}
	b := registry.ShardVersion{Projection: proj, ShardID: "shardId-000000000000", Epoch: 1, Version: 2, Seq: "41", ChangedMs: 11}
	for _, r := range []registry.ShardVersion{a, b, a} { // a twice: a retried write changes nothing
		if err := s.SetShard(ctx, r); err != nil {
			t.Fatalf("SetShard(%+v): %v", r, err)
		}
	}
	if got := shards(); !slices.Equal(got, []registry.ShardVersion{b, a}) {
		t.Fatalf("Shards = %+v, want by shard id %+v", got, []registry.ShardVersion{b, a})
	}
	// The same epoch replaces; an older one is dropped without error; a newer one replaces.
	a2 := a
	a2.Version, a2.Seq, a2.ChangedMs = 2, "100", 12
	zombie := a
	zombie.Epoch, zombie.Version, zombie.Seq = 2, 9, "999"
	a3 := a2
	a3.Epoch, a3.Version, a3.Seq = 4, 1, "150"
	for _, step := range []struct {
		write, want registry.ShardVersion
	}{{a2, a2}, {zombie, a2}, {a3, a3}} {
		if err := s.SetShard(ctx, step.write); err != nil {
			t.Fatalf("SetShard(%+v): %v", step.write, err)
		}
		if got := shards(); len(got) != 2 || got[1] != step.want {
			t.Fatalf("after SetShard(%+v): %+v, want %+v stored", step.write, got, step.want)
		}
	}
}
