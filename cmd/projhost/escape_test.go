package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestEscapeText(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text, ünïcödé ✓", "plain text, ünïcödé ✓"},
		{"\x1b[31mred\a", `\x1b[31mred\a`},
		{"tab\there", `tab\there`},
		{"c1 \u009b2J del \x7f", `c1 \u009b2J del \x7f`},
		{"bidi \u202egnp.exe", `bidi \u202egnp.exe`},
		{"bad \xff utf-8", `bad \xff utf-8`},
	}
	for _, c := range cases {
		require.Equal(t, c.want, escapeText(c.in), c.in)
	}
}

func TestEscapeJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a":"b"}` + "\n", `{"a":"b"}` + "\n"},
		{"{\"k\":\"x\u009by\x7f\"}\n", `{"k":"x\u009by\u007f"}` + "\n"},
		{"{\"k\":\"\u202e\U000e0041\"}", `{"k":"\u202e\udb40\udc41"}`},
	}
	for _, c := range cases {
		got := escapeJSON([]byte(c.in))
		require.Equal(t, c.want, string(got), c.in)
		var a, b any
		require.NoError(t, json.Unmarshal([]byte(c.in), &a))
		require.NoError(t, json.Unmarshal(got, &b))
		require.Equal(t, a, b, "the same JSON value")
	}
}

// requireTerminalSafe fails unless s holds no control or format character but newlines.
func requireTerminalSafe(t *testing.T, what, s string) {
	t.Helper()
	require.True(t, utf8.ValidString(s), what)
	for _, r := range s {
		require.False(t, r != '\n' && terminalUnsafe(r), "%s holds %U raw: %q", what, r, s)
	}
}

// TestTestCommandEscapesControlBytes: a handler whose log line, output keys and documents, and
// failure message hold terminal control bytes (testdata/ctlbytes.wat): `projhost test` prints
// none of them raw, and its JSON lines still decode to the handler's values.
func TestTestCommandEscapesControlBytes(t *testing.T) {
	dir := t.TempDir()
	ok, fail := filepath.Join(dir, "ok.jsonl"), filepath.Join(dir, "fail.jsonl")
	require.NoError(t, os.WriteFile(ok, []byte(`{"k":"a"}`+"\n"), 0o644))
	require.NoError(t, os.WriteFile(fail, []byte(`{"k":"Fx"}`+"\n"), 0o644))
	h := filepath.Join("testdata", "ctlbytes.wasm")

	r := cli(t, nil, binPath, "test", "--handler", h, "--events", ok, "--key-field", "k")
	require.NoError(t, r.err, r.stderr)
	requireTerminalSafe(t, "stdout", r.stdout)
	requireTerminalSafe(t, "stderr", r.stderr)
	var line struct {
		Key string          `json:"key"`
		Doc json.RawMessage `json:"doc"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &line))
	require.Equal(t, "k\u009b\x7f", line.Key)
	var doc map[string]string
	require.NoError(t, json.Unmarshal(line.Doc, &doc))
	require.Equal(t, map[string]string{"s": "\u009b"}, doc)
	require.Contains(t, r.stderr, `\x1b]0;pwned\alog`, "the guest's log line, escaped")

	r = cli(t, nil, binPath, "test", "--handler", h, "--events", fail, "--key-field", "k")
	require.Error(t, r.err)
	requireTerminalSafe(t, "stderr", r.stderr)
	last := strings.TrimSpace(r.stderr)
	last = last[strings.LastIndex(last, "\n")+1:]
	require.True(t, strings.HasPrefix(last, "projhost: handler failed the batch"), last)
	require.Contains(t, last, `\x1b[31mred\a`, "the failure message, escaped")
}

// TestOperatorVerbsEscapeControlBytes: a handler's failure message (and a partition key) reach
// the operator's terminal escaped in `status` (STOPPED line), `resume` and `deadletters list`,
// as in `projhost test`.
func TestOperatorVerbsEscapeControlBytes(t *testing.T) {
	h := filepath.Join("testdata", "ctlbytes.wasm")
	for _, policy := range []string{"stop", "dead-letter"} {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			events := filepath.Join(dir, "fail.jsonl")
			require.NoError(t, os.WriteFile(events, []byte(`{"k":"F\u001b[2J\u202e"}`+"\n"), 0o644))
			r := cli(t, nil, binPath, "journal", "create", "--data", dir, "--shards", "1")
			require.NoError(t, r.err, r.stderr)
			r = cli(t, nil, binPath, "journal", "append", "--data", dir, "--key-field", "k", events)
			require.NoError(t, r.err, r.stderr)
			r = cli(t, nil, binPath, "run", "--data", dir, "--name", "p", "--handler", h, "--until-caught-up",
				"--on-error", policy, "--max-attempts", "1")
			requireTerminalSafe(t, "run stderr", r.stderr)
			var outs []string
			if policy == "stop" {
				require.Error(t, r.err)
				st := cli(t, nil, binPath, "status", "--data", dir, "--name", "p")
				require.NoError(t, st.err, st.stderr)
				require.Contains(t, st.stdout, "STOPPED")
				rs := cli(t, nil, binPath, "resume", "--data", dir, "--name", "p")
				require.NoError(t, rs.err, rs.stderr)
				require.Contains(t, rs.stdout, "resumed")
				outs = append(outs, st.stdout, rs.stdout)
			} else {
				require.NoError(t, r.err, r.stderr)
				dl := cli(t, nil, binPath, "deadletters", "list", "--data", dir, "--name", "p")
				require.NoError(t, dl.err, dl.stderr)
				require.Contains(t, dl.stdout, `F\x1b[2J\u202e`, "the partition key, escaped")
				outs = append(outs, dl.stdout)
			}
			for _, out := range outs {
				requireTerminalSafe(t, "stdout", out)
				require.Contains(t, out, `\x1b[31mred\a`, "the failure message, escaped")
			}
		})
	}
}
