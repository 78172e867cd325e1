package e2esuite

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/kinesistest"
)

// bin is the projhost binary TestMain builds for the process tests of this package.
var bin string

// TestMain builds cmd/projhost and finds or starts the local servers: dynalite unless
// $PROJHOST_DYNAMODB_ENDPOINT, kinesis-local unless $PROJHOST_KINESIS_ENDPOINT.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "projhost-e2esuite-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "projhost")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/projhost").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building projhost: %v\n%s", err, out)
		os.Exit(1)
	}
	code := kinesistest.RunFunc(func() int { return dynamotest.Run(m) })
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestKinesisE2E runs the suite's Kinesis cases (KinesisCases: kill -9 twice while appending;
// split and merge mid-run with kill -9) on a Kinesis stream of kinesis-local, with leases,
// cursors and read models on DynamoDB (dynalite): `kinesis put` while two or three workers run,
// `kinesis split` and `kinesis merge` under them, workers killed -9.
// Here and not in cmd/projhost so that `go test ./...` runs it beside that package's suites.
func TestKinesisE2E(t *testing.T) {
	RunOn(t, bin, DynamoDB(dynamotest.Endpoint(t)), Kinesis(kinesistest.Endpoint(t)))
}

// TestMeasureKinesis reports, asserting none, the time from a split and a merge of an idle
// Kinesis stream to the children being open (MeasureReshard). Run:
// PROJHOST_E2E_MEASURE=1 go test ./internal/e2esuite -run TestMeasureKinesis -v
func TestMeasureKinesis(t *testing.T) {
	if os.Getenv("PROJHOST_E2E_MEASURE") == "" {
		t.Skip("set PROJHOST_E2E_MEASURE=1 to measure")
	}
	MeasureReshard(t, bin, DynamoDB(dynamotest.Endpoint(t)), Kinesis(kinesistest.Endpoint(t)))
}
