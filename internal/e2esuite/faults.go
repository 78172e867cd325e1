package e2esuite

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/tcpproxy"
)

// proxy starts a fault-injecting proxy to the store, closed when the case ends.
func (e *Env) proxy(fy Faulty) *tcpproxy.Proxy {
	e.t.Helper()
	p, err := tcpproxy.Start(fy.Target())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.Close() })
	return p
}

// timeNamespace returns the wrapper command line that runs a worker with its monotonic and
// boot-time clocks secs ahead (and another time zone), or skips t where time namespaces are
// unavailable (they need Linux >= 5.6, util-linux's unshare and root).
func timeNamespace(t *testing.T, secs int) []string {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) not found")
	}
	s := fmt.Sprint(secs)
	if out, err := exec.Command("unshare", "--time", "--monotonic", s, "--fork", "true").CombinedOutput(); err != nil {
		t.Skipf("time namespaces unavailable (needs Linux >= 5.6 and root): %v: %s", err, out)
	}
	return []string{"env", "TZ=Pacific/Kiritimati", "unshare", "--time", "--monotonic", s, "--boottime", s, "--fork", "--kill-child"}
}

// checkAhead returns the pid of the worker running under the time namespace wrapper w was
// started with, after checking that its monotonic clock is secs ahead.
func checkAhead(t *testing.T, w *Worker, secs int) int {
	t.Helper()
	pid := w.cmd.Process.Pid
	var child int
	deadline := time.Now().Add(time.Minute)
	for child == 0 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if f := strings.Fields(string(b)); len(f) == 1 {
			child, _ = strconv.Atoi(f[0])
		} else if time.Now().After(deadline) {
			t.Fatalf("the time namespace wrapper %d has no child", pid)
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	offsets, err := os.ReadFile(fmt.Sprintf("/proc/%d/timens_offsets", child))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(fmt.Sprintf(`monotonic\s+%d\s`, secs)).Match(offsets) {
		t.Fatalf("the worker's monotonic clock is not %d s ahead: %s", secs, offsets)
	}
	return child
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
