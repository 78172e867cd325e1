// Package e2esuite is the runner-level end-to-end suite: real `projhost` processes (run,
// journal, kinesis, status, deadletters, resume, query) on a stream — the local journal, or a
// Kinesis stream on a Kinesis-compatible server (RunOn with Kinesis: the cases that need nothing
// journal-specific) — with leases, cursors, read models and dead letters in one backend's store.
// One suite runs against every backend (the embedded SQLite store, DynamoDB); a backend declares
// the optional Features it supports, and cases needing an undeclared one are skipped, saying so.
//
// The workers are observed through their trace files (`projhost run --trace FILE`, JSON lines of
// projection.TraceRecord: every open, batch, cursor save, handler error, dead letter, replay,
// stop and lease event), through the stores (opened in this process the way the CLI opens them)
// and through the CLI's own output (status --json, deadletters list --json, exit statuses),
// never by reading their log text: a worker's stderr is only printed, its tail, when a case
// fails.
//
// Every case ends with Env.Finish: the read model equals the independent computation of
// internal/flightcheck, no polled cursor moved backwards or lowered its epoch, and the trace
// history holds (history.go: no save past a newer owner's claim, hand-overs exact, every
// acquisition ended once).
//
// Use it from a test of the package that builds the binary:
//
//	func TestE2EEmbedded(t *testing.T) { e2esuite.Run(t, bin, e2esuite.Embedded()) }
//	func TestKinesisE2E(t *testing.T) { e2esuite.RunOn(t, bin, e2esuite.DynamoDB(ep), e2esuite.Kinesis(kep)) }
package e2esuite

import (
	"testing"

	"github.com/projhost/projhost/cursorstore"
	"github.com/projhost/projhost/internal/suitekit"
	"github.com/projhost/projhost/internal/tcpproxy"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/store"
)

// Features are the optional behaviours a backend declares.
type Features struct {
	// ProxyFaults: the store is a server reached over TCP, so a case can put a fault-injecting
	// proxy (internal/tcpproxy) between one worker and it: black-hole or reset its connections,
	// or freeze it inside a chosen write and deliver that write late. The backend's Store then
	// implements Faulty.
	ProxyFaults bool
	// ClockSkew: a worker may run in a Linux time namespace with its monotonic clock 30 s ahead
	// of the others' (nothing of the store depends on the workers' clocks). The case is skipped
	// at run time where time namespaces are unavailable (Linux < 5.6, not root).
	ClockSkew bool
}

// Feature names (suitekit's declared features).
const (
	FeatureProxyFaults = "proxy-faults"
	FeatureClockSkew   = "clock-skew"
)

func (f Features) names() []string {
	var out []string
	if f.ProxyFaults {
		out = append(out, FeatureProxyFaults)
	}
	if f.ClockSkew {
		out = append(out, FeatureClockSkew)
	}
	return out
}

// Backend is a store the suite runs against.
type Backend struct {
	Name     string
	Features Features
	// InDataDir: the store lives in the case's data directory (--data), as the embedded one
	// does; the commands need --data whatever the stream.
	InDataDir bool
	// NewStore makes a fresh, empty store for one case whose journal (and embedded store) lives
	// in dir; it is removed when t ends. projhost runs a projhost command (failing t on error)
	// and returns its stdout.
	NewStore func(t *testing.T, dir string, projhost func(args ...string) string) Store
}

// Store is one case's store.
type Store interface {
	// Flags are the store flags of the projhost commands that take them (--data comes apart).
	Flags() []string
	// ModuleFlags are the module store flags of `run` (and `deploy`): none where the default
	// (the modules directory in --data) serves; a directory of the case's otherwise (every
	// worker of a case runs on this machine). They reach no proxy.
	ModuleFlags() []string
	// Open opens the stores in this process, as `projhost run` does; closed when t ends.
	Open(t *testing.T) *store.Stores
	// Cursors reads the cursors of projection's shards at once (a missing one may be absent).
	Cursors(t *testing.T, st *store.Stores, projection string, shards []string) (map[string]cursorstore.Cursor, error)
	// LeaseFields names the fields that the store keeps in the lease items of projection.
	LeaseFields(t *testing.T, projection string) []string
}

// WriteKind is a write a Faulty store can recognise on the wire.
type WriteKind string

// Write kinds.
const (
	ReadModelWrite WriteKind = "read-model write"
	CursorSave     WriteKind = "cursor save"
)

// Faulty is what the Store of a backend declaring ProxyFaults implements.
type Faulty interface {
	Store
	// Target is the address (host:port) a proxy forwards to.
	Target() string
	// FlagsVia are the store flags that reach the store through a proxy listening at addr.
	FlagsVia(addr string) []string
	// IsWrite reports whether chunk (what one read from a client returned: on loopback HTTP,
	// usually a whole request) is a write of kind.
	IsWrite(kind WriteKind, chunk []byte) bool
	// CheckRejected fails t unless the write in request (a chunk IsWrite matched, delivered
	// after a newer owner claimed the shard) was rejected: the item it targets carries a newer
	// epoch than the request's.
	CheckRejected(t *testing.T, request []byte)
}

// Case is one scenario.
type Case = suitekit.Case[*Env]

// Run runs every case against b, each with its own journal and store; bin is the projhost
// binary. RunOn runs them on another Stream.
func Run(t *testing.T, bin string, b Backend) {
	t.Helper()
	runCases(t, bin, b, Journal(), Cases())
}

func runCases(t *testing.T, bin string, b Backend, s Stream, cs []Case) {
	t.Helper()
	suitekit.Run(t, func(t *testing.T) *Env { return newEnv(t, bin, b, s) }, cs, b.Features.names()...)
}

// Cases are the suite's scenarios.
func Cases() []Case {
	return []Case{
		{Name: "until caught up, AssemblyScript handler", Fn: untilCaughtUp(testwasm.FlightDelaysAS)},
		{Name: "until caught up, Go handler", Fn: untilCaughtUp(testwasm.FlightDelaysGo)},
		{Name: "lease balance then three workers project", Fn: testBalance},
		{Name: "a worker with another module switches every worker to it", Fn: testModuleSwap},
		{Name: "kill -9 twice while appending", Fn: testKill9Twice},
		{Name: "split and merge mid-run with kill -9", Fn: testReshard},
		{Name: "paused worker is fenced", Fn: testPausedWorker},
		{Name: "one of two workers paused ten times", Fn: testPausedTenTimes},
		{Name: "graceful handover", Fn: testGracefulHandover},
		{Name: "poison events dead-lettered then replayed", Fn: testPoisonEvents},
		{Name: "replay requested with no worker running", Fn: testReplayNoWorker},
		{Name: "stop policy then resume", Fn: testStopPolicy},
		{Name: "frozen read-model write delivered late", Feature: FeatureProxyFaults, Fn: frozenWrite(ReadModelWrite)},
		{Name: "frozen cursor save delivered late", Feature: FeatureProxyFaults, Fn: frozenWrite(CursorSave)},
		{Name: "store outage, black hole", Feature: FeatureProxyFaults, Fn: storeOutage(tcpproxy.Hold)},
		{Name: "store outage, connections reset", Feature: FeatureProxyFaults, Fn: storeOutage(tcpproxy.Refuse)},
		{Name: "clock ahead never takes a live lease", Feature: FeatureClockSkew, Fn: testClockAhead},
	}
}
