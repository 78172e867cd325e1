package host

import (
	"testing"
	"time"
)

// For the tests of package host_test (container-level tests that cannot live in package host,
// which container imports).

// WAT returns the assembled test module name (see wat).
func WAT(t testing.TB, name string) []byte { return wat(t, name) }

// RegisterChild adds a scenario that RunChild runs in a process of its own.
func RegisterChild(name string, f func(t *testing.T) any) { childScenarios[name] = f }

// RunChild runs a registered scenario in a child process (see runChild).
func RunChild(t *testing.T, scenario string, timeout time.Duration, out any, env ...string) {
	t.Helper()
	runChild(t, scenario, timeout, out, env...)
}
