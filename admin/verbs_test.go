package admin_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/admin"
	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/internal/storetest"
	"github.com/projhost/projhost/registry"
)

// wantAudit checks the one audit record of the last request: Info, the admin token, the
// method and path, the parameters (params.KEY) and status 200.
func (f *fixture) wantAudit(method, p string, params map[string]any) {
	f.t.Helper()
	recs := f.log.audits()
	require.Len(f.t, recs, 1)
	r := recs[0]
	require.Equal(f.t, slog.LevelInfo, r.level)
	require.Equal(f.t, admin.Token{Name: "admin", Secret: adminSecret}.ID(), r.attrs["token"])
	require.Regexp(f.t, `^admin:[0-9a-f]{8}$`, r.attrs["token"])
	require.Regexp(f.t, `^127\.0\.0\.1:\d+$`, r.attrs["remote"])
	require.Equal(f.t, method, r.attrs["method"])
	require.Equal(f.t, p, r.attrs["path"])
	require.EqualValues(f.t, 200, r.attrs["status"])
	got := map[string]any{}
	for k, v := range r.attrs {
		if len(k) > 7 && k[:7] == "params." {
			got[k[7:]] = v
		}
	}
	want := map[string]any{"projection": proj}
	for k, v := range params {
		want[k] = v
	}
	require.Equal(f.t, want, got)
}

// TestVerbs runs every mutating route end to end on both stores and checks what it did in
// the stores and in the audit log.
func TestVerbs(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			f := newFixture(t, b.Open(t))
			ctx := context.Background()

			// pause and resume
			out := f.do("POST", path("/pause"), adminSecret, `{"shard":"1"}`).ok(t)
			require.Equal(t, map[string]any{"projection": proj, "shard": "1", "paused": true}, out)
			require.Equal(t, []string{"1"}, f.pauses())
			f.wantAudit("POST", path("/pause"), map[string]any{"shard": "1"})
			f.do("POST", path("/pause"), adminSecret, "").ok(t)
			require.Equal(t, []string{"all", "1"}, f.pauses())
			f.wantAudit("POST", path("/pause"), nil)
			rows := f.do("GET", path("/status"), readSecret, "").ok(t)["shards"].([]any)
			require.Len(t, rows, 2)
			for i, want := range []string{"paused", "paused"} {
				row := rows[i].(map[string]any)
				require.Equal(t, shards[i], row["shard"])
				require.Equal(t, want, row["run_state"], "row %v", row)
				require.Equal(t, "10", row["cursor"])
			}
			f.log.audits()
			out = f.do("POST", path("/resume"), adminSecret, `{"shard":"1"}`).ok(t)
			require.Equal(t, true, out["still_paused"])
			require.Equal(t, []any{"1"}, out["unpaused"])
			require.Equal(t, []string{"all"}, f.pauses())
			f.log.audits()
			require.NoError(t, f.st.Cursors.Stop(ctx, proj, "0", 1, "handler failed on 11"))
			out = f.do("POST", path("/resume"), adminSecret, `{}`).ok(t)
			require.Equal(t, map[string]any{"0": "handler failed on 11"}, out["stopped_cleared"])
			require.Empty(t, f.pauses())
			c, err := f.st.Cursors.Get(ctx, proj, "0")
			require.NoError(t, err)
			require.Empty(t, c.Stopped)
			f.wantAudit("POST", path("/resume"), nil)

			// reset one shard, then every shard
			out = f.do("POST", path("/reset"), adminSecret, `{"shard":"0","to":"4"}`).ok(t)
			require.Equal(t, "4", out["to"])
			require.Len(t, out["shards"], 1)
			require.Equal(t, "4", f.cursor("0"))
			require.Equal(t, "10", f.cursor("1"))
			f.wantAudit("POST", path("/reset"), map[string]any{"shard": "0", "to": "4", "reset_0": "4"})
			f.do("POST", path("/reset"), adminSecret, `{"to":"TRIM_HORIZON"}`).ok(t)
			require.Equal(t, []string{"", ""}, []string{f.cursor("0"), f.cursor("1")})
			require.Empty(t, f.pauses(), "the reset's own pause is lifted")
			f.wantAudit("POST", path("/reset"), map[string]any{"to": "trim-horizon", "reset_0": "", "reset_1": ""})

			// rebuild clears the documents
			_, found, err := f.st.ReadModel.Get(ctx, proj, "c", "1")
			require.NoError(t, err)
			require.True(t, found)
			f.do("POST", path("/rebuild"), adminSecret, "{}").ok(t)
			_, found, err = f.st.ReadModel.Get(ctx, proj, "c", "1")
			require.NoError(t, err)
			require.False(t, found, "rebuild left a document")
			f.wantAudit("POST", path("/rebuild"), nil)

			// dead letters
			now := time.Now()
			for _, k := range []struct{ shard, seq string }{{"0", "5"}, {"0", "6"}, {"1", "7"}} {
				require.NoError(t, f.st.DeadLetters.Put(ctx, deadletter.Letter{Projection: proj, ShardID: k.shard, Seq: k.seq,
					Data: []byte(`{"origin":"ORD"}`), ErrorKind: "fail", Error: "boom", Attempts: 5, FirstFailure: now, LastFailure: now,
					State: deadletter.StateFailed}))
			}
			ls := f.do("GET", path("/deadletters?shard=0"), readSecret, "").ok(t)["deadletters"].([]any)
			require.Len(t, ls, 2)
			require.Equal(t, "6", ls[1].(map[string]any)["seq"])
			require.Nil(t, ls[1].(map[string]any)["data"], "lists carry no event data")
			one := f.do("GET", path("/deadletters/0/6"), readSecret, "").ok(t)
			require.Equal(t, map[string]any{"origin": "ORD"}, one["data"])
			require.Equal(t, "boom", one["error"])
			f.log.audits()

			out = f.do("POST", path("/deadletters/0/5/replay"), adminSecret, "").ok(t)
			require.Equal(t, "replay_requested", out["state"])
			require.Len(t, out["moved"], 1)
			f.wantAudit("POST", path("/deadletters/0/5/replay"), map[string]any{"shard": "0", "seq": "5"})
			f.do("POST", path("/deadletters/0/5/replay"), adminSecret, "").wantError(t, 409, "in state failed")
			f.log.audits()
			out = f.do("POST", path("/deadletters/replay"), adminSecret, `{"shard":"1"}`).ok(t)
			require.Len(t, out["moved"], 1)
			f.wantAudit("POST", path("/deadletters/replay"), map[string]any{"shard": "1", "moved": int64(1)})
			f.do("POST", path("/deadletters/0/6/drop"), adminSecret, "").ok(t)
			f.wantAudit("POST", path("/deadletters/0/6/drop"), map[string]any{"shard": "0", "seq": "6"})
			states := map[string]deadletter.State{}
			all, err := f.st.DeadLetters.List(ctx, proj, deadletter.Filter{})
			require.NoError(t, err)
			for _, l := range all {
				states[l.ShardID+"/"+l.Seq] = l.State
			}
			require.Equal(t, map[string]deadletter.State{"0/5": deadletter.StateReplayRequested, "0/6": deadletter.StateDropped,
				"1/7": deadletter.StateReplayRequested}, states)
			dropped := f.do("GET", path("/deadletters?state=dropped"), readSecret, "").ok(t)["deadletters"].([]any)
			require.Len(t, dropped, 1)

			// versions: two stored, activate, rollback
			for i, wasm := range [][]byte{[]byte("module one"), []byte("module two")} {
				sum := registry.Sum(wasm)
				require.NoError(t, f.blobs.Put(ctx, sum, wasm))
				_, err := f.st.Registry.Add(ctx, registry.Version{Projection: proj, SHA256: sum, Size: int64(len(wasm)), ABI: 1,
					UploadedMs: now.UnixMilli(), Note: "v" + string(rune('1'+i))})
				require.NoError(t, err)
			}
			f.do("POST", path("/versions/1/activate"), adminSecret, "").ok(t)
			f.log.audits()
			out = f.do("POST", path("/versions/2/activate"), adminSecret, "").ok(t)
			require.Equal(t, map[string]any{"projection": proj, "version": 2.0, "previous": 1.0, "changed": true}, out)
			f.wantAudit("POST", path("/versions/2/activate"), map[string]any{"version": int64(2), "changed": true})
			out = f.do("POST", path("/versions/2/activate"), adminSecret, "").ok(t)
			require.Equal(t, false, out["changed"])
			f.log.audits()
			vs := f.do("GET", path("/versions"), readSecret, "").ok(t)
			require.EqualValues(t, 2, vs["active"])
			require.Len(t, vs["versions"], 2)
			require.Equal(t, true, vs["versions"].([]any)[1].(map[string]any)["active"])
			out = f.do("POST", path("/versions/rollback"), adminSecret, "").ok(t)
			require.EqualValues(t, 1, out["version"])
			a, err := f.st.Registry.Active(ctx, proj)
			require.NoError(t, err)
			require.EqualValues(t, 1, a.Version)
			f.log.audits()
			require.NoError(t, os.Remove(filepath.Join(f.blobs.Dir(), registry.Sum([]byte("module two"))+".wasm")))
			f.do("POST", path("/versions/2/activate"), adminSecret, "").wantError(t, 409, "deploy the module again")
			a, err = f.st.Registry.Active(ctx, proj)
			require.NoError(t, err)
			require.EqualValues(t, 1, a.Version, "a version without its bytes was activated")
		})
	}
}
