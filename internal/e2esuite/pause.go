package e2esuite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/sqlitefile"
	"github.com/projhost/projhost/local"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
)

// writeLocker is implemented by a Store whose files a paused worker can keep locked (the
// embedded store: SQLite lets one process at a time write a file).
type writeLocker interface {
	// WriteLocked reports whether another process holds the write lock of the read-model
	// database now.
	WriteLocked(t *testing.T) bool
}

// WriteLocked tries to take projhost.db's write lock without waiting (busy timeout 1 ms).
func (s *embedded) WriteLocked(t *testing.T) bool {
	t.Helper()
	db, err := sqlitefile.Open(filepath.Join(s.dir, local.FileName), time.Millisecond, false)
	if err != nil {
		t.Fatalf("opening the embedded store to probe its lock: %v", err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	if sqlitefile.IsBusy(err) {
		return true
	}
	if err != nil {
		t.Fatalf("probing the write lock: %v", err)
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	return false
}

// busyTimeout is the workers' --busy-timeout.
const busyTimeout = 500 * time.Millisecond

// maxTries bounds the SIGSTOPs of one pause that look for the write lock held.
const maxTries = 100

// statusBound is how fast `projhost status` must answer while a worker is paused (issue 8: a
// paused worker holding the embedded store's write lock made it fail after 5 s).
const statusBound = time.Second

// testPausedTenTimes: on a store whose files a paused worker can keep locked (the embedded
// store; skipped elsewhere), two workers, events flowing; ten times, one of them (in turn) is
// stopped with SIGSTOP at a random point. The stop is repeated (SIGCONT, a random wait,
// SIGSTOP) until the worker is caught holding the read models' write lock, up to maxTries
// times. While it is stopped `projhost status` answers within statusBound, the other worker
// loses none of its leases (from its trace) and takes all of the stopped one's once their
// lease duration has passed (a stop holding the lock lasts past several busy timeouts more:
// the other's commits and cursor claims fail meanwhile and are retried); then the stopped one
// continues and the two balance again. Finally every event is applied exactly once
// (Env.Finish).
func testPausedTenTimes(t *testing.T, e *Env) {
	locker, ok := e.Store.(writeLocker)
	if !ok {
		// A paused worker holds nothing of a store served over the network: testPausedWorker
		// covers it there.
		t.Skip("the store has no write lock a paused worker could hold")
	}
	fs := flights(t)
	e.Create(4)
	e.Append(fs[:2000])
	// Commits of a few hundred documents, several a second: write transactions to be stopped
	// inside.
	// A busy timeout well below the pause: the running worker's commits and cursor claims fail
	// with ErrBusy several times while the lock is held, and must be retried, not charged to
	// its leases.
	spec := Spec{Flags: []string{"--lease-duration", "2s", "--batch-size", "100", "--cursor-every-events", "400", "--cursor-every", "150ms",
		"--busy-timeout", busyTimeout.String()}}
	ws := []*Worker{e.Start("a", spec), e.Start("b", spec)}
	balanced := func(m map[string]int) bool { return m["a"] == 2 && m["b"] == 2 }
	e.WaitOwners("2/2", time.Minute, balanced)
	appended := e.AppendChunks(fs[2000:], 80, 500*time.Millisecond)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 8))
	locked, slowest := 0, time.Duration(0)
	for i := range 10 {
		victim, other := ws[i%2], ws[1-i%2]
		time.Sleep(time.Duration(100+rng.IntN(900)) * time.Millisecond)
		signal(t, victim, syscall.SIGSTOP)
		holds := false
		for try := 0; try < maxTries; try++ {
			if holds = locker.WriteLocked(t); holds {
				locked++
				break
			}
			signal(t, victim, syscall.SIGCONT)
			time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
			signal(t, victim, syscall.SIGSTOP)
		}
		// From here on the victim writes nothing. In the windows between the stops above it ran
		// and could steal from the other (balancing): the other then loses those leases to
		// its writes ("renewal conflicted" / "written by another worker"), possibly only after
		// this mark. Those are the victim's doing, not the other's own bookkeeping; every other
		// loss after the mark (not renewed in time, late renewal) fails the case.
		mark := len(other.Records(t))
		start := time.Now()
		st := e.Status()
		took := time.Since(start)
		slowest = max(slowest, took)
		if took > statusBound || len(st) != 4 {
			t.Fatalf("pause %d: status took %s (bound %s) and listed %d shards", i+1, took, statusBound, len(st))
		}
		e.WaitOwners(fmt.Sprintf("pause %d: %s holds 4", i+1, other.ID), time.Minute, func(m map[string]int) bool { return m[other.ID] == 4 })
		if holds {
			// Claims of the shards taken wait for the lock: hold it past several busy timeouts.
			time.Sleep(4 * busyTimeout)
		}
		e.Eventually(fmt.Sprintf("pause %d: %s's trace shows 4 live acquisitions", i+1, other.ID), time.Minute, func() (bool, string) {
			open := live(other.Records(t))
			return len(open) == 4, fmt.Sprint(len(open))
		})
		lost := Where(other.Records(t)[mark:], func(r projection.TraceRecord) bool {
			return r.Event == "lease" && r.Kind == string(projection.LeaseLost) &&
				!strings.HasPrefix(r.Error, shardmap.WhyConflict) && !strings.HasPrefix(r.Error, shardmap.WhyWritten)
		})
		if len(lost) > 0 {
			t.Fatalf("pause %d (%s stopped, write lock held: %v): %s lost %d leases: %s", i+1, victim.ID, holds, other.ID, len(lost), describe(lost))
		}
		signal(t, victim, syscall.SIGCONT)
		e.WaitOwners(fmt.Sprintf("after pause %d: 2/2", i+1), time.Minute, balanced)
		t.Logf("pause %d: %s stopped (holding the write lock: %v); status in %s; %s took its shards, lost none", i+1, victim.ID, holds, took.Round(time.Millisecond), other.ID)
	}
	if locked == 0 {
		t.Errorf("no stop caught a worker holding the write lock: the case did not test what it is for")
	}
	t.Logf("%d of 10 stops held the write lock; slowest status %s", locked, slowest.Round(time.Millisecond))
	<-appended
	e.WaitCaughtUp(2 * time.Minute)
	for _, w := range ws {
		w.Stop(t)
	}
	e.Finish(fs)
}

func describe(rs []projection.TraceRecord) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s epoch %d: %s", r.Shard, r.Epoch, r.Error))
	}
	return strings.Join(out, "; ")
}
