package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/projhost/projhost/deadletter"
	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/manage"
	"github.com/projhost/projhost/registry"
)

// call is one request on its way: who asked, what (the validated parameters), for the audit
// record.
type call struct {
	id     uint64
	start  time.Time
	tok    *token
	params []slog.Attr
}

// param records a validated parameter for the audit record.
func (c *call) param(key string, v any) { c.params = append(c.params, slog.Any(key, v)) }

type callKey struct{}

// statusError is an error answered with its status and message as they are.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &statusError{status: status, msg: fmt.Sprintf(format, args...)}
}

// route is one method on one path.
type route struct {
	method string
	path   string // after Prefix, an http.ServeMux pattern's path part: "{name}/pause"
	scope  Scope
	run    func(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) (any, error)
}

// ServeHTTP authenticates the request, then routes it.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := &call{id: a.nextID.Add(1), start: time.Now()}
	auth := r.Header.Get("Authorization")
	if c.tok = a.authenticate(auth); c.tok == nil {
		if auth == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="projhost-admin"`)
			a.answer(w, r, c, nil, errorf(http.StatusUnauthorized, "no token: send the header Authorization: Bearer TOKEN (the admin or read-only token the worker was started with)"))
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="projhost-admin", error="invalid_token"`)
		a.answer(w, r, c, nil, errorf(http.StatusUnauthorized, "the token is not one this worker accepts: send Authorization: Bearer TOKEN with its admin or read-only token"))
		return
	}
	a.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
}

// routes registers every route: one mux entry per path, which checks the method (405 with
// Allow), the scope (403) and the projection name before the route runs; everything else 404.
func (a *API) routes() {
	var paths []string
	byPath := map[string][]route{}
	for _, rt := range a.table() {
		if byPath[rt.path] == nil {
			paths = append(paths, rt.path)
		}
		byPath[rt.path] = append(byPath[rt.path], rt)
	}
	for _, p := range paths {
		a.mux.Handle(Prefix+p, a.endpoint(byPath[p]))
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.answer(w, r, r.Context().Value(callKey{}).(*call), nil,
			errorf(http.StatusNotFound, "no such route: %s (the routes are under %s{name}/..., see the README's admin API table)", clip(r.URL.Path), Prefix))
	})
}

func (a *API) endpoint(rs []route) http.Handler {
	var allow []string
	for _, rt := range rs {
		allow = append(allow, rt.method)
	}
	slices.Sort(allow)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.Context().Value(callKey{}).(*call)
		i := slices.IndexFunc(rs, func(rt route) bool { return rt.method == r.Method })
		if i < 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			a.answer(w, r, c, nil, errorf(http.StatusMethodNotAllowed, "%s takes %s, not %s", clip(r.URL.Path), strings.Join(allow, " or "), clip(r.Method)))
			return
		}
		rt := rs[i]
		if c.tok.Scope < rt.scope {
			a.answer(w, r, c, nil, errorf(http.StatusForbidden, "the %s token may not %s %s: this route needs the %s token", c.tok.Name, rt.method, clip(r.URL.Path), rt.scope))
			return
		}
		if err := a.checkProjection(r.PathValue("name"), c); err != nil {
			a.answer(w, r, c, nil, err)
			return
		}
		// Mutating calls run to their end when the client goes away: a reset or rebuild
		// stopped half-way leaves its pause behind.
		ctx := r.Context()
		if rt.scope == ScopeAdmin {
			ctx = context.WithoutCancel(ctx)
		}
		ctx, cancel := context.WithTimeout(ctx, a.cfg.OpTimeout)
		defer cancel()
		out, err := rt.run(ctx, w, r, c)
		a.answer(w, r, c, out, err)
	})
}

// errorBody is every error answer.
type errorBody struct {
	Error     string `json:"error"`
	RequestID uint64 `json:"request_id"`
}

// answer writes out (200) or err's answer, and the audit record.
func (a *API) answer(w http.ResponseWriter, r *http.Request, c *call, out any, err error) {
	status, msg := http.StatusOK, ""
	if err != nil {
		status, msg = a.statusOf(err)
		out = errorBody{Error: msg, RequestID: c.id}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if werr := json.NewEncoder(w).Encode(out); werr != nil {
		a.cfg.Logger.Debug("admin: writing the answer", "request_id", c.id, "err", werr)
	}
	a.audit(r, c, status, err)
}

// audit writes the request's record: at Info (a mutating request that succeeded), Warn
// (refused: 4xx, or any 401/403), Error (5xx), Debug (read-only requests that are not refused
// for their token).
func (a *API) audit(r *http.Request, c *call, status int, err error) {
	mutating := r.Method != http.MethodGet && r.Method != http.MethodHead
	level := slog.LevelDebug
	switch {
	case status >= 500:
		level = slog.LevelError
	case status == http.StatusUnauthorized || status == http.StatusForbidden || mutating && status >= 400:
		level = slog.LevelWarn
	case mutating:
		level = slog.LevelInfo
	}
	ctx := context.Background()
	if !a.cfg.Logger.Enabled(ctx, level) {
		return
	}
	who := "none"
	if c.tok != nil {
		who = c.tok.id
	}
	attrs := []slog.Attr{slog.Uint64("request_id", c.id), slog.String("token", who), slog.String("remote", r.RemoteAddr),
		slog.String("method", clip(r.Method)), slog.String("path", clip(r.URL.Path)), {Key: "params", Value: slog.GroupValue(c.params...)},
		slog.Int("status", status), slog.Duration("elapsed", time.Since(c.start))}
	if err != nil {
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	a.cfg.Logger.LogAttrs(ctx, level, "admin request", attrs...)
}

// statusOf maps an error to its status and the message answered. Errors of the libraries map
// by their sentinels; others are 500 with a message that names the request id, not the error.
func (a *API) statusOf(err error) (int, string) {
	var se *statusError
	if errors.As(err, &se) {
		return se.status, se.msg
	}
	is := func(targets ...error) bool {
		return slices.ContainsFunc(targets, func(t error) bool { return errors.Is(err, t) })
	}
	switch {
	case is(manage.ErrTarget, deadletter.ErrInvalid, registry.ErrInvalid):
		return http.StatusBadRequest, err.Error()
	case is(manage.ErrNoShard, deadletter.ErrNotFound, registry.ErrNoVersion):
		return http.StatusNotFound, err.Error()
	case is(manage.ErrFinished, manage.ErrBusy, deadletter.ErrNoMatch, deadletter.ErrState, registry.ErrConflict,
		deploy.ErrNoPrevious, deploy.ErrNoActive):
		return http.StatusConflict, err.Error()
	case is(registry.ErrNoModule, registry.ErrCorrupt):
		return http.StatusConflict, err.Error() + " (deploy the module again, or activate another version)"
	case is(manage.ErrUnsupported):
		return http.StatusNotImplemented, err.Error()
	case is(context.DeadlineExceeded):
		return http.StatusServiceUnavailable, fmt.Sprintf("the store did not answer within %s: the operation may have been done in part; look at the state (GET routes, projhost status) and try again", a.cfg.OpTimeout)
	}
	return http.StatusInternalServerError, "internal error: the worker logged it with this request_id; try again, and if it persists see the worker's log"
}

// clip shortens what a client sent before it goes into a message or a log record.
func clip(s string) string {
	const max = 256
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
