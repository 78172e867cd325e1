package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/web"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		addr string
		want string // "" valid, else a part of the error
	}{
		{"127.0.0.1:9090", ""},
		{":9090", ""},
		{"localhost:0", ""},
		{"[::1]:65535", ""},
		{"metrics-host.internal:80", ""},
		{"", "is not HOST:PORT"},
		{"9090", "is not HOST:PORT"},
		{"127.0.0.1", "is not HOST:PORT"},
		{"127.0.0.1:", `port "" is not a number`},
		{"127.0.0.1:http", `port "http" is not a number`},
		{"127.0.0.1:65536", `port "65536" is not a number`},
		{"127.0.0.1:-1", `port "-1" is not a number`},
		{"127.0.0.1:+80", `port "+80" is not a number`},
		{"127.0.0.1:080", `port "080" is not a number`},
		{"bad host:80", `host "bad host" is neither`},
		{"a..b:80", `host "a..b" is neither`},
		{"http://127.0.0.1:9090", "is not HOST:PORT"},
	}
	for _, c := range cases {
		t.Run(c.addr, func(t *testing.T) {
			cfg := web.Config{Addr: c.addr}
			err := cfg.Validate()
			if c.want == "" {
				require.NoError(t, err)
				require.Equal(t, web.DefaultReadHeaderTimeout, cfg.ReadHeaderTimeout)
				require.Equal(t, web.DefaultWriteTimeout, cfg.WriteTimeout)
				require.Equal(t, web.DefaultShutdownTimeout, cfg.ShutdownTimeout)
				return
			}
			require.ErrorIs(t, err, web.ErrConfig)
			require.ErrorContains(t, err, c.want)
		})
	}
	neg := web.Config{Addr: ":1", WriteTimeout: -time.Second}
	require.ErrorContains(t, neg.Validate(), "timeout -1s is negative")
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// A server on a free port answers its routes (404 elsewhere), refuses a second listener on its
// port, and stops listening when Serve's context ends.
func TestServe(t *testing.T) {
	s, err := web.Listen(web.Config{Addr: "127.0.0.1:0"})
	require.NoError(t, err)
	s.Handle("GET /hello", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hi") }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()

	base := "http://" + s.Addr()
	code, body := get(t, base+"/hello")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "hi", body)
	code, _ = get(t, base+"/")
	require.Equal(t, http.StatusNotFound, code)
	// Unclean paths: a JSON 400, not http.ServeMux's redirect to the cleaned path.
	for _, p := range []string{"/x/../hello", "//hello", "/./hello", "/hello/.", "/a//b"} {
		code, body := get(t, base+p)
		require.Equal(t, http.StatusBadRequest, code, p)
		require.Contains(t, body, `"error":"the path is not clean`, p)
	}

	_, err = web.Listen(web.Config{Addr: s.Addr()})
	require.ErrorContains(t, err, "listening on "+s.Addr())
	require.ErrorContains(t, err, "address already in use")

	cancel()
	require.NoError(t, <-done)
	_, err = http.Get(base + "/hello")
	require.Error(t, err, "nothing listens after the shutdown")
	require.NoError(t, s.Close(), "Close after Serve does nothing")
}

// Listen refuses a bad address before binding anything.
func TestListenBadAddress(t *testing.T) {
	_, err := web.Listen(web.Config{Addr: "127.0.0.1:port"})
	require.ErrorIs(t, err, web.ErrConfig)
	require.True(t, strings.Contains(err.Error(), "e.g. 127.0.0.1:9090"), err.Error())
}

// A Server that never served releases its port on Close.
func TestCloseUnserved(t *testing.T) {
	s, err := web.Listen(web.Config{Addr: "127.0.0.1:0"})
	require.NoError(t, err)
	addr := s.Addr()
	require.NoError(t, s.Close())
	s2, err := web.Listen(web.Config{Addr: addr})
	require.NoError(t, err, "the port is free again")
	require.NoError(t, s2.Close())
}
