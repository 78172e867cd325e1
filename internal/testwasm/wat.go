package testwasm

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// ErrNoWABT is wrapped by AssembleWAT's error when node or the wabt npm package is missing:
// tests then skip, unless CI=true.
var ErrNoWABT = errors.New("node or the wabt npm package is missing (install node and run npm ci)")

// AssembleWAT assembles WebAssembly text files into outDir/<name>.wasm (name: the file's base
// name without .wat) with host/testdata/wat2wasm.js, which runs the wabt npm package pinned by
// the repository's package.json under node. Errors: wrapping ErrNoWABT when node or wabt is
// missing; else the script's error with its output (one line per failing file).
func AssembleWAT(tb testing.TB, outDir string, files ...string) error {
	tb.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoWABT, err)
	}
	script := filepath.Join(RepoRoot(tb), "host", "testdata", "wat2wasm.js")
	var out bytes.Buffer
	cmd := exec.Command(node, append([]string{script, outDir}, files...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 { // wat2wasm.js: wabt missing
			return fmt.Errorf("%w: %s", ErrNoWABT, bytes.TrimSpace(out.Bytes()))
		}
		return fmt.Errorf("wat2wasm.js: %v: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}
