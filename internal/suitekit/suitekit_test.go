package suitekit

import (
	"regexp"
	"slices"
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

func TestRun(t *testing.T) {
	var stores, ran []string
	newStore := func(t *testing.T) string {
		stores = append(stores, t.Name())
		return "store-" + t.Name()
	}
	record := func(t *testing.T, s string) {
		if s != "store-"+t.Name() {
			t.Errorf("case %s got store %q, want its own", t.Name(), s)
		}
		ran = append(ran, t.Name())
	}
	cases := []Case[string]{
		{Name: "core", Fn: record},
		{Name: "declared", Feature: "replay", Fn: record},
		{Name: "undeclared", Feature: "other", Fn: record},
	}
	t.Run("suite", func(t *testing.T) { Run(t, newStore, cases, "replay") })
	want := []string{"TestRun/suite/core", "TestRun/suite/declared"}
	if !slices.Equal(ran, want) || !slices.Equal(stores, want) {
		t.Fatalf("ran %v with stores for %v, want %v for both (the undeclared feature skipped, without a store)", ran, stores, want)
	}
}
