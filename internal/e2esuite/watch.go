package e2esuite

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/cursorstore"
)

// cursorWatch polls every shard's cursor in the store and records every value it sees: the
// store's side of the cursor history (the trace files are the workers').
type cursorWatch struct {
	mu     sync.Mutex
	seen   map[string][]string
	epochs map[string]int64 // last epoch seen per shard
	bad    []string
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// watchPoll is how often the cursors are read.
const watchPoll = 50 * time.Millisecond

func (e *Env) watchCursors() *cursorWatch {
	st := e.Stores()
	cw := &cursorWatch{seen: map[string][]string{}, epochs: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(cw.done)
		for {
			if cs, err := e.Store.Cursors(e.t, st, Projection, e.Shards()); err == nil { // an error (busy): next round
				cw.record(cs)
			}
			select {
			case <-cw.stop:
				return
			case <-time.After(watchPoll):
			}
		}
	}()
	e.t.Cleanup(cw.close)
	return cw
}

func (cw *cursorWatch) record(cs map[string]cursorstore.Cursor) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	for id, c := range cs {
		if c.Epoch < cw.epochs[id] {
			cw.bad = append(cw.bad, fmt.Sprintf("%s epoch went down %d -> %d", id, cw.epochs[id], c.Epoch))
		}
		cw.epochs[id] = max(cw.epochs[id], c.Epoch)
		s := cw.seen[id]
		if len(s) == 0 || s[len(s)-1] != c.Seq {
			if len(s) > 0 && cmpSeq(c.Seq, s[len(s)-1]) < 0 {
				cw.bad = append(cw.bad, fmt.Sprintf("%s moved backwards %s -> %s", id, s[len(s)-1], c.Seq))
			}
			cw.seen[id] = append(s, c.Seq)
		}
	}
}

func (cw *cursorWatch) close() {
	cw.once.Do(func() { close(cw.stop) })
	<-cw.done
}

// check stops the watch, fails t if a cursor moved backwards or lowered its epoch, and returns
// the number of distinct cursor values recorded.
func (cw *cursorWatch) check(t *testing.T) int {
	t.Helper()
	cw.close()
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if len(cw.bad) > 0 {
		t.Fatalf("polled cursors: %v", cw.bad)
	}
	n := 0
	for _, s := range cw.seen {
		n += len(s)
	}
	return n
}
