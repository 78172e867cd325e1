package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/testwasm"
)

// TestPartitionKeyLimit: `journal append` takes a partition key of 256 characters of 4 UTF-8
// bytes (1024 bytes, the longest Kinesis accepts) and `run` projects it with both SDKs' count
// handlers, whose documents are stored under it; a key of 257 characters (Kinesis counts
// characters, not bytes) is refused by `journal append` with the field, its length and the
// limit, and nothing of that file is appended.
func TestPartitionKeyLimit(t *testing.T) {
	long := strings.Repeat("😀", 256)
	require.Len(t, long, 1024)
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "2")

	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"k":"a"}`+"\n"+`{"k":"`+strings.Repeat("😀", 257)+`"}`+"\n"), 0o644))
	requireRefused(t, []string{"journal", "append", "--data", dir, "--key-field", "k", bad},
		`element 1: field "k" is 257 characters long; partition keys are at most 256 characters (the Kinesis limit)`)

	good := filepath.Join(t.TempDir(), "good.jsonl")
	require.NoError(t, os.WriteFile(good, []byte(`{"k":"`+long+`"}`+"\n"+`{"k":"a"}`+"\n"+`{"k":"`+long+`"}`+"\n"), 0o644))
	projhost(t, "journal", "append", "--data", dir, "--key-field", "k", good)
	for _, mod := range []string{testwasm.CountAS, testwasm.CountGo} {
		name := strings.ReplaceAll(mod, "-", "_")
		projhost(t, "run", "--data", dir, "--name", name, "--handler", testwasm.Path(t, mod), "--until-caught-up")
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(projhost(t, "query", "--data", dir, "--name", name, "--collection", "counts")), "\n") {
			var row struct {
				Key string          `json:"key"`
				Doc json.RawMessage `json:"doc"`
			}
			require.NoError(t, json.Unmarshal([]byte(l), &row), l)
			got[row.Key] = string(row.Doc)
		}
		// "a" once: the refused file's first event was not appended.
		require.Equal(t, map[string]string{"a": `{"count":1}`, long: `{"count":2}`}, got, mod)
	}
}
