// Package suitekit holds the small helpers the conformance suites (shardmap/leasetest,
// cursorstore/cursortest, readmodel/readmodeltest) share.
package suitekit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
