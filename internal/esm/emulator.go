package esm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BuildEmulator returns the path of the AWS Lambda Runtime Interface Emulator (aws-lambda-rie)
// built by tools/lambda-rie/build.sh of the repository at root (from the Go module proxy, the
// version its go.mod pins). The binary is kept under the OS temp directory, named by the hash
// of that go.mod and go.sum, and built only when missing (a build goes to a temporary file,
// renamed into place: concurrent callers are safe).
func BuildEmulator(root string) (string, error) {
	dir := filepath.Join(root, "tools", "lambda-rie")
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "build.sh"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("esm: the emulator's build: %w", err)
		}
		h.Write(b)
	}
	out := filepath.Join(os.TempDir(), "projhost-lambda-rie-"+hex.EncodeToString(h.Sum(nil))[:16], "aws-lambda-rie")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	cmd := exec.Command(filepath.Join(dir, "build.sh"), tmp)
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("esm: build the emulator (tools/lambda-rie/build.sh): %w: %s", err, strings.TrimSpace(string(b)))
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	return out, nil
}

// Emulator is one running aws-lambda-rie with its function (bootstrap): one execution
// environment, one invocation at a time. The emulator starts the bootstrap at the first
// invocation (the init phase, then the invoke), and again at the next invocation after it
// exited or was killed.
type Emulator struct {
	// URL is the invoke endpoint (POST an event).
	URL string
	// RuntimeAPI is the Runtime API's address the bootstrap talks to (AWS_LAMBDA_RUNTIME_API).
	RuntimeAPI string

	cmd    *exec.Cmd
	client *http.Client
	exited chan struct{}
}

// EmulatorConfig configures StartEmulator.
type EmulatorConfig struct {
	// RIE is the emulator's binary (BuildEmulator); Bootstrap the function's.
	RIE, Bootstrap string
	// Env is the environment of the emulator, which passes it on to the function (its
	// configuration, AWS_LAMBDA_FUNCTION_TIMEOUT in seconds: default 300).
	Env []string
	// Output receives the emulator's and the function's stdout and stderr (nil: discarded).
	Output io.Writer
}

// StartEmulator starts the emulator on two free 127.0.0.1 ports and waits until it accepts
// connections. Stop it with Stop.
func StartEmulator(cfg EmulatorConfig) (*Emulator, error) {
	var last error
	for try := 0; try < 3; try++ {
		e, err := startEmulator(cfg)
		if err == nil {
			return e, nil
		}
		last = err
	}
	return nil, last
}

func startEmulator(cfg EmulatorConfig) (*Emulator, error) {
	invoke, err := freeAddr()
	if err != nil {
		return nil, err
	}
	api, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cfg.RIE, "--runtime-interface-emulator-address", invoke, "--runtime-api-address", api, cfg.Bootstrap)
	cmd.Dir = filepath.Dir(cfg.Bootstrap)
	cmd.Env = cfg.Env
	cmd.Stdout, cmd.Stderr = cfg.Output, cfg.Output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Stop ends the function too
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("esm: start the emulator: %w", err)
	}
	e := &Emulator{URL: "http://" + invoke + "/2015-03-31/functions/function/invocations", RuntimeAPI: api, cmd: cmd,
		client: &http.Client{}, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(e.exited) }()
	for deadline := time.Now().Add(15 * time.Second); ; {
		select {
		case <-e.exited:
			return nil, fmt.Errorf("esm: the emulator exited at start (%s)", cmd.ProcessState)
		default:
		}
		c, err := net.DialTimeout("tcp", invoke, time.Second)
		if err == nil {
			c.Close()
			return e, nil
		}
		if time.Now().After(deadline) {
			e.Stop()
			return nil, fmt.Errorf("esm: the emulator does not listen on %s: %w", invoke, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Invoke invokes the function with event (InvokeURL). shardID is not used.
func (e *Emulator) Invoke(ctx context.Context, _ string, event []byte) (Result, error) {
	return InvokeURL(ctx, e.client, e.URL, event)
}

// Pid is the emulator's process id.
func (e *Emulator) Pid() int { return e.cmd.Process.Pid }

// FunctionPid returns the process id of the running bootstrap: the emulator's child (from
// /proc/PID/task/*/children; Linux). Errors: none running.
func (e *Emulator) FunctionPid() (int, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", e.Pid()))
	if err != nil {
		return 0, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				return pid, nil
			}
		}
	}
	return 0, errors.New("esm: the emulator runs no function process")
}

// Stop kills the emulator and its function (its process group) and waits for it.
func (e *Emulator) Stop() {
	_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	<-e.exited
}

// PerShard routes each shard's invocations to its own Invoker (an Emulator per shard: one
// invocation at a time each). A shard without one is an error.
type PerShard map[string]Invoker

// Invoke invokes shardID's Invoker.
func (p PerShard) Invoke(ctx context.Context, shardID string, event []byte) (Result, error) {
	inv, ok := p[shardID]
	if !ok {
		return Result{}, fmt.Errorf("esm: no invoker for shard %s", shardID)
	}
	return inv.Invoke(ctx, shardID, event)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("esm: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
