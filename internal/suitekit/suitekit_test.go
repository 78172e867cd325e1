package suitekit

import (
	"regexp"
	"testing"
	"time"
)

func TestName(t *testing.T) {
	a, b := Name(t, "leasetest"), Name(t, "leasetest")
	if !regexp.MustCompile(`^leasetest-[0-9a-f]{12}$`).MatchString(a) || a == b {
		t.Fatalf("Name = %q, %q: want leasetest-<12 hex digits>, different each call", a, b)
	}
}

func TestContext(t *testing.T) {
	dl, ok := Context(t).Deadline()
	if left := time.Until(dl); !ok || left <= Timeout-time.Second || left > Timeout {
		t.Fatalf("deadline in %v (set %v), want about %v", left, ok, Timeout)
	}
}
