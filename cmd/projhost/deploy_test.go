package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/kinesistest"
	"github.com/projhost/projhost/internal/s3test"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/registry/s3blobs"
)

// TestDeployVerbs: `deploy` stores validated versions (with --activate, the active one), `handlers
// list` shows them (table and --json), `activate` and `rollback` move the active version; bad
// uploads are refused with one line naming the problem and nothing stored — on the embedded
// store (its modules directory), on DynamoDB with a module store directory, and on DynamoDB with
// an S3 module store (s3rver), whose objects are then checked.
func TestDeployVerbs(t *testing.T) {
	count, fd := testwasm.Path(t, testwasm.CountGo), testwasm.Path(t, testwasm.FlightDelaysAS)
	flights := filepath.Join(testwasm.RepoRoot(t), "plugins", "examples", "flightdelays", "data", "flights-2k.json")
	for _, backend := range []string{"embedded", "dynamodb", "dynamodb+s3"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			projhost(t, "journal", "create", "--data", dir, "--shards", "4")
			projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flights)
			st := []string{"--data", dir}
			var ms []string // the module store flags of deploy
			var modules registry.Blobs
			switch backend {
			case "dynamodb":
				ms = []string{"--module-store", filepath.Join(t.TempDir(), "modules")}
			case "dynamodb+s3":
				c := s3test.Client(t)
				bucket := s3test.Bucket(t, c)
				ms = []string{"--module-store", "s3://" + bucket + "/projhost", "--s3-endpoint", s3test.Endpoint(t)}
				var err error
				modules, err = s3blobs.New(c, bucket, "projhost/")
				require.NoError(t, err)
			}
			if backend != "embedded" {
				_, prefix := dynamotest.Tables(t)
				st = append(st, "--store", "dynamodb", "--dynamodb-endpoint", dynamotest.Endpoint(t), "--table-prefix", prefix)
			}
			with := func(args ...string) []string {
				if args[0] == "deploy" || args[0] == "run" || args[0] == "handlers" && args[1] != "list" {
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

			var rows []registry.VersionJSON
			for _, l := range strings.Split(strings.TrimSpace(projhost(t, with("handlers", "list", "--name", "p", "--json")...)), "\n") {
				var r registry.VersionJSON
				require.NoError(t, json.Unmarshal([]byte(l), &r), l)
				rows = append(rows, r)
			}
			require.Len(t, rows, 2)
			require.Equal(t, []bool{false, true}, []bool{rows[0].Active, rows[1].Active})
			require.Equal(t, "first", rows[0].Note)
			b, err := os.ReadFile(fd)
			require.NoError(t, err)
			require.Equal(t, int64(len(b)), rows[1].Size)
			require.Equal(t, registry.Sum(b), rows[1].SHA256)
			if modules != nil { // the bytes are in the bucket, under PREFIX/<sha256>.wasm
				got, err := modules.Get(context.Background(), rows[1].SHA256)
				require.NoError(t, err)
				require.Equal(t, b, got)
			}
			table := projhost(t, with("handlers", "list", "--name", "p")...)
			require.Regexp(t, `(?m)^2\s+\*\s+[0-9a-f]{12}\s+`, table)

			require.Equal(t, "version 1 of p is active (was version 2)\n", projhost(t, with("handlers", "activate", "--name", "p", "--version", "1")...))
			require.Equal(t, "version 2 of p is active (was version 1)\n", projhost(t, with("handlers", "rollback", "--name", "p")...))
			require.Equal(t, "version 1 of p is active (was version 2)\n", projhost(t, with("handlers", "rollback", "--name", "p")...))
			require.Equal(t, "version 1 of p is already active: nothing changed\n", projhost(t, with("handlers", "activate", "--name", "p", "--version", "1")...))

			garbage := filepath.Join(t.TempDir(), "garbage.wasm")
			require.NoError(t, os.WriteFile(garbage, []byte("MZ\x90\x00 not wasm"), 0o644))
			for _, tc := range []struct {
				name string
				args []string
				want string
			}{
				{"garbage", []string{"deploy", "--name", "p", "--handler", garbage, "--activate"}, "refused, nothing stored: invalid handler module \"p\": not a WebAssembly module"},
				{"too large", []string{"deploy", "--name", "p", "--handler", count, "--max-module-size", "1MiB"}, "refused, nothing stored: module too large"},
				{"a device", []string{"deploy", "--name", "p", "--handler", "/dev/zero"}, "is a character device"},
				{"run: too large", []string{"run", "--name", "p", "--handler", count, "--max-module-size", "1MiB"}, "refused, nothing stored: module too large"},
				{"run: a device", []string{"run", "--name", "p", "--handler", "/dev/zero"}, "is a character device"},
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
			if backend != "embedded" {
				r := cli(t, nil, binPath, "deploy", "--name", "p", "--handler", fd, "--store", "dynamodb", "--dynamodb-endpoint", dynamotest.Endpoint(t), "--data", dir)
				require.Error(t, r.err)
				require.Contains(t, r.stderr, "needs --module-store DIR or s3://BUCKET[/PREFIX]")
				// run --handler deploys the file first: it needs the module store too, and says so in one line.
				r = cli(t, nil, binPath, "run", "--name", "p", "--handler", fd, "--store", "dynamodb", "--dynamodb-endpoint", dynamotest.Endpoint(t), "--data", dir)
				require.Error(t, r.err)
				msg := strings.TrimSpace(r.stderr)
				require.NotContains(t, msg, "\n")
				require.Contains(t, msg, "add --module-store DIR|s3://BUCKET")
			}
		})
	}
}

// TestModuleStoreFlags: --module-store and --s3-endpoint are checked in one place for deploy and
// run; each bad value is refused with one line naming the flag, before anything is stored, and
// a missing bucket is named with what to do.
func TestModuleStoreFlags(t *testing.T) {
	count := testwasm.Path(t, testwasm.CountGo)
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "1")
	ep := s3test.Endpoint(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"upper-case bucket", []string{"--module-store", "s3://Modules"}, `--module-store: registry: invalid argument: bucket name "Modules": S3 bucket names are 3 to 63 lowercase letters`},
		{"no bucket", []string{"--module-store", "s3://"}, `--module-store: registry: invalid argument: bucket name ""`},
		{"query", []string{"--module-store", "s3://modules/p?x=1"}, "no query or fragment in s3://BUCKET[/PREFIX]"},
		{"one slash", []string{"--module-store", "s3:/modules"}, "want s3://BUCKET[/PREFIX]"},
		{"upper-case scheme", []string{"--module-store", "S3://modules"}, `--module-store "S3://modules": give a directory or s3://BUCKET[/PREFIX] (lowercase s3://)`},
		{"http", []string{"--module-store", "http://x"}, `--module-store "http://x": give a directory or s3://BUCKET[/PREFIX]`},
		{"empty folder", []string{"--module-store", "s3://modules//a"}, `an empty folder name in the prefix`},
		{"endpoint without s3", []string{"--s3-endpoint", ep}, "--s3-endpoint needs --module-store s3://BUCKET[/PREFIX]"},
		{"bad endpoint", []string{"--module-store", "s3://modules", "--s3-endpoint", "127.0.0.1:1"}, "--s3-endpoint \"127.0.0.1:1\": want an http:// or https:// URL"},
		{"missing bucket", []string{"--module-store", "s3://projhost-missing/p", "--s3-endpoint", ep},
			`bucket "projhost-missing" does not exist (or these credentials cannot see it): create it (aws s3 mb s3://projhost-missing) or name an existing one`},
	} {
		for _, verb := range []string{"deploy", "run"} {
			t.Run(tc.name+"/"+verb, func(t *testing.T) {
				args := append([]string{verb, "--data", dir, "--name", "p"}, tc.args...)
				if verb == "deploy" {
					args = append(args, "--handler", count)
				}
				r := cli(t, nil, binPath, args...)
				require.Error(t, r.err)
				require.Equal(t, 1, r.err.(*exec.ExitError).ExitCode())
				msg := strings.TrimSpace(r.stderr)
				if verb == "run" { // run logs before failing: the error is its last line
					msg = msg[strings.LastIndex(msg, "\n")+1:]
				}
				require.True(t, strings.HasPrefix(msg, "projhost: "), msg)
				require.Contains(t, msg, tc.want)
			})
		}
	}
	require.Equal(t, "no versions (projhost deploy --name NAME --handler H.wasm --activate)\n",
		projhost(t, "handlers", "list", "--data", dir, "--name", "p"), "the refused deploys stored nothing")
}

// TestDeployWithoutJournal: with no journal in --data, deploy says the smoke run needs one and
// creates nothing; with --smoke-events 0 it deploys without reading any source.
func TestDeployWithoutJournal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	count := testwasm.Path(t, testwasm.CountAS)
	r := cli(t, nil, binPath, "deploy", "--data", dir, "--name", "p", "--handler", count)
	require.Error(t, r.err)
	require.Contains(t, r.stderr, "no journal in "+dir)
	require.Contains(t, r.stderr, "--smoke-events 0 deploys without one")
	_, err := os.Stat(dir)
	require.True(t, os.IsNotExist(err), "a refused deploy created %s", dir)
	out := projhost(t, "deploy", "--data", dir, "--name", "p", "--handler", count, "--smoke-events", "0", "--activate")
	require.Contains(t, out, "smoke run: none (turned off)\nstored version 1 of p\nversion 1 of p is active (was none)\n")
}

// TestDeployKinesis: `deploy --source kinesis --stream S` runs the smoke run over the latest
// records of each open shard of the stream (kinesis-local) and refuses a module that traps on
// them with one line, storing nothing; the embedded store keeps the versions.
func TestDeployKinesis(t *testing.T) {
	kc := kinesistest.Client(t)
	stream, _ := kinesistest.Stream(t, kc, 2)
	k := []string{"--source", "kinesis", "--stream", stream, "--kinesis-endpoint", kinesistest.Endpoint(t)}
	file := jsonLines(t, t.TempDir(), "flights.jsonl", flightcheck.Load(t, flightcheck.DataPath("flights-2k.json"))[:300])
	projhost(t, "kinesis", "put", "--stream", stream, "--key-field", "origin", "--kinesis-endpoint", kinesistest.Endpoint(t), file)
	ss, recs, err := kinesistest.ReadStream(context.Background(), kc, stream)
	require.NoError(t, err)
	want := 0
	for _, s := range ss {
		want += min(len(recs[s.ID]), 50)
	}
	dir := t.TempDir()
	deploy := func(handler string, args ...string) result {
		return cli(t, nil, binPath, append(append([]string{"deploy", "--data", dir, "--name", "p", "--handler", handler, "--smoke-events", "50"}, k...), args...)...)
	}
	r := deploy(testwasm.Path(t, testwasm.CountGo), "--activate")
	require.NoError(t, r.err, r.stderr)
	t.Logf("deploy --source kinesis:\n%s", r.stdout)
	require.Contains(t, r.stdout, fmt.Sprintf("smoke run: %d events of 2 shards", want))
	require.Contains(t, r.stdout, "version 1 of p is active (was none)")

	out := t.TempDir()
	if err := testwasm.AssembleWAT(t, out, filepath.Join(testwasm.RepoRoot(t), "deploy", "testdata", "trap.wat")); err != nil {
		if errors.Is(err, testwasm.ErrNoWABT) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	r = deploy(filepath.Join(out, "trap.wasm"), "--activate")
	require.Error(t, r.err)
	require.Equal(t, 1, r.err.(*exec.ExitError).ExitCode())
	msg := strings.TrimSpace(r.stderr)
	require.NotContains(t, msg, "\n", "one line")
	require.Contains(t, msg, "trap.wasm refused, nothing stored: deploy: the module failed its smoke run on the latest events of shard shardId-")
	require.Len(t, strings.Split(strings.TrimSpace(projhost(t, "handlers", "list", "--data", dir, "--name", "p", "--json")), "\n"), 1,
		"the refused module stored nothing")
}
