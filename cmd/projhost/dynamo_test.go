package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/dynamotest"
)

// TestDynamoMissingTables: a command on DynamoDB tables that do not exist fails with one line
// naming the missing tables and saying to run `projhost tables create` with the same flags,
// before anything else is done.
func TestDynamoMissingTables(t *testing.T) {
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "1")
	store := []string{"--data", dir, "--store", "dynamodb", "--dynamodb-endpoint", dynamotest.Endpoint(t), "--table-prefix", "never-made-"}
	for _, args := range [][]string{
		{"status"},
		{"query", "--name", "f", "--collection", "c"},
		{"run", "--name", "f", "--handler", "testdata/ctlbytes.wasm", "--until-caught-up", "--module-store", t.TempDir()},
	} {
		r := cli(t, nil, binPath, append(args, store...)...)
		require.Error(t, r.err, args)
		msg := strings.TrimSpace(r.stderr)
		msg = msg[strings.LastIndex(msg, "\n")+1:]
		for _, want := range []string{"projhost: ", "never-made-leases", "never-made-readmodel", "projhost tables create", "--table-prefix"} {
			require.Contains(t, msg, want, args)
		}
	}
}
