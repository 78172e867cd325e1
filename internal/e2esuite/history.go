package e2esuite

import (
	"fmt"
	"testing"

	"github.com/projhost/projhost/projection"
)

// History is the trace of every worker a case started.
type History struct {
	workers []workerTrace
}

type workerTrace struct {
	w    *Worker
	recs []projection.TraceRecord
}

// History reads the trace files of every worker started so far.
func (e *Env) History() *History {
	e.t.Helper()
	e.mu.Lock()
	ws := append([]*Worker(nil), e.workers...)
	e.mu.Unlock()
	h := &History{}
	for _, w := range ws {
		h.workers = append(h.workers, workerTrace{w, w.Records(e.t)})
	}
	return h
}

// Saves counts the cursor saves (flush records) of every worker.
func (h *History) Saves() int {
	n := 0
	for _, wt := range h.workers {
		n += len(Where(wt.recs, Is("flush")))
	}
	return n
}

// acquisition is one shard at one epoch: a lease acquired by one worker.
type acquisition struct {
	shard string
	epoch int64
}

func (a acquisition) String() string { return fmt.Sprintf("%s epoch %d", a.shard, a.epoch) }

type acqState struct {
	worker string
	proc   int // index of the worker process (a worker id may be started again)
	ends   int
	ended  string // lost, released, finished
	opened bool   // its first open was seen (later ones are reopens after a pause)
}

type seqAt struct {
	acquisition
	worker, seq string
}

// Check fails t when the history breaks a rule of leases and cursors:
//   - an epoch of a shard is acquired by one worker only, and an acquisition ends (lost,
//     released or finished) at most once; exactly once when its worker exited (not killed);
//   - a shard is opened, and its cursor saved, only by the worker that acquired that epoch, and
//     no save follows its own release or finish;
//   - within an acquisition saves never go backwards;
//   - no save of an epoch passes the cursor that a newer epoch of the shard opened at (the newer
//     owner's claim fences the older one: a save past it would mean both processed the shard);
//   - a released shard's next epoch opens exactly at the cursor it was released with.
func (h *History) Check(t *testing.T) {
	t.Helper()
	var bad []string
	badf := func(f string, a ...any) { bad = append(bad, fmt.Sprintf(f, a...)) }
	acqs := map[acquisition]*acqState{}
	var opens, saves, releases []seqAt
	for i, wt := range h.workers {
		id := wt.w.ID
		last := map[acquisition]string{}
		for _, r := range wt.recs {
			k := acquisition{r.Shard, r.Epoch}
			st := acqs[k]
			mine := st != nil && st.proc == i
			switch {
			case r.Event == "lease" && r.Kind == string(projection.LeaseAcquired):
				if st != nil {
					badf("%s acquired by %s and by %s", k, st.worker, id)
					continue
				}
				acqs[k] = &acqState{worker: id, proc: i}
			case r.Event == "lease" && (r.Kind == string(projection.LeasePaused) || r.Kind == string(projection.LeaseResumed)):
				if !mine {
					badf("%s: %s reports %s of an acquisition it does not have", id, k, r.Kind)
				}
			case r.Event == "lease":
				if !mine {
					badf("%s: %s reports %s of an acquisition it does not have", id, k, r.Kind)
					continue
				}
				st.ends++
				st.ended = r.Kind
				if st.ends > 1 {
					badf("%s: %s ended %d times (last: %s)", id, k, st.ends, r.Kind)
				}
				if r.Kind == string(projection.LeaseReleased) {
					releases = append(releases, seqAt{k, id, r.Seq})
				}
			case r.Event == "open":
				if !mine {
					badf("%s opened %s without acquiring it", id, k)
					continue
				}
				if st.opened {
					// Opened again after a pause (container: a paused shard is closed and
					// reopened at its committed cursor, in the same acquisition).
					if p, ok := last[k]; ok && r.Seq != p {
						badf("%s reopened %s at %q, not at its last save %q", id, k, r.Seq, p)
					}
					continue
				}
				st.opened = true
				opens = append(opens, seqAt{k, id, r.Seq})
			case r.Event == "flush":
				if !mine {
					badf("%s saved the cursor of %s without acquiring it", id, k)
					continue
				}
				if st.ended == string(projection.LeaseReleased) || st.ended == string(projection.LeaseFinished) {
					badf("%s saved %s at %s after it was %s", id, k, r.Seq, st.ended)
				}
				if p, ok := last[k]; ok && cmpSeq(r.Seq, p) < 0 {
					badf("%s: %s saved %s after %s", id, k, r.Seq, p)
				}
				last[k] = r.Seq
				saves = append(saves, seqAt{k, id, r.Seq})
			}
		}
		if wt.w.Killed() || wt.w.state() == "running" {
			continue
		}
		for k, st := range acqs {
			if st.proc == i && st.ends == 0 {
				badf("%s exited without ending its acquisition of %s", id, k)
			}
		}
	}
	for _, s := range saves {
		for _, o := range opens {
			if o.shard == s.shard && o.epoch > s.epoch && cmpSeq(s.seq, o.seq) > 0 {
				badf("%s: %s saved %q with epoch %d past %q, where %s opened epoch %d", s.shard, s.worker, s.seq, s.epoch, o.seq, o.worker, o.epoch)
			}
		}
	}
	for _, r := range releases {
		for _, o := range opens {
			if o.shard == r.shard && o.epoch == r.epoch+1 && o.seq != r.seq {
				badf("%s released by %s at %q but opened by %s with epoch %d at %q", r.shard, r.worker, r.seq, o.worker, o.epoch, o.seq)
			}
		}
	}
	if len(bad) > 0 {
		if len(bad) > 20 {
			bad = append(bad[:20], fmt.Sprintf("... and %d more", len(bad)-20))
		}
		t.Fatalf("the workers' trace history breaks the lease and cursor rules:\n%s", joinLines(bad))
	}
}

func joinLines(ss []string) string {
	out := ""
	for _, s := range ss {
		out += "  " + s + "\n"
	}
	return out
}
