package projection

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/projhost/projhost/deadletter"
)

// Chain returns hooks that call each of hs in order (nil hooks skipped).
func Chain(hs ...Hooks) Hooks {
	var out Hooks
	for _, h := range hs {
		out.Opened = chain1(out.Opened, h.Opened)
		out.Batch = chain1(out.Batch, h.Batch)
		out.Flush = chain1(out.Flush, h.Flush)
		out.HandlerError = chain1(out.HandlerError, h.HandlerError)
		out.DeadLettered = chain1(out.DeadLettered, h.DeadLettered)
		out.Lag = chain1(out.Lag, h.Lag)
		out.Lease = chain1(out.Lease, h.Lease)
		out.LogDropped = chain1(out.LogDropped, h.LogDropped)
		out.Module = chain1(out.Module, h.Module)
		out.Stopped = chain2(out.Stopped, h.Stopped)
		out.Replayed = chain2(out.Replayed, h.Replayed)
	}
	return out
}

func chain1[T any](a, b func(T)) func(T) {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return func(v T) { a(v); b(v) }
}

func chain2[T, U any](a, b func(T, U)) func(T, U) {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return func(v T, u U) { a(v, u); b(v, u) }
}

// TraceRecord is one line TraceHooks writes.
type TraceRecord struct {
	Time       time.Time `json:"time"`
	Event      string    `json:"event"` // open, batch, flush, handler_error, dead_letter, replayed, replay_failed, stopped, lease, log_dropped, lag, module
	Projection string    `json:"projection"`
	Shard      string    `json:"shard"`
	Epoch      int64     `json:"epoch"`
	Worker     string    `json:"worker,omitempty"`
	Seq        string    `json:"seq,omitempty"`       // open: the cursor claimed; flush: the cursor saved; dead_letter, replayed: the letter's; lease released, finished: the cursor committed; module: the switch point (ModuleInfo.Seq)
	FirstSeq   string    `json:"first_seq,omitempty"` // batch, handler_error
	LastSeq    string    `json:"last_seq,omitempty"`
	Events     int       `json:"events,omitempty"`
	Mutations  int       `json:"mutations,omitempty"`
	Replay     string    `json:"replay,omitempty"` // flush of a dead-letter replay: the letter's seq
	Kind       string    `json:"kind,omitempty"`   // handler_error, dead_letter: the error kind; lease: acquired, lost, released, finished
	How        string    `json:"how,omitempty"`    // lease acquired: free, expired or steal
	From       string    `json:"from,omitempty"`   // lease acquired: the previous owner; module: the previous module
	Module     string    `json:"module,omitempty"` // module: the module now running
	Error      string    `json:"error,omitempty"`  // handler_error, dead_letter, replay_failed: the error; stopped: the reason; open: why the shard is stopped; lease lost: why
	Attempt    int       `json:"attempt,omitempty"`
	Micros     int64     `json:"us,omitempty"`      // batch: handler time
	Dropped    uint64    `json:"dropped,omitempty"` // log_dropped: guest log lines dropped by the last handler call
	Total      uint64    `json:"total,omitempty"`   // log_dropped: ... by the shard's handler so far
	// lag (LagInfo; -1 unknown): written when a shard's lag first comes, reaches 0 or leaves
	// it, and otherwise at most every TraceLagEvery while it changes.
	MillisBehind *int64 `json:"millis_behind,omitempty"`
	EventsBehind *int64 `json:"events_behind,omitempty"`
}

// TraceLagEvery is the least time between two lag records of one shard acquisition in a trace
// while the lag changes without reaching or leaving 0 (a record per read would double a
// busy trace).
const TraceLagEvery = time.Second

// TraceHooks returns hooks that write every open, batch, flush, handler error, dead letter,
// replay, stop, lease, module and dropped-guest-log event as one JSON object per line (TraceRecord) to w — what `projhost run
// --trace FILE` writes, so that tests and tools outside the process observe the core without
// parsing log text. Lag is sampled (TraceLagEvery; every change to or from 0). Writes are
// serialised; write errors are ignored.
func TraceHooks(w io.Writer) Hooks {
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	put := func(r TraceRecord) {
		r.Time = time.Now().UTC()
		mu.Lock()
		_ = enc.Encode(r)
		mu.Unlock()
	}
	base := func(ev string, s ShardInfo) TraceRecord {
		return TraceRecord{Event: ev, Projection: s.Projection, Shard: s.ShardID, Epoch: s.Epoch}
	}
	type lagKey struct {
		shard string
		epoch int64
	}
	type lagSeen struct {
		at     time.Time
		ms, ev int64
	}
	var lagMu sync.Mutex
	lags := map[lagKey]lagSeen{}
	return Hooks{
		Lag: func(i LagInfo) {
			k, now := lagKey{i.ShardID, i.Epoch}, time.Now()
			lagMu.Lock()
			last, ok := lags[k]
			zero := func(ms, ev int64) bool { return ms <= 0 && ev <= 0 }
			due := !ok || zero(last.ms, last.ev) != zero(i.MillisBehind, i.EventsBehind) ||
				(now.Sub(last.at) >= TraceLagEvery && (last.ms != i.MillisBehind || last.ev != i.EventsBehind))
			if due {
				lags[k] = lagSeen{now, i.MillisBehind, i.EventsBehind}
			}
			lagMu.Unlock()
			if due {
				r := base("lag", i.ShardInfo)
				ms, ev := i.MillisBehind, i.EventsBehind
				r.MillisBehind, r.EventsBehind = &ms, &ev
				put(r)
			}
		},
		Opened: func(i OpenInfo) {
			r := base("open", i.ShardInfo)
			r.Seq, r.Error = i.Seq, i.Stopped
			put(r)
		},
		Batch: func(i BatchInfo) {
			r := base("batch", i.ShardInfo)
			r.FirstSeq, r.LastSeq, r.Events, r.Mutations, r.Micros = i.FirstSeq, i.LastSeq, i.Events, i.Mutations, i.Duration.Microseconds()
			put(r)
		},
		Flush: func(i FlushInfo) {
			r := base("flush", i.ShardInfo)
			r.Seq, r.Events, r.Mutations, r.Replay = i.Seq, i.Events, i.Mutations, i.Replay
			put(r)
		},
		HandlerError: func(i HandlerErrorInfo) {
			r := base("handler_error", i.ShardInfo)
			r.Kind, r.Error, r.Attempt, r.FirstSeq, r.LastSeq = i.Kind, i.Err.Error(), i.Attempt, i.FirstSeq, i.LastSeq
			put(r)
		},
		DeadLettered: func(l deadletter.Letter) {
			r := TraceRecord{Event: "dead_letter", Projection: l.Projection, Shard: l.ShardID, Seq: l.Seq, Kind: l.ErrorKind, Error: l.Error, Attempt: l.Attempts}
			put(r)
		},
		Replayed: func(l deadletter.Letter, err error) {
			r := TraceRecord{Event: "replayed", Projection: l.Projection, Shard: l.ShardID, Seq: l.Seq}
			if err != nil {
				r.Event, r.Error = "replay_failed", err.Error()
			}
			put(r)
		},
		Stopped: func(s ShardInfo, why string) {
			r := base("stopped", s)
			r.Error = why
			put(r)
		},
		LogDropped: func(i LogDroppedInfo) {
			r := base("log_dropped", i.ShardInfo)
			r.Dropped, r.Total = i.Lines, i.Total
			put(r)
		},
		Module: func(i ModuleInfo) {
			r := base("module", i.ShardInfo)
			r.Module, r.From, r.Seq = i.Module, i.From, i.Seq
			put(r)
		},
		Lease: func(i LeaseInfo) {
			r := base("lease", i.ShardInfo)
			r.Worker, r.Kind, r.How, r.From, r.Seq, r.Error = i.Worker, string(i.Event), i.How, i.From, i.Seq, i.Reason
			put(r)
		},
	}
}
