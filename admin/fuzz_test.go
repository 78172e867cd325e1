package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/projhost/projhost/admin"
)

// FuzzRequest sends arbitrary methods, paths, query strings, content types and bodies with
// the admin token through the API on the embedded store: every answer is one JSON object with
// a status the API documents, never a 500; an error answer is {error, request_id} with a
// message.
//
//	go test -run '^$' -fuzz FuzzRequest -fuzztime 60s ./admin/
func FuzzRequest(f *testing.F) {
	seeds := []struct{ method, path, ctype, body string }{
		{"POST", "/pause", "application/json", `{"shard":"0"}`},
		{"POST", "/resume", "", ``},
		{"POST", "/reset", "application/json", `{"shard":"1","to":"5"}`},
		{"POST", "/reset", "application/json", `{"to":"2026-01-02T15:04:05Z"}`},
		{"POST", "/reset", "application/json; charset=utf-8", `{"to":"trim-horizon","shard":"0"}`},
		{"POST", "/rebuild", "application/json", `{}`},
		{"GET", "/deadletters?shard=0&state=failed", "", ``},
		{"GET", "/deadletters/0/5", "", ``},
		{"POST", "/deadletters/replay", "application/json", `{"shard":"1"}`},
		{"POST", "/deadletters/0/5/drop", "", ``},
		{"POST", "/versions/1/activate", "", ``},
		{"POST", "/versions/rollback", "", ``},
		{"GET", "/versions", "", ``},
		{"GET", "/status", "", ``},
		{"POST", "/pause", "application/json", `{"shard":"0"}{}`},
		{"POST", "/pause", "text/plain", `{"shard":"0"}`},
		{"POST", "/reset", "application/json", `{"to":1e400}`},
		{"POST", "/reset", "application/json", `{"to":"\ud800"}`},
		{"DELETE", "/../../x", "", `[`},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.ctype, s.body)
	}
	fx := newFixture(f, openSQLite(f))
	valid := map[int]bool{200: true, 400: true, 401: true, 403: true, 404: true, 405: true, 409: true, 413: true, 415: true}
	f.Fuzz(func(t *testing.T, method, p, ctype, body string) {
		r, err := http.NewRequest(method, fx.srv.URL+admin.Prefix+proj+p, strings.NewReader(body))
		if err != nil {
			return // not a request a client can send (a bad method or URL)
		}
		r.Header.Set("Authorization", "Bearer "+adminSecret)
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := http.DefaultClient.Do(r.WithContext(ctx))
		if ctx.Err() != nil {
			t.Fatalf("%s %q (%q, %q): no answer within 10s", method, p, ctype, body)
		}
		if err != nil {
			return // the client refused it (a bad method or header)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusMovedPermanently {
			return // the mux cleans paths (/x/../y) with a redirect
		}
		if !valid[res.StatusCode] {
			t.Fatalf("%s %q (%q, %q): status %d: %s", method, p, ctype, body, res.StatusCode, b)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("%s %q: answer %q is not a JSON object: %v", method, p, b, err)
		}
		if res.StatusCode != 200 {
			msg, _ := out["error"].(string)
			if msg == "" || len(out) != 2 || out["request_id"] == nil {
				t.Fatalf("%s %q (%q): error answer %s", method, p, body, b)
			}
		}
		fx.log.audits()
	})
}
