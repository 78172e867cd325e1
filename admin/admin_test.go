package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/admin"
	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/readmodel"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/status"
	"github.com/projhost/projhost/store"
	"github.com/projhost/projhost/store/sqlite"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

const (
	proj        = "flights"
	adminSecret = "admin-0123456789abcdef0123456789abcdef"
	readSecret  = "read-0123456789abcdef0123456789abcdef00"
)

var shards = []string{"0", "1"}

// record is a captured slog record, its attributes flattened ("params.shard").
type record struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

// recorder is a slog.Handler keeping every record.
type recorder struct {
	mu   sync.Mutex
	recs []record
}

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recorder) WithGroup(string) slog.Handler            { return h }

func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	rec := record{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	var add func(prefix string, a slog.Attr)
	add = func(prefix string, a slog.Attr) {
		if a.Value.Kind() == slog.KindGroup {
			for _, g := range a.Value.Group() {
				add(prefix+a.Key+".", g)
			}
			return
		}
		rec.attrs[prefix+a.Key] = a.Value.Resolve().Any()
	}
	r.Attrs(func(a slog.Attr) bool { add("", a); return true })
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.mu.Unlock()
	return nil
}

// audits returns the "admin request" records so far and forgets them.
func (h *recorder) audits() []record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []record
	for _, r := range h.recs {
		if r.msg == "admin request" {
			out = append(out, r)
		}
	}
	h.recs = nil
	return out
}

// fixture is an API over a store holding projection proj with two shards, each leased to w1 at
// epoch 1 with its cursor at 10 and a document written.
type fixture struct {
	t     testing.TB
	st    *store.Stores
	blobs *registry.DirBlobs
	srv   *httptest.Server
	log   *recorder
}

func newFixture(t testing.TB, st *store.Stores) *fixture {
	t.Helper()
	ctx := context.Background()
	for _, s := range shards {
		require.NoError(t, st.Leases.Create(ctx, shardmap.Lease{Projection: proj, ShardID: s, Owner: "w1", Counter: 1, Epoch: 1, State: shardmap.StateActive}))
		_, err := st.Cursors.Claim(ctx, proj, s, 1)
		require.NoError(t, err)
		if st.Mode == store.Fenced {
			_, err = st.WriteClaimer.ClaimWrites(ctx, proj, s, 1)
			require.NoError(t, err)
		}
		w := readmodel.Write{Projection: proj, ShardID: s, Epoch: 1, Seq: "10",
			Mutations: []readmodel.Mutation{{Collection: "c", Key: s, Doc: []byte(`{"n":10}`)}}}
		if st.Mode == store.Transactional {
			require.NoError(t, st.Committer.Commit(ctx, w))
		} else {
			require.NoError(t, st.ReadModel.Apply(ctx, w))
			require.NoError(t, st.Cursors.Save(ctx, proj, s, 1, "10"))
		}
	}
	blobs, err := registry.NewDirBlobs(t.TempDir())
	require.NoError(t, err)
	f := &fixture{t: t, st: st, blobs: blobs, log: &recorder{}}
	src := shardList{{ID: "0"}, {ID: "1"}}
	api, err := admin.New(admin.Config{Projection: proj, Stores: st, Blobs: blobs, Settle: -1, Logger: slog.New(f.log),
		Status: &status.Config{Stores: st, Source: src},
		Tokens: []admin.Token{{Name: "admin", Secret: adminSecret, Scope: admin.ScopeAdmin}, {Name: "read", Secret: readSecret, Scope: admin.ScopeRead}}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(admin.Pattern, api)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// shardList is a source's shard list, all status.Rows needs of it.
type shardList []source.Shard

func (l shardList) Shards(context.Context) ([]source.Shard, error) { return l, nil }

func openSQLite(t testing.TB) *store.Stores {
	st, err := sqlite.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// resp is an answer: its status, headers and JSON body.
type resp struct {
	status int
	header http.Header
	raw    string
	body   map[string]any
}

// do sends a request with the bearer token (none when ""), a JSON body (none when "").
func (f *fixture) do(method, path, token, body string, headers ...string) resp {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	require.NoError(f.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(f.t, err)
	r := resp{status: res.StatusCode, header: res.Header, raw: string(b)}
	require.Equal(f.t, "application/json; charset=utf-8", res.Header.Get("Content-Type"), "answer %s", b)
	require.NoError(f.t, json.Unmarshal(b, &r.body), "answer %q is not one JSON object", b)
	return r
}

// wantError checks an error answer: the status and a JSON error containing part.
func (r resp) wantError(t testing.TB, status int, part string) {
	t.Helper()
	require.Equal(t, status, r.status, "answer %s", r.raw)
	msg, _ := r.body["error"].(string)
	require.Contains(t, msg, part, "answer %s", r.raw)
	require.NotZero(t, r.body["request_id"], "answer %s", r.raw)
	require.Len(t, r.body, 2, "an error answer is {error, request_id}: %s", r.raw)
	require.NotContains(t, r.raw, "goroutine", "a stack trace")
}

func (r resp) ok(t testing.TB) map[string]any {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "answer %s", r.raw)
	return r.body
}

// pauses returns the projection's pauses as "all" and shard ids.
func (f *fixture) pauses() []string {
	f.t.Helper()
	p, err := f.st.Cursors.Pauses(context.Background(), proj)
	require.NoError(f.t, err)
	var out []string
	if p.All {
		out = append(out, "all")
	}
	return append(out, p.Shards...)
}

func (f *fixture) cursor(shard string) string {
	f.t.Helper()
	c, err := f.st.Cursors.Get(context.Background(), proj, shard)
	require.NoError(f.t, err)
	return c.Seq
}

func path(rest string) string { return admin.Prefix + proj + rest }

// TestAuth: requests without a token, with a wrong one (other lengths, prefixes, another
// scheme) are refused with 401 and change nothing; the read-only token reaches the read routes
// only (403 elsewhere); every refusal is an audit record at Warn without the token.
func TestAuth(t *testing.T) {
	f := newFixture(t, openSQLite(t))
	cases := []struct {
		name, method, path, auth string
		status                   int
		part                     string
	}{
		{"no header", "POST", path("/pause"), "", 401, "no token"},
		{"no header on a read route", "GET", path("/deadletters"), "", 401, "no token"},
		{"no header on an unknown path", "GET", "/admin/nothing", "", 401, "no token"},
		{"basic scheme", "POST", path("/pause"), "Basic " + adminSecret, 401, "not one this worker accepts"},
		{"bearer without token", "POST", path("/pause"), "Bearer ", 401, "not one this worker accepts"},
		{"wrong token, same length", "POST", path("/pause"), "Bearer " + strings.Repeat("x", len(adminSecret)), 401, "not one"},
		{"a prefix of the token", "POST", path("/pause"), "Bearer " + adminSecret[:len(adminSecret)-1], 401, "not one"},
		{"the token and more", "POST", path("/pause"), "Bearer " + adminSecret + "x", 401, "not one"},
		{"the token in upper case", "POST", path("/pause"), "Bearer " + strings.ToUpper(adminSecret), 401, "not one"},
		{"one byte changed", "POST", path("/pause"), "Bearer " + adminSecret[:5] + "X" + adminSecret[6:], 401, "not one"},
		{"empty token", "POST", path("/pause"), "Bearer", 401, "not one"},
		{"read token on pause", "POST", path("/pause"), "Bearer " + readSecret, 403, "needs the admin token"},
		{"read token on rebuild", "POST", path("/rebuild"), "Bearer " + readSecret, 403, "needs the admin token"},
		{"read token on a drop", "POST", path("/deadletters/0/5/drop"), "Bearer " + readSecret, 403, "needs the admin token"},
		{"read token on activate", "POST", path("/versions/1/activate"), "Bearer " + readSecret, 403, "needs the admin token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(c.method, c.path, "", "", "Authorization", c.auth)
			r.wantError(t, c.status, c.part)
			if c.status == 401 {
				require.Contains(t, r.header.Get("WWW-Authenticate"), `Bearer realm="projhost-admin"`)
			}
			recs := f.log.audits()
			require.Len(t, recs, 1)
			require.Equal(t, slog.LevelWarn, recs[0].level)
			require.EqualValues(t, c.status, recs[0].attrs["status"])
			require.Equal(t, c.method, recs[0].attrs["method"])
			require.Equal(t, c.path, recs[0].attrs["path"])
			if c.status == 401 {
				require.Equal(t, "none", recs[0].attrs["token"])
			} else {
				require.Equal(t, admin.Token{Name: "read", Secret: readSecret}.ID(), recs[0].attrs["token"])
			}
			for k, v := range recs[0].attrs {
				require.NotContains(t, fmt.Sprint(v), adminSecret[:20], "attribute %s carries the token", k)
				require.NotContains(t, fmt.Sprint(v), readSecret[:20], "attribute %s carries the token", k)
			}
			require.Empty(t, f.pauses(), "a refused request changed the store")
		})
	}
	// The scheme is case-insensitive (RFC 9110); both tokens read.
	f.do("GET", path("/deadletters"), "", "", "Authorization", "bearer "+readSecret).ok(t)
	f.do("GET", path("/versions"), adminSecret, "").ok(t)
	require.Equal(t, slog.LevelDebug, f.log.audits()[0].level, "read requests are logged at Debug")
}

// TestMalformed: bad bodies, parameters, paths and methods get the 4xx they deserve with a JSON
// error saying what to do, and change nothing.
func TestMalformed(t *testing.T) {
	f := newFixture(t, openSQLite(t))
	big := `{"shard":"` + strings.Repeat("a", admin.DefaultMaxBodyBytes) + `"}`
	cases := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		part                     string
	}{
		{"not JSON", "POST", path("/pause"), `{"shard":`, nil, 400, "not valid JSON"},
		{"garbage", "POST", path("/pause"), `shard=0`, nil, 400, "must be a JSON object"},
		{"unknown field", "POST", path("/pause"), `{"shard":"0","force":true}`, nil, 400, `unknown field "force"`},
		{"field of another case", "POST", path("/pause"), `{"Shard":"0"}`, nil, 400, `unknown field "Shard"`},
		{"field twice", "POST", path("/pause"), `{"shard":"0","shard":"1"}`, nil, 400, `"shard" is given twice`},
		{"two values", "POST", path("/pause"), `{"shard":"0"} {"shard":"1"}`, nil, 400, "more than one JSON value"},
		{"array", "POST", path("/pause"), `[{"shard":"0"}]`, nil, 400, "must be a JSON object"},
		{"null", "POST", path("/pause"), `null`, nil, 400, "must be a JSON object"},
		{"number for the shard", "POST", path("/pause"), `{"shard":0}`, nil, 400, `field "shard": a JSON number where a string is wanted`},
		{"empty shard", "POST", path("/pause"), `{"shard":""}`, nil, 400, "is empty"},
		{"null shard (not every shard)", "POST", path("/pause"), `{"shard":null}`, nil, 400, `field "shard" is null`},
		{"null target", "POST", path("/reset"), `{"shard":"0","to":null}`, nil, 400, `field "to" is null`},
		{"shard with a control character", "POST", path("/pause"), `{"shard":"a\u0001"}`, nil, 400, "not a shard id"},
		{"oversized body", "POST", path("/pause"), big, nil, 413, "over 4096 bytes"},
		{"text body", "POST", path("/pause"), `{"shard":"0"}`, []string{"Content-Type", "text/plain"}, 415, "send application/json"},
		{"form body", "POST", path("/pause"), `{"shard":"0"}`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "--json"},
		{"a field where none is taken", "POST", path("/rebuild"), `{"shard":"0"}`, nil, 400, "this route takes no field"},
		{"query parameter", "POST", path("/pause?shard=0"), "", nil, 400, `unknown query parameter "shard"`},
		{"reset without to", "POST", path("/reset"), `{"shard":"0"}`, nil, 400, `"to" is required`},
		{"reset to a bad seq", "POST", path("/reset"), `{"to":"05"}`, nil, 400, "want a sequence number"},
		{"reset to a bad time", "POST", path("/reset"), `{"to":"2026-13-01T00:00:00Z"}`, nil, 400, "RFC 3339"},
		{"reset to latest without a source", "POST", path("/reset"), `{"to":"latest"}`, nil, 400, "latest needs the source"},
		{"reset of an unknown shard", "POST", path("/reset"), `{"shard":"9","to":"5"}`, nil, 404, `no lease for shard "9"`},
		{"bad projection name", "POST", admin.Prefix + "a%01b/pause", "", nil, 400, "control character"},
		{"another projection", "POST", admin.Prefix + "other/pause", "", nil, 404, `runs projection "flights", not "other"`},
		{"bad seq", "POST", path("/deadletters/0/01/replay"), "", nil, 400, "not a decimal number"},
		{"seq not a number", "GET", path("/deadletters/0/x"), "", nil, 400, "not a decimal number"},
		{"missing letter", "POST", path("/deadletters/0/7/drop"), "", nil, 404, "no such dead letter"},
		{"bad state", "GET", path("/deadletters?state=lost"), "", nil, 400, "use failed, replay_requested"},
		{"state twice", "GET", path("/deadletters?state=failed&state=dropped"), "", nil, 400, "given 2 times"},
		{"unknown query", "GET", path("/deadletters?limit=5"), "", nil, 400, `unknown query parameter "limit": use shard, state`},
		{"bad escape", "GET", path("/deadletters?state=%zz"), "", nil, 400, "not URL-encoded"},
		{"version 0", "POST", path("/versions/0/activate"), "", nil, 400, "a version number from 1"},
		{"version 01", "POST", path("/versions/01/activate"), "", nil, 400, "a version number from 1"},
		{"version overflow", "POST", path("/versions/99999999999999999999/activate"), "", nil, 400, "a version number from 1"},
		{"unknown version", "POST", path("/versions/3/activate"), "", nil, 404, "no such version"},
		{"rollback without versions", "POST", path("/versions/rollback"), "", nil, 409, "no previous version"},
		{"unknown path", "GET", path("/stats"), "", nil, 404, "no such route"},
		{"trailing slash", "POST", path("/pause/"), "", nil, 404, "no such route"},
		{"outside v1", "GET", "/admin/v2/projections", "", nil, 404, "no such route"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.do(c.method, c.path, adminSecret, c.body, c.headers...).wantError(t, c.status, c.part)
			require.Empty(t, f.pauses(), "a refused request changed the store")
			recs := f.log.audits()
			require.Len(t, recs, 1)
			if c.method == "POST" {
				require.Equal(t, slog.LevelWarn, recs[0].level)
			}
		})
	}
	methods := []struct{ method, path, allow string }{
		{"GET", path("/pause"), "POST"},
		{"PUT", path("/reset"), "POST"},
		{"DELETE", path("/deadletters"), "GET"},
		{"POST", path("/versions"), "GET"},
		{"PATCH", path("/deadletters/0/5"), "GET"},
	}
	for _, m := range methods {
		r := f.do(m.method, m.path, adminSecret, "")
		r.wantError(t, 405, "takes "+m.allow)
		require.Equal(t, m.allow, r.header.Get("Allow"))
	}
	require.Equal(t, []string{"10", "10"}, []string{f.cursor("0"), f.cursor("1")}, "a refused request moved a cursor")
}

// TestInternalError: a store failure is a 500 whose answer names the request id but not the
// error; the audit record at Error carries the error.
func TestInternalError(t *testing.T) {
	st := openSQLite(t)
	f := newFixture(t, st)
	require.NoError(t, st.Close())
	r := f.do("POST", path("/pause"), adminSecret, `{"shard":"0"}`)
	r.wantError(t, 500, "the worker logged it with this request_id")
	require.NotContains(t, r.raw, "sql")
	recs := f.log.audits()
	require.Len(t, recs, 1)
	require.Equal(t, slog.LevelError, recs[0].level)
	require.Equal(t, r.body["request_id"], float64(recs[0].attrs["request_id"].(uint64)))
	require.Contains(t, recs[0].attrs["err"], "closed")
}
