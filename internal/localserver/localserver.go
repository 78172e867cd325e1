// Package localserver starts the local AWS stand-ins of tools/ (tools/dynalite,
// tools/kinesis-local, tools/s3rver) for a test package: the server's start.sh on a free
// loopback port, its pid file in a temporary directory, and a stop function (Server); Harness
// picks a running server from the environment or starts one for the package's tests.
// internal/dynamotest, internal/kinesistest and internal/s3test are built on it.
package localserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server names one launcher folder of tools/.
type Server struct {
	// Tool is the folder under tools/ holding start.sh PORT and stop.sh PORT, e.g. "dynalite".
	Tool string
	// PidEnv is the environment variable through which both scripts take the pid file's path,
	// e.g. "DYNALITE_PIDFILE".
	PidEnv string
	// EndpointEnv is the variable that names an already running server instead; only used in
	// error messages here.
	EndpointEnv string
}

// StartTimeout bounds one start.sh run, including its `npm ci` on a first use.
const StartTimeout = 3 * time.Minute

// Start runs tools/<Tool>/start.sh on a free loopback port, up to 3 times (another process may
// take the port before the server binds it), and returns the endpoint URL it printed and a
// function that stops the server and removes its pid file's directory. The tools/ folder is looked
// for in the working directory and its parents (a test runs in its package's folder). Errors:
// no tools/<Tool>/start.sh above the working directory, or every start failed (with the script's
// stderr).
func (s Server) Start() (endpoint string, stop func(), err error) {
	root, err := repoRoot(s.Tool)
	if err != nil {
		return "", nil, fmt.Errorf("%w (set %s to use a running server)", err, s.EndpointEnv)
	}
	tools := filepath.Join(root, "tools", s.Tool)
	tmp, err := os.MkdirTemp("", s.Tool+"-")
	if err != nil {
		return "", nil, fmt.Errorf("temp dir for the %s pid file: %w", s.Tool, err)
	}
	pidEnv := s.PidEnv + "=" + filepath.Join(tmp, s.Tool+".pid")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(tmp)
			return "", nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		cmd := exec.CommandContext(ctx, filepath.Join(tools, "start.sh"), port)
		cmd.Env = append(os.Environ(), pidEnv)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		cancel()
		if err != nil {
			lastErr = fmt.Errorf("start %s/start.sh %s: %w: %s (set %s to use a running server)",
				tools, port, err, strings.TrimSpace(stderr.String()), s.EndpointEnv)
			continue
		}
		return strings.TrimSpace(string(out)), func() {
			c := exec.Command(filepath.Join(tools, "stop.sh"), port)
			c.Env = append(os.Environ(), pidEnv)
			if out, err := c.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "localserver: stop %s: %v: %s\n", s.Tool, err, out)
			}
			os.RemoveAll(tmp)
		}, nil
	}
	os.RemoveAll(tmp)
	return "", nil, lastErr
}

func repoRoot(tool string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", tool, "start.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("tools/%s/start.sh not found above the working directory", tool)
		}
		dir = parent
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port), nil
}

// Harness gives a test package one server: the one at $EndpointEnv when set, else one started
// for the package (Start) by Run and stopped after the tests. Its methods are safe for
// concurrent use.
type Harness struct {
	// Name prefixes messages, e.g. "dynamotest".
	Name   string
	Server Server

	mu         sync.Mutex
	mainCalled bool
	endpoint   string // "" = no server
	skipReason string
}

// Run finds or starts the server, runs the tests, stops a server it started, and returns the
// tests' exit code. When no server can be had, tests calling Endpoint are skipped — unless
// CI=true, where Run returns 1 without running them.
func (h *Harness) Run(m *testing.M) int { return h.RunFunc(m.Run) }

// RunFunc is Run around run (m.Run, or another harness's Run of it: one TestMain with two
// servers).
func (h *Harness) RunFunc(run func() int) int {
	stop, err := h.setup()
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "%s: %v (CI=true: failing instead of skipping)\n", h.Name, err)
			return 1
		}
		h.skipReason = err.Error()
	}
	code := run()
	if stop != nil {
		stop()
	}
	return code
}

func (h *Harness) setup() (stop func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mainCalled = true
	if ep := os.Getenv(h.Server.EndpointEnv); ep != "" {
		h.endpoint = ep
		return nil, nil
	}
	h.endpoint, stop, err = h.Server.Start()
	return stop, err
}

// Endpoint returns the server's endpoint URL, or skips t when there is none. It fails t when
// Run was not called (the package's TestMain must call it).
func (h *Harness) Endpoint(t testing.TB) string {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.mainCalled {
		t.Fatalf("%s: call %s.Main(m) from the package's TestMain first", h.Name, h.Name)
	}
	if h.endpoint == "" {
		t.Skipf("%s: no local %s server: %s", h.Name, h.Server.Tool, h.skipReason)
	}
	return h.endpoint
}
