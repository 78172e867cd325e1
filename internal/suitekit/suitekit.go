// Package suitekit holds what the conformance suites (shardmap/leasetest, cursorstore/cursortest,
// readmodel/readmodeltest, deadletter/deadlettertest) share: running their cases (Run, with
// optional features a store declares), contexts and names.
package suitekit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"testing"
	"time"
)

// Timeout bounds every call a suite makes (generous: a local DynamoDB-compatible server does
// ~600 conditional writes/s).
const Timeout = 30 * time.Second

// Context returns a context cancelled after Timeout or at the end of t.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// Name returns prefix + "-" + 12 random hex digits: a projection name unique to one test, so
// suites can share one table or database across subtests.
func Name(t testing.TB, prefix string) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Case is one named test of a conformance suite for stores of type S.
type Case[S any] struct {
	Name string
	// Feature names the optional behaviour the case checks ("" = the interface's core contract);
	// Run skips the case unless the store declares that feature.
	Feature string
	Fn      func(t *testing.T, s S)
}

// Run runs every case as a subtest of t named after it, each with its own store from newStore
// (called once per case that is not skipped). Cases of a feature not in declared are skipped,
// saying so.
func Run[S any](t *testing.T, newStore func(t *testing.T) S, cases []Case[S], declared ...string) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.Feature != "" && !slices.Contains(declared, c.Feature) {
				t.Skipf("the store does not declare feature %q", c.Feature)
			}
			c.Fn(t, newStore(t))
		})
	}
}
