package projection

import (
	"time"

	"github.com/projhost/projhost/deadletter"
)

// Hooks are callbacks for observers (metrics, tests, status). Every hook is optional. Hooks of
// one shard are called from the goroutine processing it, one at a time; hooks of different
// shards run concurrently, so an implementation shared by shards must be safe for concurrent
// use. A hook must return quickly: it runs on the shard's processing path.
type Hooks struct {
	// Opened: Open claimed a shard at an epoch (OpenInfo.Seq: the cursor processing continues
	// after).
	Opened func(OpenInfo)
	// Batch: the handler processed a batch (successfully). Retried batches count once.
	Batch func(BatchInfo)
	// Flush: mutations and the cursor were committed (a cursor save).
	Flush func(FlushInfo)
	// HandlerError: one failed handler call (every attempt, bisection probes included).
	HandlerError func(HandlerErrorInfo)
	// DeadLettered: an event was stored as a dead letter and the shard went on past it.
	DeadLettered func(deadletter.Letter)
	// Replayed: a dead letter's replay was committed (Err nil) or failed again (Err set; the
	// letter is back in state failed).
	Replayed func(l deadletter.Letter, err error)
	// Stopped: the Stop policy stopped a shard (Reason as stored on its cursor).
	Stopped func(ShardInfo, string)
	// Lag: after every read of a batch, how far the shard's reader is behind the tip.
	Lag func(LagInfo)
	// LogDropped: the handler dropped guest log lines past its rate limit (host.GuestLogRate)
	// during the last handler call (a failed one too).
	LogDropped func(LogDroppedInfo)
	// Module: a shard's handler module was set at a batch boundary: its first one (From "")
	// or a new one from the ModuleProvider (a hot swap), after the old one's output was
	// committed. Events after Seq are handled by Module, those up to it were by From.
	Module func(ModuleInfo)
	// Lease: a container-mode lease event (acquired, lost, released, finished). Each
	// acquisition of a shard by a worker ends in exactly one lost, released or finished event,
	// unless the process dies first.
	Lease func(LeaseInfo)
}

// OpenInfo describes an opened shard.
type OpenInfo struct {
	ShardInfo
	Seq     string // the cursor claimed: the last event committed ("" none)
	Stopped string // why the shard is stopped ("" when it is not)
}

// ModuleInfo describes a shard's change of handler module.
type ModuleInfo struct {
	ShardInfo
	Module string // the module's name (host.Module.Name) now running
	From   string // the one before ("" for the shard's first)
	// Seq is the last sequence number handled (and committed) with From: the switch point
	// ("" when nothing was handled yet in this acquisition's lineage).
	Seq string
}

// ShardInfo identifies a shard being processed.
type ShardInfo struct {
	Projection string
	ShardID    string
	Epoch      int64
}

// BatchInfo describes a handled batch.
type BatchInfo struct {
	ShardInfo
	Events    int
	Mutations int
	FirstSeq  string
	LastSeq   string
	Duration  time.Duration // the handler call(s), retries excluded
	// MemoryBytes is the size of the shard's handler instance's linear memory after the call
	// (host.Handler.MemorySize: a multiple of 64 KiB, at most the runtime's memory limit).
	MemoryBytes uint64
}

// FlushInfo describes a commit.
type FlushInfo struct {
	ShardInfo
	Seq       string // the cursor saved
	Events    int    // events since the previous flush
	Mutations int    // mutations committed (last write per key)
	Replay    string // the dead letter's sequence number for a replay commit, else ""
}

// HandlerErrorInfo describes one failed handler call.
type HandlerErrorInfo struct {
	ShardInfo
	Kind     string // ErrorKind: fail, trap, exit, deadline, bad_output, malformed_event
	Err      error
	Attempt  int // 1-based attempt on this batch
	FirstSeq string
	LastSeq  string
}

// LogDroppedInfo counts guest log lines a shard's handler dropped (host.Handler.LogDropped).
type LogDroppedInfo struct {
	ShardInfo
	Lines uint64 // dropped during the last handler call
	Total uint64 // dropped by the shard's handler since it was created (the shard opened or its module changed)
}

// LagInfo is a shard's lag.
type LagInfo struct {
	ShardInfo
	EventsBehind int64 // -1 unknown
	MillisBehind int64 // -1 unknown
}

// LeaseEvent is what happened to a lease.
type LeaseEvent string

// Lease events.
const (
	LeaseAcquired LeaseEvent = "acquired"
	LeaseLost     LeaseEvent = "lost"
	LeaseReleased LeaseEvent = "released"
	LeaseFinished LeaseEvent = "finished"
	// LeasePaused: the owner holds the lease of a paused shard (projhost pause) and reads and
	// handles nothing until LeaseResumed; its last lag report is then stale.
	LeasePaused  LeaseEvent = "paused"
	LeaseResumed LeaseEvent = "resumed"
)

// LeaseInfo describes a lease event of a container-mode worker.
type LeaseInfo struct {
	ShardInfo
	Worker string
	Event  LeaseEvent
	// How, for LeaseAcquired: "free", "expired", "steal" or "retake" (shardmap.HowFree,
	// HowExpired, HowSteal, HowRetake); From: the lease's previous owner ("" for a free lease).
	How, From string
	// Seq, for LeaseReleased and LeaseFinished: the cursor committed before the hand-over.
	Seq string
	// Reason, for LeaseLost: why, e.g. "not renewed within the lease duration" or "written by
	// another worker" (the lease manager's shardmap.Why* reasons), "lease not renewed in time"
	// (this worker's clock, before a batch or a commit), or a fenced write's error.
	Reason string
}
