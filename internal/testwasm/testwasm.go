// Package testwasm gives tests the example WebAssembly modules: it builds them with the
// repository's Makefile (build/wasm/<name>.wasm) on first use and returns their paths.
//
// Builds are serialised across parallel test binaries with an exclusive flock(2) on
// build/.lock, so `go test ./...` running many packages at once builds each module once. Make
// rebuilds a module only when its sources changed. Building needs go, make and, for the
// AssemblyScript modules, node and npm (make runs `npm ci` once).
package testwasm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// Names of the example modules Path can build.
const (
	FlightDelaysGo = "flightdelays-go"
	FlightDelaysAS = "flightdelays-as"
	CountGo        = "count-go"
	CountAS        = "count-as"
	// FlightDelaysASTuned is the hand-tuned AssemblyScript flightdelays the example replaced
	// (internal/bench/tuned/flightdelays-as), kept for benchmarks: same documents.
	FlightDelaysASTuned = "flightdelays-as-tuned"
	// FlightDelaysGoLenient is flightdelays built with -tags lenient: it accepts delays and
	// distances given as JSON strings ("17"), which the other builds fail on.
	FlightDelaysGoLenient = "flightdelays-go-lenient"
	// The Go examples built with TinyGo (make tinygo installs it into TinyGoDir; see
	// TinyGoInstalled).
	FlightDelaysTinyGo = "flightdelays-tinygo"
	CountTinyGo        = "count-tinygo"

	// Test modules assembled from internal/testwasm/wat/<name>.wat (node and the wabt npm
	// package):
	// Echo puts, for each event, its data as the document of c/<partition key>.
	Echo = "echo"
	// Fanout puts 100 × (data length) documents {} per event under distinct keys of "f".
	Fanout = "fanout"
	// LogFlood writes 100 × (data length) projhost.log messages and as many stdout lines per
	// event, and no mutations.
	LogFlood = "logflood"
)

var (
	rootOnce sync.Once
	root     string
	rootErr  string
)

// RepoRoot returns the absolute path of the repository root: the nearest directory at or above
// the working directory holding go.mod. It fails tb when there is none.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err.Error()
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				root = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = "no go.mod at or above the working directory"
				return
			}
			dir = parent
		}
	})
	if root == "" {
		tb.Fatalf("testwasm: cannot find the repository root: %s", rootErr)
	}
	return root
}

// TinyGoDir is where `make tinygo` (tools/tinygo/install.sh) installs TinyGo, relative to the
// repository root.
const TinyGoDir = "build/tinygo"

// TinyGoInstalled reports whether TinyGo is installed in TinyGoDir, so that Path can build the
// *TinyGo modules without installing it (which takes Debian packages and a minute or two).
func TinyGoInstalled(tb testing.TB) bool {
	tb.Helper()
	_, err := os.Stat(filepath.Join(RepoRoot(tb), TinyGoDir, "bin", "tinygo"))
	return err == nil
}

// RequireTinyGo skips tb unless TinyGo is installed in TinyGoDir; under CI=true (where .ci/run
// installs it) it fails tb instead.
func RequireTinyGo(tb testing.TB) {
	tb.Helper()
	if TinyGoInstalled(tb) {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("TinyGo is not installed in %s: run make tinygo (.ci/run does)", TinyGoDir)
	}
	tb.Skipf("TinyGo is not installed in %s: make tinygo installs it", TinyGoDir)
}

// TinyGoModules returns names when TinyGo is installed in TinyGoDir, else none; under CI=true it
// fails tb when TinyGo is missing. For lists of modules a test runs on: append(mods,
// TinyGoModules(t, FlightDelaysTinyGo)...).
func TinyGoModules(tb testing.TB, names ...string) []string {
	tb.Helper()
	if TinyGoInstalled(tb) {
		return names
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("TinyGo is not installed in %s: run make tinygo (.ci/run does)", TinyGoDir)
	}
	return nil
}

// Path runs `make -C <repo root> build/wasm/<name>.wasm` (a no-op when the module is up to
// date) and returns the module's absolute path. name is e.g. FlightDelaysGo. It fails tb with
// make's output when the build fails. Safe for concurrent use by tests and test binaries.
func Path(tb testing.TB, name string) string {
	tb.Helper()
	r := RepoRoot(tb)
	target := filepath.Join("build", "wasm", name+".wasm")
	if err := os.MkdirAll(filepath.Join(r, "build"), 0o755); err != nil {
		tb.Fatalf("testwasm: %v", err)
	}
	lock, err := os.OpenFile(filepath.Join(r, "build", ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatalf("testwasm: open build lock: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		tb.Fatalf("testwasm: lock build/.lock: %v", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	cmd := exec.Command("make", "--no-print-directory", "-C", r, target)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("testwasm: make %s failed (%v); output:\n%s", target, err, out.Bytes())
	}
	return filepath.Join(r, target)
}
