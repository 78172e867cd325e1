package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/projhost/projhost/admin"
	"github.com/projhost/projhost/prom"
	"github.com/projhost/projhost/statuspage"
	"github.com/projhost/projhost/web"
)

// listener is `run --listen`'s HTTP server: the one place its routes are put on the mux. Today
// GET /metrics (the worker's prom.Metrics, with the Go runtime's and the process's collectors)
// and the status page (statuspage.Page.Routes); with an admin token, the admin API (mountAdmin).
type listener struct {
	srv  *web.Server
	done chan error
	stop context.CancelFunc
}

// startListener binds cfg's address (validated by the flag checks), registers the routes and
// starts serving. Errors: the address cannot be bound.
func startListener(cfg web.Config, logger *slog.Logger, metrics *prom.Metrics, page *statuspage.Page) (*listener, error) {
	cfg.Logger = logger
	srv, err := web.Listen(cfg)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn), ErrorHandling: promhttp.ContinueOnError}))
	for pattern, h := range page.Routes() { // the status page: GET / and /status.json
		srv.Handle(pattern, h)
	}
	ctx, stop := context.WithCancel(context.Background())
	l := &listener{srv: srv, done: make(chan error, 1), stop: stop}
	go func() { l.done <- srv.Serve(ctx) }()
	logger.Info("serving HTTP", "addr", srv.Addr(), "routes", "/metrics /status.json /")
	return l, nil
}

// mountAdmin puts the admin API (package admin; run --admin-token-file) on the listener under
// admin.Pattern. Errors: admin.ErrConfig's.
func (l *listener) mountAdmin(cfg admin.Config, logger *slog.Logger) error {
	api, err := admin.New(cfg)
	if err != nil {
		return err
	}
	l.srv.Handle(admin.Pattern, api)
	// "/admin" too: the API answers it (404, JSON) instead of the mux's redirect to "/admin/".
	l.srv.Handle(strings.TrimSuffix(admin.Pattern, "/"), api)
	logger.Info("serving the admin API", "addr", l.srv.Addr(), "prefix", admin.Prefix+cfg.Projection, "tokens", len(cfg.Tokens))
	return nil
}

// close shuts the server down (requests in progress get web.Config.ShutdownTimeout) and waits.
func (l *listener) close(logger *slog.Logger) {
	l.stop()
	if err := <-l.done; err != nil {
		logger.Warn("HTTP listener", "err", err)
	}
}
