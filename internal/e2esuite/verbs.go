package e2esuite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/flightcheck"
)

// VerbCases are the management verbs' scenarios (projhost pause|resume|reset|rebuild), each
// with two running workers.
func VerbCases() []Case {
	return []Case{
		{Name: "pause and resume a shard and the projection", Fn: testPauseResume},
		{Name: "reset a shard to a sequence number", Fn: testResetSeq},
		{Name: "rebuild on a live stream", Fn: testRebuildLive},
	}
}

// RunVerbs runs VerbCases against b on the local journal.
func RunVerbs(t *testing.T, bin string, b Backend) {
	t.Helper()
	runCases(t, bin, b, Journal(), VerbCases())
}

// verbFlags: short leases and frequent cursor saves, so that the cases see the cursors move.
var verbFlags = []string{"--lease-duration", "2s", "--batch-size", "100", "--cursor-every-events", "200", "--cursor-every", "200ms"}

// waitLogged waits until a worker's log has a line with every one of parts.
func (e *Env) waitLogged(what string, ws []*Worker, parts ...string) {
	e.t.Helper()
	e.Eventually(what, time.Minute, func() (bool, string) {
		for _, w := range ws {
			for _, l := range lines(w.Stderr()) {
				ok := true
				for _, p := range parts {
					ok = ok && strings.Contains(l, p)
				}
				if ok {
					return true, ""
				}
			}
		}
		return false, "not logged yet"
	})
}

// testPauseResume: with two workers projecting, a paused shard's cursor stays where it was
// while the other shards project everything appended since; its lease stays held. Then the
// projection as a whole is paused (no cursor moves while flights are appended), resumed, and
// the read model ends exact.
func testPauseResume(t *testing.T, e *Env) {
	fs := flights(t)[:6000]
	e.Create(4)
	spec := Spec{Flags: verbFlags}
	w1, w2 := e.Start("w1", spec), e.Start("w2", spec)
	ws := []*Worker{w1, w2}
	e.WaitOwners("2/2", time.Minute, func(m map[string]int) bool { return m["w1"] == 2 && m["w2"] == 2 })
	e.Append(fs[:2000])
	e.WaitCaughtUp(time.Minute)

	paused := e.ShardAt(1)
	out := e.CLI("pause", "--name", Projection, "--shard", paused)
	if !strings.Contains(out, "paused "+Projection+" shard "+paused) {
		t.Fatalf("pause said %q", out)
	}
	e.waitLogged("the owner noticed the pause", ws, "shard paused", "shard="+paused)
	before := e.Cursors()[paused].Seq
	e.Append(fs[2000:4000])
	var others []string
	for _, id := range e.Shards() {
		if id != paused {
			others = append(others, id)
		}
	}
	e.Eventually("the other shards caught up", 2*time.Minute, func() (bool, string) {
		l := e.Lagging(others...)
		return len(l) == 0, strings.Join(l, ", ")
	})
	if got := e.Cursors()[paused].Seq; got != before {
		t.Fatalf("the paused shard %s moved from %s to %s", paused, before, got)
	}
	if lag := e.Lagging(paused); len(lag) != 1 {
		t.Fatalf("the paused shard should lag behind the appended flights: %v", lag)
	}
	if m := e.Owners(); m["w1"]+m["w2"] != 4 {
		t.Fatalf("leases while paused: %v; want all 4 held (the paused one too)", m)
	}
	t.Logf("shard %s paused at %s while the others caught up; owners %v", paused, before, e.Owners())

	// The whole projection: nothing moves, the paused shard stays paused after resume --shard.
	e.CLI("pause", "--name", Projection)
	e.Eventually("every owner paused", time.Minute, func() (bool, string) {
		for _, id := range others {
			if !containsLine(w1.Stderr()+w2.Stderr(), "shard paused", "shard="+id) {
				return false, "shard " + id + " not paused yet"
			}
		}
		return true, ""
	})
	frozen := e.Cursors()
	e.Append(fs[4000:])
	time.Sleep(3 * time.Second) // a window in which a worker that ignored the pause would move cursors
	for id, c := range e.Cursors() {
		if c.Seq != frozen[id].Seq {
			t.Fatalf("shard %s moved from %s to %s while the projection was paused", id, frozen[id].Seq, c.Seq)
		}
	}
	out = e.CLI("resume", "--name", Projection, "--shard", others[0])
	if !strings.Contains(out, "paused as a whole") {
		t.Fatalf("resume --shard of a paused projection said %q; want the note that it stays paused", out)
	}
	out = e.CLI("resume", "--name", Projection)
	if !strings.Contains(out, "unpaused "+Projection+"\n") || !strings.Contains(out, "unpaused "+Projection+" shard "+paused) {
		t.Fatalf("resume said %q", out)
	}
	e.WaitCaughtUp(2 * time.Minute)
	for _, w := range ws {
		w.Stop(t)
	}
	e.Finish(fs)
}

func containsLine(s string, parts ...string) bool {
	for _, l := range lines(s) {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// testResetSeq: with two workers projecting, one shard's cursor is reset to a sequence number
// below it; the shard projects again from there, and the read model ends as the flights plus
// the replayed ones of that shard (flightdelays counts: each replayed flight counts twice,
// exactly, so no replayed event is skipped and none is applied three times).
func testResetSeq(t *testing.T, e *Env) {
	fs := flights(t)[:4000]
	e.Create(4)
	spec := Spec{Flags: verbFlags}
	w1, w2 := e.Start("w1", spec), e.Start("w2", spec)
	e.WaitOwners("2/2", time.Minute, func(m map[string]int) bool { return m["w1"] == 2 && m["w2"] == 2 })
	e.Append(fs)
	e.WaitCaughtUp(2 * time.Minute)
	target := e.ShardAt(2)
	shard, seq := e.seqIndex(fs)
	n := 0
	for _, s := range shard {
		if s == target {
			n++
		}
	}
	to := fmt.Sprint(n / 3)
	out := e.CLI("reset", "--name", Projection, "--shard", target, "--to", to)
	if want := fmt.Sprintf("reset %s shard %s to %s", Projection, target, to); !strings.Contains(out, want) {
		t.Fatalf("reset said %q; want %q", out, want)
	}
	e.WaitCaughtUp(2 * time.Minute)
	for _, w := range []*Worker{w1, w2} {
		w.Stop(t)
	}
	want := append([]flightcheck.Flight(nil), fs...)
	replayed := 0
	for i, f := range fs {
		if shard[i] == target && cmpSeq(seq[i], to) > 0 {
			want = append(want, f)
			replayed++
		}
	}
	t.Logf("shard %s reset from %d to %s: %d flights replayed", target, n, to, replayed)
	e.CheckReadModel(want)
	if p, err := e.Stores().Cursors.Pauses(context.Background(), Projection); err != nil || p.Any() {
		t.Fatalf("pauses after the reset: %+v, %v; want none left", p, err)
	}
}

// testRebuildLive: two workers project while flights are appended in chunks; the projection is
// rebuilt half-way; once everything is appended and projected again the read model is exact.
func testRebuildLive(t *testing.T, e *Env) {
	fs := flights(t)[:6000]
	e.Create(4)
	spec := Spec{Flags: verbFlags}
	w1, w2 := e.Start("w1", spec), e.Start("w2", spec)
	e.WaitOwners("2/2", time.Minute, func(m map[string]int) bool { return m["w1"] == 2 && m["w2"] == 2 })
	done := e.AppendChunks(fs, 12, 300*time.Millisecond)
	e.Eventually("some flights projected", time.Minute, func() (bool, string) {
		for _, c := range e.Cursors() {
			if c.Seq != "" {
				return true, ""
			}
		}
		return false, "no cursor yet"
	})
	out := e.CLI("rebuild", "--name", Projection)
	if !strings.Contains(out, "rebuilding "+Projection) {
		t.Fatalf("rebuild said %q", out)
	}
	<-done
	e.WaitCaughtUp(2 * time.Minute)
	for _, w := range []*Worker{w1, w2} {
		w.Stop(t)
	}
	e.CheckReadModel(fs)
	t.Logf("read model exact after a rebuild on a live stream (%d flights)", len(fs))
}
