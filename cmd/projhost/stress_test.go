package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/e2esuite"
	"github.com/projhost/projhost/internal/faultproxy"
)

func leasesOnly(r faultproxy.Request) bool {
	return r.IsWrite() && strings.HasSuffix(r.Table, "leases")
}

func anyOp(faultproxy.Request) bool { return true }

// TestDynamoBreak9 runs break9's adversarial runs of issue 9 (internal/e2esuite/stress.go):
// other fault rates and kinds than TestDynamoAmbiguous (every 2nd write, drops, faults on reads
// too, faults cycling), three workers, a kill -9 during a fault storm, every write faulted while
// the workers stop, lease writes delayed past the lease duration (one worker's, or everyone's),
// a long run. Each requires the read model exact, cursors monotonic, no (shard, epoch) taken by
// two workers, and no lease lost to a conflict no other worker's take explains; losses to a
// store slower than the lease are logged. Opt-in, minutes each:
// PROJHOST_BREAK9=all (or names, comma-separated) go test -run 'TestDynamoBreak9' -v ./cmd/projhost
// (tools/dynamodb-local/with.sh for DynamoDB Local).
func TestDynamoBreak9(t *testing.T) {
	if os.Getenv("PROJHOST_BREAK9") == "" {
		t.Skip("set PROJHOST_BREAK9=all or a comma-separated list of run names")
	}
	runs := []e2esuite.StressRun{
		{Name: "500-every-2nd-3-workers", Workers: 3, Shards: 6, Flights: 6000,
			Rules: []faultproxy.Rule{{Kind: faultproxy.ApplyThen500, Every: 2}}},
		{Name: "drop-every-2nd", Workers: 2, Shards: 4, Flights: 6000,
			Rules: []faultproxy.Rule{{Kind: faultproxy.ApplyThenDrop, Every: 2}}},
		{Name: "mixed-all-ops", Workers: 2, Shards: 4, Flights: 6000, Cycle: 3 * time.Second,
			Rules: []faultproxy.Rule{
				{Kind: faultproxy.ApplyThen500, Every: 3, Match: anyOp},
				{Kind: faultproxy.ApplyThenDrop, Every: 3, Match: anyOp},
				{Kind: faultproxy.ApplyThen500, Every: 2},
			}},
		{Name: "shutdown-every-write-500", Workers: 2, Shards: 4, Flights: 4000,
			Rules:    []faultproxy.Rule{{Kind: faultproxy.ApplyThen500, Every: 5}},
			StopRule: &faultproxy.Rule{Kind: faultproxy.ApplyThen500, Every: 1}},
		{Name: "shutdown-drop-every-2nd", Workers: 3, Shards: 6, Flights: 4000,
			Rules:    []faultproxy.Rule{{Kind: faultproxy.ApplyThenDrop, Every: 4}},
			StopRule: &faultproxy.Rule{Kind: faultproxy.ApplyThenDrop, Every: 2}},
		{Name: "long-3-workers-500-every-3rd", Workers: 3, Shards: 8, Flights: 20000,
			Rules: []faultproxy.Rule{{Kind: faultproxy.ApplyThen500, Every: 3}}},
		{Name: "one-11s-freeze", Workers: 2, Shards: 4, Flights: 6000, SlowOK: true,
			Rules: []faultproxy.Rule{{Kind: faultproxy.DelayThenApply, Every: 300, Limit: 1, Delay: 11 * time.Second, Match: anyOp}}},
		{Name: "kill9-in-storm", Workers: 2, Shards: 4, Flights: 6000, KillAt: 3 * time.Second,
			Rules: []faultproxy.Rule{{Kind: faultproxy.ApplyThenDrop, Every: 3}}},
		{Name: "delay-lease-writes-past-lease", Workers: 2, Shards: 4, Flights: 6000, PerWorker: true, Faulted: []string{"w1"}, SlowOK: true,
			Rules: []faultproxy.Rule{{Kind: faultproxy.DelayThenApply, Every: 6, Delay: 12 * time.Second, Match: leasesOnly}}},
		{Name: "delay-lease-7s-startup", Workers: 2, Shards: 4, Flights: 6000, SlowOK: true,
			Rules: []faultproxy.Rule{{Kind: faultproxy.DelayThenApply, Every: 2, Limit: 3, Delay: 7 * time.Second, Match: leasesOnly}}},
		{Name: "delay-lease-7s-shared", Workers: 2, Shards: 4, Flights: 6000, SlowOK: true,
			Rules: []faultproxy.Rule{{Kind: faultproxy.DelayThenApply, Every: 8, Delay: 7 * time.Second, Match: leasesOnly}}},
	}
	sel := os.Getenv("PROJHOST_BREAK9")
	var pick []e2esuite.StressRun
	for _, r := range runs {
		if sel == "all" || strings.Contains(","+sel+",", ","+r.Name+",") {
			pick = append(pick, r)
		}
	}
	e2esuite.Stress(t, binPath, e2esuite.DynamoDB(dynamotest.Endpoint(t)), pick)
}

// TestDynamoBreak9DeadLetters: dead letters and their replay under faulted writes.
func TestDynamoBreak9DeadLetters(t *testing.T) {
	if os.Getenv("PROJHOST_BREAK9") == "" {
		t.Skip("set PROJHOST_BREAK9")
	}
	for _, c := range []struct {
		name string
		rule faultproxy.Rule
	}{
		{"500-every-3rd-write", faultproxy.Rule{Kind: faultproxy.ApplyThen500, Every: 3}},
		{"drop-every-2nd-any", faultproxy.Rule{Kind: faultproxy.ApplyThenDrop, Every: 2, Match: anyOp}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e2esuite.StressDeadLetters(t, binPath, e2esuite.DynamoDB(dynamotest.Endpoint(t)), 4000, c.rule)
		})
	}
}
