package main

// The runner-level end-to-end suite (internal/e2esuite) against each backend, with the
// projhost binary built once for the package's tests.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/e2esuite"
	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/internal/s3test"
)

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "projhost-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "projhost")
	if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building projhost: %v\n%s", err, out)
		os.Exit(1)
	}
	// dynalite unless $PROJHOST_DYNAMODB_ENDPOINT; kinesis-local unless $PROJHOST_KINESIS_ENDPOINT;
	// s3rver unless $PROJHOST_S3_ENDPOINT.
	code := s3test.RunFunc(func() int { return kinesistest.RunFunc(func() int { return dynamotest.Run(m) }) })
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestE2EEmbedded runs the suite on the embedded SQLite store.
func TestE2EEmbedded(t *testing.T) { e2esuite.Run(t, binPath, e2esuite.Embedded()) }

// TestDynamoE2E runs the suite on DynamoDB (the TestDynamo prefix: the DynamoDB suites).
func TestDynamoE2E(t *testing.T) { e2esuite.Run(t, binPath, e2esuite.DynamoDB(dynamotest.Endpoint(t))) }

// TestHostileEmbedded runs the hostile-module process suite (internal/e2esuite/hostile.go:
// memory bombs, a runaway loop under --trusted, a 1M-mutation output, a log flood, documents
// DynamoDB refuses) on the embedded store. Heavy (a few minutes, one worker at a time):
// go test -run TestHostileEmbedded -v ./cmd/projhost
func TestHostileEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("the hostile process suite is heavy; without -short it runs")
	}
	e2esuite.Hostile(t, binPath, e2esuite.Embedded(), e2esuite.HostileCases())
}

// TestDynamoHostile runs the hostile cases whose outcome depends on the store (the documents
// DynamoDB refuses) on DynamoDB: tools/dynamodb-local/with.sh go test -run TestDynamoHostile -v ./cmd/projhost
func TestDynamoHostile(t *testing.T) {
	e2esuite.Hostile(t, binPath, e2esuite.DynamoDB(dynamotest.Endpoint(t)), e2esuite.StoreHostileCases())
}

// projhost runs the CLI to completion and returns its stdout; it fails the test on error.
func projhost(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("projhost %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// TestMeasureE2E reports figures on each backend, asserting none: recovery after kill -9 with
// the default lease, events/s of one worker, DynamoDB requests per 100 events. Run:
// PROJHOST_E2E_MEASURE=1 go test ./cmd/projhost -run TestMeasureE2E -v
func TestMeasureE2E(t *testing.T) {
	if os.Getenv("PROJHOST_E2E_MEASURE") == "" {
		t.Skip("set PROJHOST_E2E_MEASURE=1 to measure")
	}
	t.Run("embedded", func(t *testing.T) { e2esuite.Measure(t, binPath, e2esuite.Embedded()) })
	t.Run("dynamodb", func(t *testing.T) { e2esuite.Measure(t, binPath, e2esuite.DynamoDB(dynamotest.Endpoint(t))) })
	t.Run("reshard, embedded", func(t *testing.T) { e2esuite.MeasureReshard(t, binPath, e2esuite.Embedded(), e2esuite.Journal()) })
	t.Run("reshard, dynamodb", func(t *testing.T) {
		e2esuite.MeasureReshard(t, binPath, e2esuite.DynamoDB(dynamotest.Endpoint(t)), e2esuite.Journal())
	})
}

// TestDynamoAmbiguous runs issue 9's scenario (internal/e2esuite/ambiguous.go): two workers
// reach DynamoDB through a proxy that applies every 7th or 3rd write and answers 500 or drops
// the connection; the read model stays exact, cursors monotonic, no worker loses a lease to its
// own write, and the events/s with and without faults are logged. A few minutes:
// go test -run TestDynamoAmbiguous -v ./cmd/projhost (tools/dynamodb-local/with.sh for DynamoDB Local).
func TestDynamoAmbiguous(t *testing.T) {
	if testing.Short() {
		t.Skip("the ambiguous-write process scenario takes minutes; without -short it runs")
	}
	e2esuite.Ambiguous(t, binPath, e2esuite.DynamoDB(dynamotest.Endpoint(t)), e2esuite.AmbiguousRuns())
}

// TestVerbsEmbedded and TestVerbsDynamo: pause, resume, reset and rebuild with two running
// workers (internal/e2esuite/verbs.go).
func TestVerbsEmbedded(t *testing.T) { e2esuite.RunVerbs(t, binPath, e2esuite.Embedded()) }

func TestVerbsDynamo(t *testing.T) {
	e2esuite.RunVerbs(t, binPath, e2esuite.DynamoDB(dynamotest.Endpoint(t)))
}
