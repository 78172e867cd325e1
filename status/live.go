package status

import (
	"sync"
	"time"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/projection"
)

// Live keeps the figures only the worker running a shard knows, fed by the core's hooks
// (Hooks, chained with projection.Chain into projection.Config.Hooks as prom's are): how fast
// it handles events, the lag of its last read, its last error and the module it runs. Rows
// come from the stores; Live adds what this process saw. Sample it regularly (the status
// page does, every sample interval) for events/s.
//
// A Live is safe for concurrent use: the hooks of every shard may call it at once, and
// Shard and Sample meanwhile. Each call takes one mutex for a few map operations.
type Live struct {
	mu     sync.Mutex
	shards map[liveKey]*liveShard
}

type liveKey struct{ projection, shard string }

type liveShard struct {
	LiveShard
	rates [rateSamples]rateSample // ring of (time, events) samples, for EventsPerSec
	next  int                     // next slot of rates
	n     int                     // samples in rates
}

type rateSample struct {
	at     time.Time
	events int64
}

// rateSamples is how many Sample calls EventsPerSec spans (at most): with the status page's
// 2 s sample interval, the last 10 s.
const rateSamples = 6

// LiveShard is what this process knows of a shard it ran.
type LiveShard struct {
	// Owned: this worker holds the shard's lease now (acquired, not yet lost, released or
	// finished); Epoch is the acquisition's lease epoch.
	Owned bool  `json:"owned"`
	Epoch int64 `json:"epoch"`
	// Events is the events this process handled on the shard (accepted batches), since it
	// started.
	Events int64 `json:"events"`
	// EventsPerSec is the rate of Events over the last samples (up to 5 intervals of Sample);
	// 0 before two samples.
	EventsPerSec float64 `json:"events_per_s"`
	// LagEvents and LagMillis are the lag of the last read (projection.LagInfo): events after
	// the last one read, how far it is behind the tip in ms; -1 unknown.
	LagEvents int64 `json:"lag_events"`
	LagMillis int64 `json:"lag_ms"`
	// Paused: the shard is paused (projhost pause) and this worker, its owner, reads nothing;
	// LagEvents and LagMillis are then unknown (-1): the stores' backlog tells (Row.LagEvents).
	Paused bool `json:"paused,omitempty"`
	// Cursor is the last cursor this process saved ("" none yet).
	Cursor string `json:"cursor,omitempty"`
	// Module is the handler module the shard runs (host.Module.Name, "<projection> v<N>").
	Module string `json:"module,omitempty"`
	// LastError is the last handler error (kind: message), dead letter or stop reason, and
	// LastErrorAt when it came; empty when there was none. Kept after the lease ends.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// NewLive returns an empty Live.
func NewLive() *Live { return &Live{shards: map[liveKey]*liveShard{}} }

// Hooks returns the hooks that feed l.
func (l *Live) Hooks() projection.Hooks {
	return projection.Hooks{
		Batch: func(i projection.BatchInfo) {
			l.update(i.ShardInfo, func(s *liveShard) { s.Events += int64(i.Events) })
		},
		Flush: func(i projection.FlushInfo) {
			l.update(i.ShardInfo, func(s *liveShard) { s.Cursor = i.Seq })
		},
		Lag: func(i projection.LagInfo) {
			l.update(i.ShardInfo, func(s *liveShard) { s.LagEvents, s.LagMillis = i.EventsBehind, i.MillisBehind })
		},
		Module: func(i projection.ModuleInfo) {
			l.update(i.ShardInfo, func(s *liveShard) { s.Module = i.Module })
		},
		HandlerError: func(i projection.HandlerErrorInfo) {
			msg := i.Kind
			if i.Err != nil {
				msg += ": " + i.Err.Error()
			}
			l.setError(i.Projection, i.ShardID, msg)
		},
		DeadLettered: func(d deadletter.Letter) {
			l.setError(d.Projection, d.ShardID, "dead letter at seq "+d.Seq+": "+d.ErrorKind+": "+d.Error)
		},
		Stopped: func(i projection.ShardInfo, reason string) {
			l.setError(i.Projection, i.ShardID, "stopped: "+reason)
		},
		Lease: func(i projection.LeaseInfo) {
			l.mu.Lock()
			defer l.mu.Unlock()
			s := l.shard(i.Projection, i.ShardID)
			switch {
			case i.Event == projection.LeaseAcquired && i.Epoch >= s.Epoch:
				s.Owned, s.Epoch, s.Paused = true, i.Epoch, false
				s.LagEvents, s.LagMillis, s.Module = -1, -1, ""
			case i.Event == projection.LeasePaused && i.Epoch == s.Epoch:
				s.Paused, s.LagEvents, s.LagMillis = true, -1, -1
			case i.Event == projection.LeaseResumed && i.Epoch == s.Epoch:
				s.Paused = false
			case i.Event != projection.LeaseAcquired && i.Epoch == s.Epoch:
				s.Owned, s.Paused = false, false
			}
		},
	}
}

// shard returns the entry of a shard, created when missing. l.mu is held.
func (l *Live) shard(projection, shard string) *liveShard {
	k := liveKey{projection, shard}
	s, ok := l.shards[k]
	if !ok {
		s = &liveShard{LiveShard: LiveShard{LagEvents: -1, LagMillis: -1}}
		l.shards[k] = s
	}
	return s
}

// update applies f to the shard's entry, unless the report comes from an acquisition older
// than the current one (a late report of a lease that ended).
func (l *Live) update(i projection.ShardInfo, f func(*liveShard)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.shard(i.Projection, i.ShardID)
	if i.Epoch < s.Epoch {
		return
	}
	f(s)
}

func (l *Live) setError(projection, shard, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.shard(projection, shard)
	s.LastError, s.LastErrorAt = msg, time.Now()
}

// Shard returns what this process knows of a shard, and whether it knows anything.
func (l *Live) Shard(projection, shard string) (LiveShard, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.shards[liveKey{projection, shard}]
	if !ok {
		return LiveShard{}, false
	}
	return s.LiveShard, true
}

// Sample records every shard's event count at now and updates EventsPerSec: the events
// handled between the oldest kept sample and now, per second. Call it at a regular interval.
func (l *Live) Sample(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.shards {
		s.rates[s.next] = rateSample{at: now, events: s.Events}
		s.next = (s.next + 1) % rateSamples
		s.n = min(s.n+1, rateSamples)
		oldest := s.rates[(s.next-s.n+rateSamples)%rateSamples]
		if dt := now.Sub(oldest.at).Seconds(); s.n > 1 && dt > 0 {
			s.EventsPerSec = float64(s.Events-oldest.events) / dt
		}
	}
}
