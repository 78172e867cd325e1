package main

// `run --listen --admin-token-file`: the admin API on a running worker; the flags' errors.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/admin"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/local"
	"github.com/projhost/projhost/store/sqlite"
)

const (
	testAdminToken = "0123456789abcdef0123456789abcdef-admin"
	testReadToken  = "0123456789abcdef0123456789abcdef-read"
)

// noRedirects is a client that returns redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// adminCall sends method url with the bearer token and body; it returns the status and the
// JSON answer (nil for the listener's plain 404 before the API is mounted).
func adminCall(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := noRedirects.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	if res.StatusCode == http.StatusNotFound && !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		return res.StatusCode, nil
	}
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out), "answer %q", b)
	return res.StatusCode, out
}

func writeToken(t *testing.T, dir, name, token string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(token+"\n"), 0o600))
	return p
}

// TestAdminAPIOnWorker: a worker started with the two token files serves the admin API on its
// listener: a pause through it lands in the store (and a resume lifts it), the read-only
// token reads the versions and the status (leases judged live) but may not pause, no token gets
// 401, and the worker logs an audit line per mutating call.
func TestAdminAPIOnWorker(t *testing.T) {
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "2")
	events := filepath.Join(dir, "events.jsonl")
	var lines []string
	for i := range 40 {
		lines = append(lines, `{"k":"key`+string(rune('a'+i%26))+`"}`)
	}
	require.NoError(t, os.WriteFile(events, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	projhost(t, "journal", "append", "--data", dir, "--key-field", "k", events)
	cmd, log, addr := startRun(t, "--data", dir, "--name", "f", "--handler", testwasm.Path(t, testwasm.CountAS), "--listen", "127.0.0.1:0",
		"--admin-token-file", writeToken(t, dir, "admin.token", testAdminToken), "--admin-read-token-file", writeToken(t, dir, "read.token", testReadToken))
	base := "http://" + addr + admin.Prefix + "f"

	// The API is mounted once the module store is open, a moment after the listener, and
	// --handler's version is activated a moment later.
	deadline := time.Now().Add(time.Minute)
	for {
		status, out := adminCall(t, "GET", base+"/versions", testReadToken, "")
		if status == http.StatusOK && out["active"] == float64(1) {
			break // run --handler made version 1 active
		}
		if status != http.StatusOK {
			require.Nil(t, out, "before the API is mounted, the listener's plain 404: %d %v", status, out)
		}
		require.False(t, time.Now().After(deadline), "no admin API after a minute; worker log:\n%s", log.String())
		time.Sleep(50 * time.Millisecond)
	}

	status, out := adminCall(t, "POST", base+"/pause", "", `{"shard":"shardId-000000000001"}`)
	require.Equal(t, http.StatusUnauthorized, status, "%v", out)
	// No redirect before authentication: "/admin" and unclean paths get a JSON error.
	status, out = adminCall(t, "GET", "http://"+addr+"/admin", testAdminToken, "")
	require.Equal(t, http.StatusNotFound, status, "%v", out)
	require.NotNil(t, out, "a JSON answer")
	status, out = adminCall(t, "POST", "http://"+addr+admin.Prefix+"x/../f/pause", testAdminToken, `{"shard":"shardId-000000000001"}`)
	require.Equal(t, http.StatusBadRequest, status, "%v", out)
	require.Contains(t, out["error"], "not clean")
	status, out = adminCall(t, "POST", base+"/pause", testReadToken, `{"shard":"shardId-000000000001"}`)
	require.Equal(t, http.StatusForbidden, status, "%v", out)

	pauses := func() (bool, []string) {
		st, err := sqlite.OpenReadOnly(dir)
		require.NoError(t, err)
		defer st.Close()
		p, err := st.Cursors.Pauses(context.Background(), "f")
		require.NoError(t, err)
		return p.All, p.Shards
	}
	all, ps := pauses()
	require.False(t, all)
	require.Empty(t, ps, "the refused requests paused nothing")

	status, out = adminCall(t, "POST", base+"/pause", testAdminToken, `{"shard":"shardId-000000000001"}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	all, ps = pauses()
	require.False(t, all)
	require.Equal(t, []string{"shardId-000000000001"}, ps)
	status, out = adminCall(t, "POST", base+"/resume", testAdminToken, "")
	require.Equal(t, http.StatusOK, status, "%v", out)
	all, ps = pauses()
	require.False(t, all)
	require.Empty(t, ps)

	// GET /status judges lease liveness with the status page's watcher: both leases are seen
	// renewed (live) within a few lease rounds.
	deadline = time.Now().Add(time.Minute)
	for {
		status, out := adminCall(t, "GET", base+"/status", testReadToken, "")
		require.Equal(t, http.StatusOK, status, "%v", out)
		shards, _ := out["shards"].([]any)
		live := 0
		for _, r := range shards {
			if r.(map[string]any)["lease"] == "live" {
				live++
			}
		}
		if len(shards) == 2 && live == 2 {
			break
		}
		require.False(t, time.Now().After(deadline), "leases not judged live after a minute: %v", out)
		time.Sleep(200 * time.Millisecond)
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "worker log:\n%s", log.String())
	text := log.String()
	require.Contains(t, text, `msg="serving the admin API"`)
	var audit []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, `msg="admin request"`) && strings.Contains(l, "method=POST") {
			audit = append(audit, l)
		}
	}
	require.Len(t, audit, 4, "one audit line per POST:\n%s", text)
	require.Contains(t, audit[2], "level=INFO")
	require.Contains(t, audit[2], "token=admin:")
	require.Contains(t, audit[2], "path=/admin/v1/projections/f/pause")
	require.Contains(t, audit[2], "params.shard=shardId-000000000001")
	require.Contains(t, audit[2], "status=200")
	require.Contains(t, audit[1], "level=WARN")
	require.Contains(t, audit[1], "token=read:")
	require.Contains(t, audit[1], "status=403")
	require.NotContains(t, text, testAdminToken, "the token is never logged")
	require.NotContains(t, text, testReadToken, "the token is never logged")
}

// TestAdminFlagErrors: bad admin token flags are refused with the other flags, before any
// store is opened.
func TestAdminFlagErrors(t *testing.T) {
	tokens := t.TempDir()
	good := writeToken(t, tokens, "good", testAdminToken)
	cases := []struct {
		name string
		args []string
		env  string // $PROJHOST_ADMIN_TOKEN
		want string
	}{
		{"no --listen", []string{"--admin-token-file", good}, "", "--admin-token-file and --admin-read-token-file need --listen ADDR"},
		{"short token", []string{"--listen", "127.0.0.1:0", "--admin-token-file", writeToken(t, tokens, "short", "secret")}, "", "a token of 6 bytes: use 32 to 512"},
		{"missing file", []string{"--listen", "127.0.0.1:0", "--admin-read-token-file", filepath.Join(tokens, "nope")}, "", "--admin-read-token-file: open"},
		{"file and environment", []string{"--listen", "127.0.0.1:0", "--admin-token-file", good}, testAdminToken, "given twice, by --admin-token-file and by $PROJHOST_ADMIN_TOKEN"},
		{"short environment", []string{"--listen", "127.0.0.1:0"}, "short", "$PROJHOST_ADMIN_TOKEN: admin: bad configuration: a token of 5 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(admin.EnvAdminToken, c.env)
			dir := t.TempDir()
			projhost(t, "journal", "create", "--data", dir, "--shards", "1")
			r := cli(t, nil, binPath, append([]string{"run", "--data", dir, "--name", "f", "--handler", testwasm.Path(t, testwasm.CountAS),
				"--until-caught-up"}, c.args...)...)
			require.Error(t, r.err)
			require.Contains(t, r.stderr, c.want)
			_, err := os.Stat(filepath.Join(dir, local.FileName))
			require.ErrorIs(t, err, os.ErrNotExist, "a flag error opens no store")
		})
	}
}
