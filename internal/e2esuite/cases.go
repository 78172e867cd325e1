package e2esuite

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/tcpproxy"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
)

// bulkFlags are the `run` flags of the cases that project much and break nothing: few cursor
// saves, so that a DynamoDB store is not the bottleneck.
var bulkFlags = []string{"--cursor-every", "5s", "--cursor-every-events", "20000"}

// failureFlags are the `run` flags of the failure cases: short leases, cursor saves often
// enough for many fencing points and few enough for a local DynamoDB server.
var failureFlags = []string{"--lease-duration", "2s", "--batch-size", "100", "--cursor-every-events", "500", "--cursor-every", "300ms"}

func flights(t *testing.T) []flightcheck.Flight {
	return flightcheck.Load(t, flightcheck.DataPath("flights-20k.json"))
}

func flags(extra ...string) []string { return append(slices.Clone(failureFlags), extra...) }

// live returns the acquisitions of rs (one worker's records) not ended within rs.
func live(rs []projection.TraceRecord) map[acquisition]bool {
	out := map[acquisition]bool{}
	for _, r := range rs {
		if r.Event != "lease" {
			continue
		}
		k := acquisition{r.Shard, r.Epoch}
		if r.Kind == string(projection.LeaseAcquired) {
			out[k] = true
		} else {
			delete(out, k)
		}
	}
	return out
}

// endsOf returns how each acquisition in keys ended in rs ("" = not ended), with the reason.
func endsOf(rs []projection.TraceRecord, keys map[acquisition]bool) map[acquisition]projection.TraceRecord {
	out := map[acquisition]projection.TraceRecord{}
	for _, r := range rs {
		k := acquisition{r.Shard, r.Epoch}
		if r.Event == "lease" && r.Kind != string(projection.LeaseAcquired) && keys[k] {
			out[k] = r
		}
	}
	return out
}

// untilCaughtUp: one `run --until-caught-up` projects flights-20k on 4 shards and exits 0
// with every lease released at the journal's head.
func untilCaughtUp(handler string) func(t *testing.T, e *Env) {
	return func(t *testing.T, e *Env) {
		fs := flights(t)
		e.Create(4)
		e.Append(fs)
		w := e.Start("solo", Spec{Handler: handler, Flags: append([]string{"--until-caught-up"}, bulkFlags...)})
		if err := w.Wait(t, 5*time.Minute); err != nil {
			t.Fatalf("run --until-caught-up: %v", err)
		}
		heads := e.Heads()
		for id, r := range e.Status() {
			if r.LagEvents != 0 || r.Cursor != heads[id] || r.Owner != "" || r.Stopped != "" {
				t.Errorf("status of %s after exit: %+v; want the cursor at the head %s, no owner", id, r, heads[id])
			}
		}
		rel := Where(w.Records(t), Is("lease", string(projection.LeaseReleased)))
		if len(rel) != 4 {
			t.Fatalf("%d leases released at exit, want 4: %+v", len(rel), rel)
		}
		for _, r := range rel {
			if r.Seq != heads[r.Shard] {
				t.Errorf("%s released at %q, want the head %q", r.Shard, r.Seq, heads[r.Shard])
			}
		}
		e.Finish(fs)
	}
}

// testBalance: two workers split 16 shards 8/8; a third one joins and each ends up with 5 or 6;
// the three project flights-20k; graceful stops release every lease.
func testBalance(t *testing.T, e *Env) {
	fs := flights(t)
	e.Create(16)
	spec := Spec{Flags: append([]string{"--lease-duration", "2s"}, bulkFlags...)}
	w1, w2 := e.Start("w1", spec), e.Start("w2", spec)
	e.WaitOwners("8/8", time.Minute, func(m map[string]int) bool { return len(m) == 2 && m["w1"] == 8 && m["w2"] == 8 })
	w3 := e.Start("w3", spec)
	m := e.WaitOwners("balanced 5-6 each", time.Minute, func(m map[string]int) bool {
		for _, id := range []string{"w1", "w2", "w3"} {
			if m[id] < 5 || m[id] > 6 {
				return false
			}
		}
		return len(m) == 3
	})
	t.Logf("balanced: %v", m)
	start := time.Now()
	e.Append(fs)
	e.WaitCaughtUp(3 * time.Minute)
	t.Logf("20,000 events projected by 3 workers in %s", time.Since(start).Round(100*time.Millisecond))
	for _, w := range []*Worker{w1, w2, w3} {
		w.Stop(t)
		if len(Where(w.Records(t), Is("flush"))) == 0 {
			t.Errorf("worker %s saved no cursor", w.ID)
		}
	}
	for id, r := range e.Status() {
		if r.Owner != "" || r.LagEvents != 0 {
			t.Errorf("status of %s after the stops: %+v; want no owner, no lag", id, r)
		}
	}
	e.Finish(fs)
	// query reads the same read model through the CLI.
	out := e.CLI("query", "--name", Projection, "--collection", "airports", "--key", "ORD")
	var line struct {
		Collection, Key string
		Doc             map[string]int64
	}
	mustJSON(t, out, &line)
	if want := flightcheck.Expected(fs)["airports/ORD"]; line.Key != "ORD" || fmt.Sprint(line.Doc) != fmt.Sprint(want) {
		t.Fatalf("query airports/ORD: %s; want %v", out, want)
	}
}

// testKill9Twice: three workers while events are appended; one is killed with SIGKILL and
// started again under the same id, later another one is killed for good.
func testKill9Twice(t *testing.T, e *Env) {
	fs := flights(t)[:10000]
	e.Create(8)
	spec := Spec{Flags: flags()}
	w1, w2, w3 := e.Start("w1", spec), e.Start("w2", spec), e.Start("w3", spec)
	appended := e.AppendChunks(fs, 10, 300*time.Millisecond)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	pause := func(min, spread int) { time.Sleep(time.Duration(min+rng.IntN(spread)) * time.Millisecond) }
	pause(1000, 1000)
	w1.Kill(t)
	t.Log("killed w1")
	pause(500, 1000)
	w1b := e.Start("w1", spec) // same id: its old leases must expire like anyone's
	pause(1000, 1500)
	w2.Kill(t)
	t.Log("killed w2")
	<-appended
	e.WaitCaughtUp(3 * time.Minute)
	w1b.Stop(t)
	w3.Stop(t)
	e.Finish(fs)
}

// testPausedWorker: a worker stopped with SIGSTOP past its lease duration, holding handled but
// unsaved events, loses its shards to another worker; after SIGCONT it saves nothing with the
// epochs it held and reports each of those leases lost.
func testPausedWorker(t *testing.T, e *Env) {
	fs := flights(t)
	e.Create(4)
	e.Append(fs[:5000])
	spec := Spec{Flags: []string{"--lease-duration", "2s", "--batch-size", "50", "--cursor-every", "3s", "--cursor-every-events", "100000"}}
	a := e.Start("a", spec)
	e.WaitOwners("a holds 4", time.Minute, func(m map[string]int) bool { return m["a"] == 4 })
	e.WaitCaughtUp(2 * time.Minute)
	mark := len(a.Records(t))
	e.Append(fs[5000:10000])
	e.Eventually("a handling the new events", time.Minute, func() (bool, string) {
		return len(Where(a.Records(t)[mark:], Is("batch"))) > 0, "no batch yet"
	})
	signal(t, a, syscall.SIGSTOP)
	before := a.Records(t) // a is frozen: its trace ends here until SIGCONT
	held := live(before)
	if len(held) == 0 || len(Where(before, Is("flush"))) == 0 {
		t.Fatalf("before the pause a held %d leases and saved %d cursors; want some of both", len(held), len(Where(before, Is("flush"))))
	}
	b := e.Start("b", spec)
	e.WaitOwners("b holds 4", time.Minute, func(m map[string]int) bool { return m["b"] == 4 })
	e.Append(fs[10000:])
	e.WaitCaughtUp(2 * time.Minute)
	signal(t, a, syscall.SIGCONT)
	e.Eventually("a reporting the leases it held lost", time.Minute, func() (bool, string) {
		ends := endsOf(a.Records(t)[len(before):], held)
		return len(ends) == len(held), fmt.Sprintf("%d of %d", len(ends), len(held))
	})
	b.Stop(t)
	a.Stop(t)
	after := a.Records(t)[len(before):]
	for k, r := range endsOf(after, held) {
		if r.Kind != string(projection.LeaseLost) || r.Error == "" {
			t.Errorf("a's lease of %s ended after the pause as %q (%q); want lost, with why", k, r.Kind, r.Error)
		}
	}
	for _, r := range Where(after, Is("flush")) {
		if held[acquisition{r.Shard, r.Epoch}] {
			t.Errorf("a saved %s at %s with epoch %d, which it held before the pause", r.Shard, r.Seq, r.Epoch)
		}
	}
	t.Logf("a lost its %d leases after SIGCONT and saved nothing with their epochs", len(held))
	e.Finish(fs)
}

// testGracefulHandover: a second worker joins (balancing hands shards over), then the first
// stops with SIGTERM while events flow: it releases every shard it holds, and each released
// shard's next owner starts exactly at the released cursor (History.Check). Cursors are saved
// only every 3 s or 100,000 events, so the hand-over's own save is what carries them. The
// default lease duration: no lease lapses on a loaded machine and balancing is the only mover.
func testGracefulHandover(t *testing.T, e *Env) {
	fs := flights(t)[:10000]
	e.Create(8)
	e.Append(fs[:5000])
	spec := Spec{Flags: []string{"--lease-duration", "6s", "--cursor-every-events", "100000", "--cursor-every", "3s"}}
	a := e.Start("a", spec)
	e.WaitOwners("a holds 8", time.Minute, func(m map[string]int) bool { return m["a"] == 8 })
	b := e.Start("b", spec)
	e.WaitOwners("4/4", time.Minute, func(m map[string]int) bool { return m["a"] == 4 && m["b"] == 4 })
	appended := e.AppendChunks(fs[5000:], 5, 300*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	// What a holds in the store: a lease stolen from it and not noticed yet is still live in
	// its trace, and ends lost (its final commit is fenced).
	held := map[acquisition]bool{}
	for id, ep := range e.Held("a") {
		held[acquisition{id, ep}] = true
	}
	if len(held) == 0 {
		t.Fatal("a holds no lease when it is stopped")
	}
	a.Stop(t)
	for k, r := range endsOf(a.Records(t), held) {
		if r.Kind != string(projection.LeaseReleased) {
			t.Errorf("a's lease of %s ended as %q (%q) at SIGTERM; want released", k, r.Kind, r.Error)
		}
	}
	e.WaitOwners("b holds 8", time.Minute, func(m map[string]int) bool { return m["b"] == 8 })
	<-appended
	e.WaitCaughtUp(2 * time.Minute)
	b.Stop(t)
	rel := Where(a.Records(t), Is("lease", string(projection.LeaseReleased)))
	t.Logf("a released %d shards in all (%d at SIGTERM); the history check holds each next owner to the released cursor", len(rel), len(held))
	e.Finish(fs)
}

// testPoisonEvents: flights-20k with 3 malformed events on 3 shards, 2 workers with
// --on-error dead-letter: exactly those 3 are dead letters, every other event is applied once
// and no shard is stuck. Then a worker with the lenient handler and `deadletters replay`:
// the read model is exact over all 20,000; a second replay changes nothing.
func testPoisonEvents(t *testing.T, e *Env) {
	fs := flights(t)
	e.Create(4)
	bad := e.poisonIndexes(fs, 3)
	shard, seq := e.seqIndex(fs)
	e.Append(fs, bad...)
	want := map[string]int{} // "shard/seq" -> flight index
	for _, i := range bad {
		want[shard[i]+"/"+seq[i]] = i
	}
	spec := Spec{Flags: append([]string{"--on-error", "dead-letter", "--max-attempts", "3", "--until-caught-up", "--lease-duration", "3s"}, bulkFlags...)}
	w1, w2 := e.Start("w1", spec), e.Start("w2", spec)
	for _, w := range []*Worker{w1, w2} {
		if err := w.Wait(t, 5*time.Minute); err != nil {
			t.Fatalf("worker %s: run --until-caught-up: %v", w.ID, err)
		}
	}
	errs := map[string]string{} // "shard/seq" -> the handler's error on that event alone
	traced := map[string]bool{}
	for _, w := range []*Worker{w1, w2} {
		for _, r := range w.Records(t) {
			switch {
			case r.Event == "handler_error" && r.FirstSeq == r.LastSeq:
				errs[r.Shard+"/"+r.FirstSeq] = r.Error
			case r.Event == "dead_letter":
				traced[r.Shard+"/"+r.Seq] = true
			}
		}
	}
	ls := e.Letters()
	if len(ls) != 3 || len(traced) != 3 {
		t.Fatalf("%d dead letters listed, %d traced; want 3: %+v", len(ls), len(traced), ls)
	}
	for _, l := range ls {
		k := l.Shard + "/" + l.Seq
		i, ok := want[k]
		switch {
		case !ok || !traced[k]:
			t.Errorf("dead letter %s (traced: %v) is not one of the malformed events %v", k, traced[k], want)
		case l.State != "failed" || l.ErrorKind != projection.KindFail || l.PartitionKey != fs[i].Origin:
			t.Errorf("dead letter %s: state %s, kind %s, key %s; want failed, fail, %s", k, l.State, l.ErrorKind, l.PartitionKey, fs[i].Origin)
		case string(l.Data) != string(fs[i].QuotedJSON()):
			t.Errorf("dead letter %s data %s, want the malformed event %s", k, l.Data, fs[i].QuotedJSON())
		case l.Error == "" || l.Error != errs[k]:
			t.Errorf("dead letter %s error %q; want the handler's error on the event alone, %q", k, l.Error, errs[k])
		case !strings.Contains(l.Error, "seq "+l.Seq):
			t.Errorf("dead letter %s error %q does not name the event", k, l.Error)
		}
	}
	for id, r := range e.Status() {
		n := 0
		for k := range want {
			if strings.HasPrefix(k, id+"/") {
				n++
			}
		}
		if r.LagEvents != 0 || r.Stopped != "" || r.DeadLetters != n {
			t.Errorf("status of %s: %+v; want no lag, not stopped, %d dead letters", id, r, n)
		}
	}
	e.CheckReadModel(without(fs, bad...))

	l := e.Start("lenient", Spec{Handler: testwasm.FlightDelaysGoLenient, Flags: []string{"--lease-duration", "3s"}})
	if out := e.CLI("deadletters", "replay", "--name", Projection); !strings.HasPrefix(out, "3 dead letter(s)") {
		t.Fatalf("deadletters replay: %q; want 3 requested", out)
	}
	e.waitReplayed(3 * time.Minute)
	e.CheckReadModel(fs)
	if out := e.CLI("deadletters", "replay", "--name", Projection); !strings.HasPrefix(out, "0 dead letter(s)") {
		t.Fatalf("second deadletters replay: %q; want none requested", out)
	}
	for _, l := range e.Letters() {
		if l.State != "replayed" || l.ReplayedSeq == "" {
			t.Errorf("after the second replay, letter %s/%s is %s (replayed at %q); want replayed", l.Shard, l.Seq, l.State, l.ReplayedSeq)
		}
	}
	l.Stop(t)
	rs := l.Records(t)
	replayed, commits := Where(rs, Is("replayed")), Where(rs, func(r projection.TraceRecord) bool { return r.Event == "flush" && r.Replay != "" })
	if len(replayed) != 3 || len(commits) != 3 || len(Where(rs, Is("replay_failed"))) != 0 {
		t.Fatalf("the lenient worker traced %d replays, %d replay commits, %d failed replays; want 3, 3, 0", len(replayed), len(commits), len(Where(rs, Is("replay_failed"))))
	}
	for _, r := range replayed {
		if _, ok := want[r.Shard+"/"+r.Seq]; !ok {
			t.Errorf("replayed %s/%s, not a malformed event", r.Shard, r.Seq)
		}
	}
	e.Finish(fs)
}

// testReplayNoWorker: replays requested while no worker runs are applied by the next `run`, and
// `run --until-caught-up` waits for them before it exits.
func testReplayNoWorker(t *testing.T, e *Env) {
	fs := flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))
	e.Create(4)
	bad := e.poisonIndexes(fs, 2)
	e.Append(fs, bad...)
	w := e.Start("dl", Spec{Flags: []string{"--on-error", "dead-letter", "--max-attempts", "2", "--until-caught-up"}})
	if err := w.Wait(t, 5*time.Minute); err != nil {
		t.Fatalf("run --until-caught-up: %v", err)
	}
	shard, seq := e.seqIndex(fs)
	ls := e.Letters()
	if len(ls) != 2 {
		t.Fatalf("%d dead letters, want 2: %+v", len(ls), ls)
	}
	for _, l := range ls {
		if !slices.ContainsFunc(bad, func(i int) bool { return shard[i] == l.Shard && seq[i] == l.Seq }) || l.State != "failed" {
			t.Fatalf("dead letter %s/%s (%s) is not one of the malformed events", l.Shard, l.Seq, l.State)
		}
	}
	e.CheckReadModel(without(fs, bad...))
	if out := e.CLI("deadletters", "replay", "--name", Projection); !strings.HasPrefix(out, "2 dead letter(s)") {
		t.Fatalf("deadletters replay: %q; want 2 requested", out)
	}
	for _, l := range e.Letters() {
		if l.State != "replay_requested" {
			t.Fatalf("with no worker running, letter %s/%s is %s; want replay_requested", l.Shard, l.Seq, l.State)
		}
	}
	next := e.Start("next", Spec{Handler: testwasm.FlightDelaysGoLenient, Flags: []string{"--until-caught-up"}})
	if err := next.Wait(t, 5*time.Minute); err != nil {
		t.Fatalf("run --until-caught-up with the lenient handler: %v", err)
	}
	for _, l := range e.Letters() { // at once: until-caught-up waited for the replays
		if l.State != "replayed" {
			t.Errorf("after run --until-caught-up exited, letter %s/%s is %s; want replayed", l.Shard, l.Seq, l.State)
		}
	}
	if n := len(Where(next.Records(t), Is("replayed"))); n != 2 {
		t.Errorf("the next run traced %d replays, want 2", n)
	}
	e.Finish(fs)
}

// testStopPolicy: --on-error stop stops the shard of a malformed event (status says STOPPED
// and why), the other shards go on to their heads, `run --until-caught-up` exits non-zero
// naming the stopped shard, and `projhost resume` with the lenient handler running continues
// it: the read model becomes exact.
func testStopPolicy(t *testing.T, e *Env) {
	fs := flights(t)[:4000]
	e.Create(4)
	i := e.poisonIndexes(fs, 1)[0]
	shard, seq := e.seqIndex(fs)
	s := shard[i]
	e.Append(fs, i)
	a := e.Start("a", Spec{Flags: []string{"--on-error", "stop", "--max-attempts", "2"}})
	var others []string
	for _, id := range e.Shards() {
		if id != s {
			others = append(others, id)
		}
	}
	var stopped projection.TraceRecord
	e.Eventually("the shard stopped and the others at their heads", 2*time.Minute, func() (bool, string) {
		st := Where(a.Records(t), Is("stopped"))
		l := e.Lagging(others...)
		if len(st) > 0 {
			stopped = st[0]
		}
		return len(st) > 0 && len(l) == 0, fmt.Sprintf("stopped %v; lagging %v", st, l)
	})
	before := fmt.Sprint(mustInt(t, seq[i]) - 1)
	if before == "0" {
		before = ""
	}
	if c := e.Cursors()[s]; stopped.Shard != s || c.Seq != before {
		t.Fatalf("stopped %s with its cursor at %q; want %s at %q, just before the malformed event %s", stopped.Shard, c.Seq, s, before, seq[i])
	}
	rows := e.Status()
	r := rows[s]
	if r.State != "STOPPED" || r.Stopped != stopped.Error || !strings.Contains(r.Stopped, "at seq "+seq[i]) || r.LagEvents == 0 {
		t.Fatalf("status of the stopped shard: %+v; want STOPPED at seq %s with the traced reason %q", r, seq[i], stopped.Error)
	}
	for _, id := range others {
		if rows[id].State == "STOPPED" || rows[id].LagEvents != 0 {
			t.Errorf("status of %s: %+v; want not stopped, no lag", id, rows[id])
		}
	}
	txt := e.CLI("status", "--name", Projection)
	for _, w := range []string{"STOPPED " + Projection + " shard " + s + ": " + r.Stopped, "resume with: projhost resume --"} {
		if !strings.Contains(txt, w) {
			t.Errorf("status does not say %q:\n%s", w, txt)
		}
	}
	// The hint is a command to copy: with the store's flags.
	_, hint, _ := strings.Cut(txt, "resume with: projhost ")
	hint, _, _ = strings.Cut(hint, "\n")
	if want := " --name " + Projection + " --shard " + s; !strings.HasSuffix(hint, want) || !strings.Contains(hint, "--data ") && !strings.Contains(hint, "--store dynamodb") {
		t.Errorf("resume hint %q: want the store's flags and %q", hint, want)
	}
	a.Stop(t)

	u := e.Start("until", Spec{Flags: []string{"--until-caught-up"}})
	err := u.Wait(t, 2*time.Minute)
	if ec, ok := err.(interface{ ExitCode() int }); !ok || ec.ExitCode() != 1 {
		t.Fatalf("run --until-caught-up with a stopped shard: %v; want exit status 1", err)
	}
	if msg := errorLine(u.Stderr()); !strings.Contains(msg, "shard "+s+":") || !strings.Contains(msg, "stopped") {
		t.Fatalf("run --until-caught-up failed with %q; want it to name the stopped shard %s", msg, s)
	}

	l := e.Start("lenient", Spec{Handler: testwasm.FlightDelaysGoLenient})
	e.Eventually("the lenient worker holding the stopped shard", 2*time.Minute, func() (bool, string) {
		o := Where(l.Records(t), func(r projection.TraceRecord) bool { return r.Event == "open" && r.Shard == s })
		return len(o) > 0 && o[0].Error == r.Stopped, fmt.Sprint(o)
	})
	if out := e.CLI("resume", "--name", Projection, "--shard", s); !strings.HasPrefix(out, "resumed "+Projection+" shard "+s) {
		t.Fatalf("resume: %q", out)
	}
	e.WaitCaughtUp(2 * time.Minute)
	if r := e.Status()[s]; r.State == "STOPPED" || r.Stopped != "" {
		t.Fatalf("after resume: %+v", r)
	}
	l.Stop(t)
	e.Finish(fs)
}

// frozenWrite: worker a reaches the store through a proxy that freezes it in the middle of a
// write (a read-model item write, or a cursor save); a is also stopped with SIGSTOP past its
// lease duration. b takes every shard over and catches up. Then a continues and its frozen
// write reaches the store late: it must be rejected (the item keeps b's newer epoch), a must
// save no cursor with the epochs it held, and the read model must stay exact.
func frozenWrite(kind WriteKind) func(t *testing.T, e *Env) {
	return func(t *testing.T, e *Env) {
		fs := flights(t)[:4000]
		fy := e.Store.(Faulty)
		e.Create(16)
		p := e.proxy(fy)
		a := e.Start("a", Spec{Flags: flags(), Store: fy.FlagsVia(p.Addr())})
		e.WaitOwners("a holds 16", time.Minute, func(m map[string]int) bool { return m["a"] == 16 })
		var frozen []byte // set once, before fired closes
		fired := p.HoldWhen(func(b []byte) bool {
			if fy.IsWrite(kind, b) {
				frozen = append([]byte(nil), b...)
				return true
			}
			return false
		})
		e.Append(fs[:2000])
		select {
		case <-fired:
		case <-time.After(time.Minute):
			t.Fatalf("a never made a %s", kind)
		}
		signal(t, a, syscall.SIGSTOP)
		before := a.Records(t)
		held := live(before)
		if len(held) == 0 {
			t.Fatal("a holds no lease when it is paused")
		}
		b := e.Start("b", Spec{Flags: flags()})
		e.WaitOwners("b holds 16", time.Minute, func(m map[string]int) bool { return m["b"] == 16 })
		e.Append(fs[2000:])
		e.WaitCaughtUp(2 * time.Minute)
		signal(t, a, syscall.SIGCONT)
		p.SetMode(tcpproxy.Pass) // the frozen write reaches the store now, after b's claims
		e.Eventually("a reporting the leases it held lost", time.Minute, func() (bool, string) {
			ends := endsOf(a.Records(t)[len(before):], held)
			return len(ends) == len(held), fmt.Sprintf("%d of %d", len(ends), len(held))
		})
		e.WaitCaughtUp(time.Minute)
		a.Stop(t)
		b.Stop(t)
		fy.CheckRejected(t, frozen)
		after := a.Records(t)[len(before):]
		for _, r := range Where(after, Is("flush")) {
			if held[acquisition{r.Shard, r.Epoch}] {
				t.Errorf("a saved %s at %s with epoch %d, which it held before the pause", r.Shard, r.Seq, r.Epoch)
			}
		}
		for k, r := range endsOf(after, held) {
			if r.Kind != string(projection.LeaseLost) {
				t.Errorf("a's lease of %s ended as %s after the pause; want lost", k, r.Kind)
			}
		}
		e.Finish(fs)
	}
}

// storeOutage: worker c reaches the store through a proxy that black-holes its connections
// (hold: requests hang, and arrive late when it heals) or resets them (refuse: requests fail at
// once). Every shard c held is taken over by the others while the outage lasts and c reports
// each of those leases lost; after it heals c rejoins, and the read model is exact.
func storeOutage(mode tcpproxy.Mode) func(t *testing.T, e *Env) {
	return func(t *testing.T, e *Env) {
		fs := flights(t)[:6000]
		fy := e.Store.(Faulty)
		e.Create(16)
		p := e.proxy(fy)
		a, b := e.Start("a", Spec{Flags: flags()}), e.Start("b", Spec{Flags: flags()})
		c := e.Start("c", Spec{Flags: flags(), Store: fy.FlagsVia(p.Addr())})
		e.WaitOwners("c holding 4 or more", time.Minute, func(m map[string]int) bool { return m["c"] >= 4 && len(m) == 3 })
		appended := e.AppendChunks(fs, 8, 300*time.Millisecond)
		time.Sleep(800 * time.Millisecond)
		leases := e.Held("c")
		if len(leases) == 0 {
			t.Fatal("c holds no lease when the outage begins")
		}
		p.SetMode(mode)
		start := time.Now()
		e.Eventually("c's shards owned by the others with newer epochs", 2*time.Minute, func() (bool, string) {
			taken := 0
			for id, ep := range e.HeldBy(func(owner string) bool { return owner != "" && owner != "c" }) {
				if old, ok := leases[id]; ok && ep > old {
					taken++
				}
			}
			return taken == len(leases), fmt.Sprintf("%d of %d", taken, len(leases))
		})
		t.Logf("%s: c's %d shards owned by a and b %s after the outage began", mode, len(leases), time.Since(start).Round(10*time.Millisecond))
		held := map[acquisition]bool{}
		for id, ep := range leases {
			held[acquisition{id, ep}] = true
		}
		p.SetMode(tcpproxy.Pass)
		<-appended
		e.WaitOwners("c rejoined", time.Minute, func(m map[string]int) bool { return m["c"] >= 1 })
		e.WaitCaughtUp(2 * time.Minute)
		for _, w := range []*Worker{a, b, c} {
			w.Stop(t)
		}
		crecs := c.Records(t)
		acquired := map[acquisition]bool{}
		for _, r := range Where(crecs, Is("lease", string(projection.LeaseAcquired))) {
			acquired[acquisition{r.Shard, r.Epoch}] = true
		}
		for k := range held {
			// A take c wrote just before the outage but could not confirm (the Manager's
			// check that no other module took a lease meanwhile) was never reported to the
			// runner: no acquisition, so no end of one.
			if !acquired[k] {
				t.Logf("c's lease of %s was written but never reported acquired before the outage", k)
				delete(held, k)
			}
		}
		ends := endsOf(crecs, held)
		for k := range held {
			if r := ends[k]; r.Kind != string(projection.LeaseLost) || r.Error == "" {
				t.Errorf("c's lease of %s held at the outage ended as %q (%q); want lost, with why", k, r.Kind, r.Error)
			}
		}
		t.Logf("c reported its %d leases lost: %v", len(held), reasons(ends))
		e.Finish(fs)
	}
}

// testClockAhead: a worker whose clocks run 30 s ahead joins two live workers; it must take
// leases only by balancing steals (or free ones), never as expired, and the others never see
// their leases lapse.
//
// What is real here: lease items carry no time at all (checked), and workers compare only
// readings of their own Go monotonic clock (CLOCK_MONOTONIC). The worker runs in a Linux time
// namespace with CLOCK_MONOTONIC and CLOCK_BOOTTIME offset by +30 s (unshare --time, checked in
// /proc/PID/timens_offsets) and with another time zone (TZ). Its wall clock cannot be set apart
// on Linux: CLOCK_REALTIME has no namespace, and libfaketime cannot intercept Go's vDSO calls.
// A store that kept expiry times (wall or monotonic) would make every live lease look expired
// to this worker.
func testClockAhead(t *testing.T, e *Env) {
	wrapper := timeNamespace(t, 30)
	fs := flights(t)[:3000]
	e.Create(16)
	spec := Spec{Flags: flags("--lease-duration", "6s")} // the default lease: under load a shorter one may lapse for real
	a, b := e.Start("a", spec), e.Start("b", spec)
	e.WaitOwners("8/8", time.Minute, func(m map[string]int) bool { return m["a"] == 8 && m["b"] == 8 })
	ahead := e.Start("ahead", Spec{Flags: spec.Flags, Wrapper: wrapper})
	child := checkAhead(t, ahead, 30)
	appended := e.AppendChunks(fs, 6, 500*time.Millisecond)
	m := e.WaitOwners("balanced with the skewed worker", 2*time.Minute, func(m map[string]int) bool {
		return m["ahead"] >= 5 && m["ahead"] <= 6 && m["a"] >= 5 && m["b"] >= 5
	})
	t.Logf("balanced: %v", m)
	<-appended
	e.WaitCaughtUp(2 * time.Minute)
	fields := e.Store.LeaseFields(t, Projection)
	for _, f := range fields {
		if !slices.Contains([]string{"projection", "shard", "shard_id", "owner", "counter", "epoch", "parents", "parent_ids", "state", "module", "token"}, f) {
			t.Errorf("lease items have field %q: leases must carry no time", f)
		}
	}
	if err := syscall.Kill(child, syscall.SIGTERM); err != nil { // unshare does not forward signals
		t.Fatal(err)
	}
	if err := ahead.Wait(t, time.Minute); err != nil {
		t.Fatalf("the skewed worker exited with %v", err)
	}
	a.Stop(t)
	b.Stop(t)
	acq := Where(ahead.Records(t), Is("lease", string(projection.LeaseAcquired)))
	if len(acq) == 0 {
		t.Fatal("the skewed worker acquired no lease")
	}
	for _, r := range acq {
		if r.How != "steal" && r.How != "free" {
			t.Errorf("the skewed worker took %s from %q as %q", r.Shard, r.From, r.How)
		}
	}
	for _, w := range []*Worker{a, b} {
		for _, r := range Where(w.Records(t), Is("lease", string(projection.LeaseLost))) {
			if strings.Contains(r.Error, "not renewed") || strings.Contains(r.Error, "after the lease duration") {
				t.Errorf("worker %s lost %s because %q: its lease lapsed", w.ID, r.Shard, r.Error)
			}
		}
	}
	t.Logf("the skewed worker acquired %d leases, all by balancing steals or free; lease fields %v", len(acq), fields)
	e.Finish(fs)
}

func reasons(ends map[acquisition]projection.TraceRecord) map[string]int {
	out := map[string]int{}
	for _, r := range ends {
		out[r.Error]++
	}
	return out
}

// errorLine is the error a projhost command ended with: its stderr line "projhost: ..." (main
// prints every error as one such line).
func errorLine(stderr string) string {
	ls := lines(stderr)
	for i := len(ls) - 1; i >= 0; i-- {
		if strings.HasPrefix(ls[i], "projhost: ") {
			return ls[i]
		}
	}
	return ""
}
