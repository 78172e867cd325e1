package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/manage"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/status"
)

// The answers of the routes (README: the admin API), besides errorBody.
type (
	pausedJSON struct {
		Projection string `json:"projection"`
		Shard      string `json:"shard,omitempty"` // absent: the whole projection
		Paused     bool   `json:"paused"`
	}
	resumedJSON struct {
		Projection string `json:"projection"`
		Shard      string `json:"shard,omitempty"`
		// Unpaused are the pauses lifted ("" the projection's own).
		Unpaused []string `json:"unpaused"`
		// StoppedCleared are the STOPPED shards continued, with the reason they stopped.
		StoppedCleared map[string]string `json:"stopped_cleared"`
		// StillPaused: a shard was named and the projection as a whole stays paused.
		StillPaused bool `json:"still_paused"`
	}
	resetShardJSON struct {
		Shard  string `json:"shard"`
		Cursor string `json:"cursor"` // "" = the start
		Epoch  int64  `json:"epoch"`
	}
	resetJSON struct {
		Projection string           `json:"projection"`
		To         string           `json:"to"`
		Shards     []resetShardJSON `json:"shards"`
	}
	rebuildJSON struct {
		Projection string `json:"projection"`
		Rebuilding bool   `json:"rebuilding"`
	}
	statusJSON struct {
		Projection string       `json:"projection"`
		Shards     []status.Row `json:"shards"` // status --json's lines
	}
	lettersJSON struct {
		Projection  string                  `json:"projection"`
		DeadLetters []deadletter.LetterJSON `json:"deadletters"`
	}
	movedJSON struct {
		Projection string                  `json:"projection"`
		State      string                  `json:"state"` // the state the letters moved to
		Moved      []deadletter.LetterJSON `json:"moved"`
	}
	versionsJSON struct {
		Projection string                 `json:"projection"`
		Active     int64                  `json:"active"`               // 0: none
		Previous   int64                  `json:"previous"`             // what rollback returns to; 0: none
		ChangedAt  string                 `json:"changed_at,omitempty"` // RFC 3339, UTC: the last activate or rollback
		Versions   []registry.VersionJSON `json:"versions"`
	}
	activeJSON struct {
		Projection string `json:"projection"`
		Version    int64  `json:"version"`
		Previous   int64  `json:"previous"`
		Changed    bool   `json:"changed"` // false: the version was active already
	}
)

// shardBody is the body of the routes taking an optional shard.
type shardBody struct {
	Shard *string `json:"shard"`
}

type resetBody struct {
	Shard *string `json:"shard"`
	To    *string `json:"to"`
}

type emptyBody struct{}

// table is every route (the package documentation lists them).
func (a *API) table() []route {
	return []route{
		{http.MethodPost, "{name}/pause", ScopeAdmin, a.pause},
		{http.MethodPost, "{name}/resume", ScopeAdmin, a.resume},
		{http.MethodPost, "{name}/reset", ScopeAdmin, a.reset},
		{http.MethodPost, "{name}/rebuild", ScopeAdmin, a.rebuild},
		{http.MethodGet, "{name}/status", ScopeRead, a.status},
		{http.MethodGet, "{name}/deadletters", ScopeRead, a.listLetters},
		{http.MethodPost, "{name}/deadletters/replay", ScopeAdmin, a.replayAll},
		{http.MethodGet, "{name}/deadletters/{shard}/{seq}", ScopeRead, a.getLetter},
		{http.MethodPost, "{name}/deadletters/{shard}/{seq}/replay", ScopeAdmin, a.moveLetter(deadletter.Replay, deadletter.StateReplayRequested)},
		{http.MethodPost, "{name}/deadletters/{shard}/{seq}/drop", ScopeAdmin, a.moveLetter(deadletter.Drop, deadletter.StateDropped)},
		{http.MethodGet, "{name}/versions", ScopeRead, a.versions},
		{http.MethodPost, "{name}/versions/{n}/activate", ScopeAdmin, a.activate},
		{http.MethodPost, "{name}/versions/rollback", ScopeAdmin, a.rollback},
	}
}

// noInput refuses a body with a field and any query parameter.
func (a *API) noInput(w http.ResponseWriter, r *http.Request) error {
	if _, err := decodeQuery(r); err != nil {
		return err
	}
	return a.decodeBody(w, r, &emptyBody{})
}

// shardInput reads the optional {"shard"} of a body (no query parameter).
func (a *API) shardInput(w http.ResponseWriter, r *http.Request, c *call) (string, error) {
	if _, err := decodeQuery(r); err != nil {
		return "", err
	}
	var b shardBody
	if err := a.decodeBody(w, r, &b, "shard"); err != nil {
		return "", err
	}
	return optionalShard(b.Shard, c)
}

func (a *API) manageOptions() manage.Options {
	return manage.Options{Settle: a.cfg.Settle, Logger: a.cfg.Logger}
}

func (a *API) pause(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
	shard, err := a.shardInput(w, r, c)
	if err != nil {
		return nil, err
	}
	if err := manage.Pause(ctx, a.cfg.Stores, a.cfg.Projection, shard); err != nil {
		return nil, err
	}
	return pausedJSON{Projection: a.cfg.Projection, Shard: shard, Paused: true}, nil
}

func (a *API) resume(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
	shard, err := a.shardInput(w, r, c)
	if err != nil {
		return nil, err
	}
	res, err := manage.Resume(ctx, a.cfg.Stores, a.cfg.Projection, shard)
	if err != nil {
		return nil, err
	}
	out := resumedJSON{Projection: a.cfg.Projection, Shard: shard, Unpaused: res.Unpaused, StoppedCleared: res.Stopped, StillPaused: res.StillPaused}
	if out.Unpaused == nil {
		out.Unpaused = []string{}
	}
	if out.StoppedCleared == nil {
		out.StoppedCleared = map[string]string{}
	}
	return out, nil
}

func (a *API) reset(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
	if _, err := decodeQuery(r); err != nil {
		return nil, err
	}
	var b resetBody
	if err := a.decodeBody(w, r, &b, "shard", "to"); err != nil {
		return nil, err
	}
	shard, err := optionalShard(b.Shard, c)
	if err != nil {
		return nil, err
	}
	if b.To == nil {
		return nil, errorf(http.StatusBadRequest, `"to" is required: a sequence number, "trim-horizon", "latest" or an RFC 3339 time such as "2026-01-02T15:04:05Z"`)
	}
	to, err := manage.ParseTarget(*b.To)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, `"to": %v`, err)
	}
	c.param("to", to.String())
	rs, err := manage.Reset(ctx, a.cfg.Stores, a.cfg.Source, a.cfg.Projection, shard, to, a.manageOptions())
	for _, x := range rs {
		c.param("reset_"+x.ShardID, x.Seq) // in the audit record even when a later shard failed
	}
	if err != nil {
		return nil, err
	}
	out := resetJSON{Projection: a.cfg.Projection, To: to.String(), Shards: []resetShardJSON{}}
	for _, x := range rs {
		out.Shards = append(out.Shards, resetShardJSON{Shard: x.ShardID, Cursor: x.Seq, Epoch: x.Epoch})
	}
	return out, nil
}

func (a *API) rebuild(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
	if err := a.noInput(w, r); err != nil {
		return nil, err
	}
	if err := manage.Rebuild(ctx, a.cfg.Stores, a.cfg.Projection, a.manageOptions()); err != nil {
		return nil, err
	}
	return rebuildJSON{Projection: a.cfg.Projection, Rebuilding: true}, nil
}

func (a *API) status(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
	if err := a.noInput(w, r); err != nil {
		return nil, err
	}
	if a.cfg.Status == nil {
		return nil, errorf(http.StatusNotImplemented, "this worker was given no status configuration: use projhost status")
	}
	rows, err := status.Rows(ctx, *a.cfg.Status, []string{a.cfg.Projection})
	if err != nil {
		return nil, err
	}
	if rows == nil {
		rows = []status.Row{}
	}
	return statusJSON{Projection: a.cfg.Projection, Shards: rows}, nil
}

func (a *API) listLetters(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
	q, err := decodeQuery(r, "shard", "state")
	if err != nil {
		return nil, err
	}
	var f deadletter.Filter
	if s, ok := q["shard"]; ok {
		if err := checkShard(s, "query parameter shard"); err != nil {
			return nil, err
		}
		f.ShardID = s
		c.param("shard", s)
	}
	if s, ok := q["state"]; ok {
		if f.State = deadletter.State(s); !f.State.Valid() {
			return nil, errorf(http.StatusBadRequest, "query parameter state %q: use failed, replay_requested, replayed, dropped or superseded", clip(s))
		}
		c.param("state", s)
	}
	if err := a.decodeBody(w, r, &emptyBody{}); err != nil {
		return nil, err
	}
	ls, err := a.cfg.Stores.DeadLetters.List(ctx, a.cfg.Projection, f)
	if err != nil {
		return nil, err
	}
	out := lettersJSON{Projection: a.cfg.Projection, DeadLetters: make([]deadletter.LetterJSON, 0, len(ls))}
	for _, l := range ls {
		out.DeadLetters = append(out.DeadLetters, deadletter.ToJSON(l, false))
	}
	return out, nil
}

func (a *API) getLetter(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
	shard, seq, err := letterKey(r, a.cfg.Projection, c)
	if err != nil {
		return nil, err
	}
	if err := a.noInput(w, r); err != nil {
		return nil, err
	}
	l, err := a.cfg.Stores.DeadLetters.Get(ctx, a.cfg.Projection, shard, seq)
	if err != nil {
		return nil, err
	}
	return deadletter.ToJSON(l, true), nil
}

type mover func(context.Context, deadletter.Store, string, deadletter.Selection) ([]deadletter.Letter, error)

// moved is a mover's answer.
func (a *API) moved(ls []deadletter.Letter, to deadletter.State) movedJSON {
	out := movedJSON{Projection: a.cfg.Projection, State: string(to), Moved: make([]deadletter.LetterJSON, 0, len(ls))}
	for _, l := range ls {
		out.Moved = append(out.Moved, deadletter.ToJSON(l, false))
	}
	return out
}

func (a *API) replayAll(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
	shard, err := a.shardInput(w, r, c)
	if err != nil {
		return nil, err
	}
	ls, err := deadletter.Replay(ctx, a.cfg.Stores.DeadLetters, a.cfg.Projection, deadletter.Selection{ShardID: shard})
	c.param("moved", len(ls))
	if err != nil {
		return nil, err
	}
	return a.moved(ls, deadletter.StateReplayRequested), nil
}

// moveLetter is the route replaying or dropping one letter: 404 when it is missing, 409 when
// it is in a state the move does not take.
func (a *API) moveLetter(move mover, to deadletter.State) func(context.Context, http.ResponseWriter, *http.Request, *call) (any, error) {
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
		shard, seq, err := letterKey(r, a.cfg.Projection, c)
		if err != nil {
			return nil, err
		}
		if err := a.noInput(w, r); err != nil {
			return nil, err
		}
		if _, err := a.cfg.Stores.DeadLetters.Get(ctx, a.cfg.Projection, shard, seq); err != nil {
			return nil, err
		}
		ls, err := move(ctx, a.cfg.Stores.DeadLetters, a.cfg.Projection, deadletter.Selection{ShardID: shard, Seq: seq})
		if err != nil {
			return nil, err
		}
		return a.moved(ls, to), nil
	}
}

func (a *API) registry() (registry.Store, error) {
	if a.cfg.Stores.Registry == nil {
		return nil, errorf(http.StatusNotImplemented, "this store has no module registry")
	}
	return a.cfg.Stores.Registry, nil
}

func (a *API) versions(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
	if err := a.noInput(w, r); err != nil {
		return nil, err
	}
	reg, err := a.registry()
	if err != nil {
		return nil, err
	}
	vs, err := reg.Versions(ctx, a.cfg.Projection)
	if err != nil {
		return nil, err
	}
	act, err := reg.Active(ctx, a.cfg.Projection)
	if err != nil {
		return nil, err
	}
	out := versionsJSON{Projection: a.cfg.Projection, Active: act.Version, Previous: act.Previous, Versions: make([]registry.VersionJSON, 0, len(vs))}
	if act.ChangedMs > 0 {
		out.ChangedAt = time.UnixMilli(act.ChangedMs).UTC().Format(time.RFC3339Nano)
	}
	for _, v := range vs {
		out.Versions = append(out.Versions, registry.ToJSON(v, act.Version))
	}
	return out, nil
}

// moduleStores returns the registry and the module store activate and rollback need.
func (a *API) moduleStores() (registry.Store, registry.Blobs, error) {
	reg, err := a.registry()
	if err != nil {
		return nil, nil, err
	}
	if a.cfg.Blobs == nil {
		return nil, nil, errorf(http.StatusNotImplemented, "this worker was given no module store: activate and roll back with the CLI (projhost handlers)")
	}
	return reg, a.cfg.Blobs, nil
}

func (a *API) activate(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
	n, err := versionNumber(r, c)
	if err != nil {
		return nil, err
	}
	if err := a.noInput(w, r); err != nil {
		return nil, err
	}
	reg, blobs, err := a.moduleStores()
	if err != nil {
		return nil, err
	}
	act, changed, err := deploy.Activate(ctx, reg, blobs, a.cfg.Projection, n)
	if err != nil {
		return nil, err
	}
	c.param("changed", changed)
	return activeJSON{Projection: a.cfg.Projection, Version: act.Version, Previous: act.Previous, Changed: changed}, nil
}

func (a *API) rollback(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error) {
	if err := a.noInput(w, r); err != nil {
		return nil, err
	}
	reg, blobs, err := a.moduleStores()
	if err != nil {
		return nil, err
	}
	act, err := deploy.Rollback(ctx, reg, blobs, a.cfg.Projection)
	if err != nil {
		return nil, err
	}
	c.param("version", act.Version)
	return activeJSON{Projection: a.cfg.Projection, Version: act.Version, Previous: act.Previous, Changed: true}, nil
}
