package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/testwasm"
)

// TestDeployVerbs: `deploy` stores validated versions (with --activate, the active one), `handlers
// list` shows them (table and --json), `activate` and `rollback` move the active version; bad
// uploads are refused with one line naming the problem and nothing stored — on the embedded
// store and on DynamoDB (a module store directory).
func TestDeployVerbs(t *testing.T) {
	count, fd := testwasm.Path(t, testwasm.CountGo), testwasm.Path(t, testwasm.FlightDelaysAS)
	flights := filepath.Join(testwasm.RepoRoot(t), "plugins", "examples", "flightdelays", "data", "flights-2k.json")
	for _, backend := range []string{"embedded", "dynamodb"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			projhost(t, "journal", "create", "--data", dir, "--shards", "4")
			projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flights)
			st := []string{"--data", dir}
			var ms []string // the module store flag of deploy
			if backend == "dynamodb" {
				_, prefix := dynamotest.Tables(t)
				st = append(st, "--store", "dynamodb", "--dynamodb-endpoint", dynamotest.Endpoint(t), "--table-prefix", prefix)
				ms = []string{"--module-store", filepath.Join(t.TempDir(), "modules")}
			}
			with := func(args ...string) []string {
				if args[0] == "deploy" {
					args = append(args, ms...)
				}
				return append(args, st...)
			}

			out := projhost(t, with("deploy", "--name", "p", "--handler", count, "--note", "first")...)
			require.Contains(t, out, "smoke run: 400 events of 4 shards")
			require.Contains(t, out, "stored version 1 of p")
			require.NotContains(t, out, "is active")
			out = projhost(t, with("deploy", "--name", "p", "--handler", fd, "--activate")...)
			require.Contains(t, out, "stored version 2 of p\nversion 2 of p is active (was none)")

			var rows []versionRow
			for _, l := range strings.Split(strings.TrimSpace(projhost(t, with("handlers", "list", "--name", "p", "--json")...)), "\n") {
				var r versionRow
				require.NoError(t, json.Unmarshal([]byte(l), &r), l)
				rows = append(rows, r)
			}
			require.Len(t, rows, 2)
			require.Equal(t, []bool{false, true}, []bool{rows[0].Active, rows[1].Active})
			require.Equal(t, "first", rows[0].Note)
			b, err := os.ReadFile(fd)
			require.NoError(t, err)
			require.Equal(t, int64(len(b)), rows[1].Size)
			table := projhost(t, with("handlers", "list", "--name", "p")...)
			require.Regexp(t, `(?m)^2\s+\*\s+[0-9a-f]{12}\s+`, table)

			require.Equal(t, "version 1 of p is active (was version 2)\n", projhost(t, with("handlers", "activate", "--name", "p", "--version", "1")...))
			require.Equal(t, "version 2 of p is active (was version 1)\n", projhost(t, with("handlers", "rollback", "--name", "p")...))
			require.Equal(t, "version 1 of p is active (was version 2)\n", projhost(t, with("handlers", "rollback", "--name", "p")...))

			garbage := filepath.Join(t.TempDir(), "garbage.wasm")
			require.NoError(t, os.WriteFile(garbage, []byte("MZ\x90\x00 not wasm"), 0o644))
			for _, tc := range []struct {
				name string
				args []string
				want string
			}{
				{"garbage", []string{"deploy", "--name", "p", "--handler", garbage, "--activate"}, "refused, nothing stored: invalid handler module \"p\": not a WebAssembly module"},
				{"too large", []string{"deploy", "--name", "p", "--handler", count, "--max-module-size", "1MiB"}, "refused, nothing stored: deploy: module too large"},
				{"bad size flag", []string{"deploy", "--name", "p", "--handler", count, "--max-module-size", "12"}, "--max-module-size"},
				{"unknown version", []string{"handlers", "activate", "--name", "p", "--version", "7"}, "p has no version 7"},
				{"no version flag", []string{"handlers", "activate", "--name", "p"}, "--version N"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					r := cli(t, nil, binPath, with(tc.args...)...)
					require.Error(t, r.err)
					require.Equal(t, 1, r.err.(*exec.ExitError).ExitCode())
					msg := strings.TrimSpace(r.stderr)
					require.NotContains(t, msg, "\n")
					require.Contains(t, msg, tc.want)
				})
			}
			require.Len(t, strings.Split(strings.TrimSpace(projhost(t, with("handlers", "list", "--name", "p", "--json")...)), "\n"), 2,
				"the refused uploads stored nothing")
			if backend == "dynamodb" {
				r := cli(t, nil, binPath, "deploy", "--name", "p", "--handler", fd, "--store", "dynamodb", "--dynamodb-endpoint", dynamotest.Endpoint(t), "--data", dir)
				require.Error(t, r.err)
				require.Contains(t, r.stderr, "needs --module-store DIR")
			}
		})
	}
}
