// Package web is the HTTP listener of a projhost worker (`projhost run --listen ADDR`): one
// http.Server with timeouts on one TCP address, and one mux on which each feature registers its
// routes. Today: /metrics (package prom) and the status page at / and /status.json (package
// statuspage), registered before serving starts, and with an admin token the admin API under
// /admin/ (package admin), registered while serving, once the worker's module store is open;
// all by cmd/projhost.
//
// Use: Config.Validate (the one place an address is accepted or refused; the CLI calls it with
// the other flags), Listen (binds at once, so a port in use fails before the worker takes a
// lease), Handle for each route, then Serve, which returns when its context ends, after a
// graceful shutdown.
package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strconv"
	"time"
)

// Defaults of Config.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultShutdownTimeout   = 5 * time.Second
)

// ErrConfig is wrapped by errors about a bad Config.
var ErrConfig = errors.New("web: bad listener configuration")

// Config configures a Server. Zero durations take the defaults.
type Config struct {
	// Addr is the TCP address to listen on, HOST:PORT: HOST an IP address, a host name
	// (localhost) or empty for every interface; PORT a number from 0 to 65535 (0: a free
	// port, which Server.Addr then tells). Required.
	Addr string
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are http.Server's (defaults
	// 5s, 10s, 30s, 60s): a slow or stuck client cannot hold a connection for ever.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// ShutdownTimeout is how long Serve waits for requests in progress when its context ends
	// (default 5s); then it closes their connections.
	ShutdownTimeout time.Duration
	// Logger receives the server's errors (nil: slog.Default()).
	Logger *slog.Logger
}

// Validate checks c and fills in the defaults. Errors wrap ErrConfig and say what a good
// address looks like.
func (c *Config) Validate() error {
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("%w: address %q is not HOST:PORT (e.g. 127.0.0.1:9090, or :9090 for every interface): %w", ErrConfig, c.Addr, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || strconv.FormatUint(n, 10) != port {
		return fmt.Errorf("%w: address %q: port %q is not a number from 0 to 65535 (e.g. 127.0.0.1:9090)", ErrConfig, c.Addr, port)
	}
	if host != "" && net.ParseIP(host) == nil && !validHostName(host) {
		return fmt.Errorf("%w: address %q: host %q is neither an IP address nor a host name (e.g. 127.0.0.1:9090, localhost:9090)", ErrConfig, c.Addr, host)
	}
	for _, d := range []time.Duration{c.ReadHeaderTimeout, c.ReadTimeout, c.WriteTimeout, c.IdleTimeout, c.ShutdownTimeout} {
		if d < 0 {
			return fmt.Errorf("%w: timeout %v is negative (0 takes the default)", ErrConfig, d)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&c.ReadTimeout, DefaultReadTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	def(&c.ShutdownTimeout, DefaultShutdownTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// validHostName reports whether h is a DNS host name: dot-separated labels of letters, digits
// and hyphens, 1-63 bytes each, at most 253 bytes in all.
func validHostName(h string) bool {
	if len(h) > 253 {
		return false
	}
	label := 0
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
		case c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			label++
			if label > 63 {
				return false
			}
		default:
			return false
		}
	}
	return label > 0
}

// Server is a listener bound to its address and the mux its features register on. Handle is
// safe for concurrent use, also while serving; the other methods are called once each.
type Server struct {
	cfg Config
	ln  net.Listener
	mux *http.ServeMux
	srv *http.Server
}

// Listen validates cfg and binds its address. Errors: ErrConfig's, or the listen error (the
// port is in use, the host is not an address of this machine), naming the address.
func Listen(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("web: listening on %s: %w (is another process using the port?)", cfg.Addr, err)
	}
	mux := http.NewServeMux()
	srv := &http.Server{Handler: cleanPaths(mux), ReadHeaderTimeout: cfg.ReadHeaderTimeout, ReadTimeout: cfg.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout,
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
	return &Server{cfg: cfg, ln: ln, mux: mux, srv: srv}, nil
}

// Addr is the address the server listens on (with the port chosen for port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// cleanPaths answers a request whose path is not clean ("..", ".", "//" segments) with 400 and a
// JSON error, instead of http.ServeMux's redirect to the cleaned path: a redirect (307 keeps
// the method and body) would have a client that follows it send a mutating request to another
// path than the one it named, and it comes before any authentication.
func cleanPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "" || p[0] != '/' || path.Clean(p) != p && path.Clean(p)+"/" != p {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"the path is not clean (it holds '.', '..' or an empty segment): send the path without them"}`+"\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Handle registers h for pattern (http.ServeMux patterns, e.g. "GET /metrics"). It panics on a
// pattern registered twice, as http.ServeMux does. Paths nobody registered answer 404.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Serve serves until ctx ends, then shuts down: it stops accepting, waits up to
// ShutdownTimeout for requests in progress, then closes the rest. It returns nil after a
// shutdown, or the error that stopped serving before.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("web: serving on %s: %w", s.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		s.cfg.Logger.Warn("HTTP listener: requests still running at shutdown were cut", "addr", s.Addr(), "err", err)
		s.srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("web: serving on %s: %w", s.Addr(), err)
	}
	return nil
}

// Close releases the listener of a Server that is not serving (a start-up step failed after
// Listen). After Serve it does nothing.
func (s *Server) Close() error {
	err := s.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
