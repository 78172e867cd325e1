// Package dynamotest gives tests a DynamoDB client for a real local DynamoDB-compatible server.
//
// Use it from a test package's TestMain:
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) }
//
// Main uses the server at $PROJHOST_DYNAMODB_ENDPOINT when set (e.g. "http://127.0.0.1:4567"
// from tools/dynalite/start.sh, or Amazon's DynamoDB Local from tools/dynamodb-local/start.sh);
// otherwise it starts tools/dynalite on a free loopback port for the package's tests and stops it
// afterwards. When no server can be had, tests calling Client are skipped — unless CI=true, where
// Main fails the run instead.
//
// `make test` runs every package that uses dynamotest twice: with the rest of the tests (on
// dynalite), then again on DynamoDB Local (target test-dynamo under tools/dynamodb-local/with.sh,
// which sets $PROJHOST_DYNAMODB_ENDPOINT). Tests must pass on both. Differences seen between
// dynalite 4.0.0 and DynamoDB Local 1.25.1:
//   - DynamoDB Local refuses map keys that are empty or of 64 KiB and more, and attributes
//     nested past 32 levels (ValidationException); dynalite stores them.
//   - DynamoDB Local returns the item with ReturnValuesOnConditionCheckFailure; dynalite none.
//   - DynamoDB Local returns a number as it was written ("007.50"); dynalite normalises ("7.5").
//   - DynamoDB Local's error responses lack the X-Amz-Crc32 header: the Go SDK then logs
//     "failed to close HTTP response body ... checksum" once per error response (harmless).
//
// Both refuse unescaped reserved words, unused expression names or values and empty key values.
package dynamotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/internal/localserver"
)

// EndpointEnv names the environment variable with an already running server's endpoint URL.
const EndpointEnv = "PROJHOST_DYNAMODB_ENDPOINT"

var harness = &localserver.Harness{Name: "dynamotest",
	Server: localserver.Server{Tool: "dynalite", PidEnv: "DYNALITE_PIDFILE", EndpointEnv: EndpointEnv}}

// Main finds or starts the server, runs the tests, stops a server it started, and exits with
// the tests' code. It never returns.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit, for a TestMain with more to clean up: it returns the exit code.
func Run(m *testing.M) int { return harness.Run(m) }

// Endpoint returns the server's endpoint URL, or skips t when there is none.
func Endpoint(t testing.TB) string {
	t.Helper()
	return harness.Endpoint(t)
}

// Client returns a client for the server (region us-east-1, dummy credentials), or skips t.
func Client(t testing.TB) *dynamodb.Client {
	t.Helper()
	ep := Endpoint(t)
	c, err := dynamotables.NewClient(context.Background(), dynamotables.WithEndpoint(ep),
		dynamotables.WithStaticCredentials("local", "local"), dynamotables.WithRegion(dynamotables.LocalRegion))
	if err != nil {
		t.Fatalf("dynamotest: client for %s: %v", ep, err)
	}
	return c
}

// Tables creates projhost's tables under a fresh random prefix ("t<hex>-"), deletes them when t
// ends, and returns the client and the prefix.
func Tables(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	c := Client(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "t" + hex.EncodeToString(b[:]) + "-"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamotables.CreateTables(ctx, c, prefix); err != nil {
		t.Fatalf("dynamotest: create tables: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dynamotables.DeleteTables(ctx, c, prefix); err != nil {
			t.Errorf("dynamotest: delete tables: %v", err)
		}
	})
	return c, prefix
}
