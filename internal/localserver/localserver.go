// Package localserver starts the local AWS stand-ins of tools/ (tools/dynalite,
// tools/kinesis-local) for a test package: the server's start.sh on a free loopback port, its pid
// file in a temporary directory, and a stop function. internal/dynamotest and
// internal/kinesistest use it from their Main.
package localserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
