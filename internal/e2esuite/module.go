package e2esuite

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/shardmap"
)

// testModuleConflict (issue 8 item 8): a worker projects with flightdelays; a second worker
// started under the same projection name with another module (count) exits 1 with one error
// line naming the projection, both modules (sha256 of the .wasm files) and the live worker,
// without taking a lease; the first keeps every lease, and the read model is exactly
// flightdelays'. Then, the first stopped gracefully, the second module starts at once.
func testModuleConflict(t *testing.T, e *Env) {
	fs := flights(t)[:4000]
	e.Create(4)
	e.Append(fs)
	// The default lease: under load a shorter one may lapse for real.
	spec := Spec{Flags: bulkFlags}
	a := e.Start("a", spec)
	e.WaitOwners("a holds the 4 shards", time.Minute, func(m map[string]int) bool { return m["a"] == 4 })

	b := e.Start("b", Spec{Handler: testwasm.CountAS, Flags: []string{"--until-caught-up"}})
	start := time.Now()
	err := b.Wait(t, time.Minute)
	line := errorLine(b.Stderr())
	if err == nil || line == "" {
		t.Fatalf("second module: exit %v, error line %q; want exit 1 with a projhost: line\n%s", err, line, tail(b.Stderr(), 20))
	}
	t.Logf("second module refused after %s: %s", time.Since(start).Round(10*time.Millisecond), line)
	for _, want := range []string{`projection "` + Projection + `"`, `worker "a"`, sha(t, testwasm.FlightDelaysAS), sha(t, testwasm.CountAS),
		"restart them all with the same module"} {
		if !strings.Contains(line, want) {
			t.Errorf("error line %q does not name %q", line, want)
		}
	}
	if n := len(Where(b.Records(t), Is("lease"))); n != 0 {
		t.Errorf("the refused worker has %d lease events, want none", n)
	}
	e.WaitCaughtUp(3 * time.Minute)
	// The refused worker wrote no lease: the first one lost none to another writer (a lapse
	// on a loaded machine is no sign of the second module).
	for _, r := range Where(a.Records(t), Is("lease", string(projection.LeaseLost))) {
		if strings.Contains(r.Error, shardmap.WhyWritten) || strings.Contains(r.Error, shardmap.WhyConflict) {
			t.Errorf("the first worker lost %s because %q", r.Shard, r.Error)
		}
	}
	a.Stop(t)
	e.CheckReadModel(fs)

	// After a graceful stop the leases are free and carry no module: a new module starts at once.
	c := e.Start("c", Spec{Handler: testwasm.FlightDelaysGo, Flags: append([]string{"--until-caught-up"}, bulkFlags...)})
	if err := c.Wait(t, 5*time.Minute); err != nil {
		t.Fatalf("new module after the old one stopped: %v\n%s", err, tail(c.Stderr(), 20))
	}
	if acq := Where(c.Records(t), Is("lease", string(projection.LeaseAcquired))); len(acq) != 4 {
		t.Fatalf("new module acquired %d leases, want 4", len(acq))
	}
	e.Finish(fs)
}

// sha is the module identity projhost writes for a test module: sha256 of its .wasm file.
func sha(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(testwasm.Path(t, name))
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}
