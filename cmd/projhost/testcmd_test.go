package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/readmodel"
)

// TestTestCommandFlights20k: `projhost test` of each flightdelays build over flights-20k prints
// a read model equal, document by document, to the independent computation, for batch sizes 1,
// 7 and 500, as JSON lines sorted by collection then key.
func TestTestCommandFlights20k(t *testing.T) {
	data := flightcheck.DataPath("flights-20k.json")
	fs := flightcheck.Load(t, data)
	for _, h := range []string{"flightdelays-go", "flightdelays-as"} {
		wasm := testwasm.Path(t, h)
		for _, bs := range []int{1, 7, 500} {
			t.Run(fmt.Sprintf("%s/batch=%d", h, bs), func(t *testing.T) {
				out := projhost(t, "test", "--handler", wasm, "--events", data, "--key-field", "origin", "--batch-size", fmt.Sprint(bs))
				var docs []readmodel.Doc
				var order []string
				sc := bufio.NewScanner(strings.NewReader(out))
				sc.Buffer(make([]byte, 1<<20), 1<<20)
				for sc.Scan() {
					var l struct {
						Collection string          `json:"collection"`
						Key        string          `json:"key"`
						Doc        json.RawMessage `json:"doc"`
					}
					require.NoError(t, json.Unmarshal(sc.Bytes(), &l), sc.Text())
					docs = append(docs, readmodel.Doc{Collection: l.Collection, Key: l.Key, Doc: l.Doc})
					order = append(order, l.Collection+"\x00"+l.Key)
				}
				require.True(t, sort.StringsAreSorted(order), "sorted by collection then key")
				flightcheck.Check(t, fs, docs)
			})
		}
	}
}

// TestTestCommandErrors: bad modules and bad input give a one-line error and a non-zero exit.
func TestTestCommandErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.wasm")
	require.NoError(t, os.WriteFile(garbage, []byte("not wasm at all"), 0o644))
	badEvents := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(badEvents, []byte(`[{"origin":"DTW","delay":1,"distance":1,"destination":"X"}, 42]`), 0o644))
	noKey := filepath.Join(dir, "nokey.json")
	require.NoError(t, os.WriteFile(noKey, []byte(`{"dest":"X"}`+"\n"), 0o644))
	malformed := filepath.Join(dir, "malformed.jsonl")
	require.NoError(t, os.WriteFile(malformed, []byte(`{"origin":"DTW","delay":"late","distance":1,"destination":"X"}`+"\n"), 0o644))
	good := testwasm.Path(t, "flightdelays-as")
	events := flightcheck.DataPath("flights-2k.json")
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"garbage module", []string{"--handler", garbage, "--events", events}, "not a WebAssembly module"},
		{"missing module", []string{"--handler", filepath.Join(dir, "nope.wasm"), "--events", events}, "no such file"},
		{"not an object", []string{"--handler", good, "--events", badEvents}, "element 1 is not a JSON object"},
		{"no key field", []string{"--handler", good, "--events", noKey}, `no field "origin"`},
		{"handler fails", []string{"--handler", good, "--events", malformed}, "delay"},
		{"missing flag", []string{"--events", events}, "handler"},
		{"memory limit not in pages", []string{"--handler", good, "--events", events, "--memory-limit", "100KiB"}, `--memory-limit: bad memory limit "100KiB": 102400 bytes is not a whole number of 64 KiB wasm pages (e.g. 64KiB or 128KiB)`},
		{"memory limit in decimal units", []string{"--handler", good, "--events", events, "--memory-limit", "128MB"}, "decimal units are not accepted; use KiB, MiB or GiB"},
		{"memory limit too large", []string{"--handler", good, "--events", events, "--memory-limit", "8GiB"}, "at most 4GiB"},
		{"memory limit below the module's minimum", []string{"--handler", testwasm.Path(t, "flightdelays-go"), "--events", events, "--memory-limit", "64KiB"},
			"memory exceeds the host's cap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binPath, append([]string{"test"}, c.args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			require.NotZero(t, ee.ExitCode())
			msg := strings.TrimRight(stderr.String(), "\n")
			require.NotContains(t, msg, "\n", "one line")
			require.NotContains(t, msg, "goroutine")
			require.Contains(t, msg, c.msg)
			require.Empty(t, stdout.String())
		})
	}
}

// TestRunMemoryLimit: run refuses a bad --memory-limit as test does (one rule, in
// host.ParseMemoryLimit), and passes a good one to the runtime (a Go handler does not fit in
// 64KiB, and Load says so).
func TestRunMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "1")
	goWasm := testwasm.Path(t, "flightdelays-go")
	for _, c := range []struct{ limit, msg string }{
		{"100KiB", `--memory-limit: bad memory limit "100KiB": 102400 bytes is not a whole number of 64 KiB wasm pages`},
		{"1GB", "decimal units are not accepted"},
		{"64KiB", "memory exceeds the host's cap"},
	} {
		t.Run(c.limit, func(t *testing.T) {
			cmd := exec.Command(binPath, "run", "--data", dir, "--name", "m", "--handler", goWasm, "--until-caught-up", "--memory-limit", c.limit)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			require.NotZero(t, ee.ExitCode())
			require.Contains(t, stderr.String(), c.msg)
			require.NotContains(t, stderr.String(), "goroutine")
		})
	}
}
