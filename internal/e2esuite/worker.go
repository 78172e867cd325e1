package e2esuite

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/projection"
)

// Spec says how to start a worker.
type Spec struct {
	Handler string // testwasm module name; default flightdelays-as
	// HandlerPath is a module file to run instead of Handler (e.g. hostile.go's WAT module).
	HandlerPath string
	Flags       []string // more `projhost run` flags
	// Store replaces the store flags (e.g. through a proxy); nil: the case's.
	Store []string
	// Wrapper is a command line that runs the worker (e.g. unshare ... --fork); nil: none.
	Wrapper []string
}

// Worker is one `projhost run` process with its trace file.
type Worker struct {
	ID    string
	Trace string // the --trace file
	cmd   *exec.Cmd
	done  chan struct{}
	err   error // Wait's, once done is closed

	mu          sync.Mutex
	stderr      bytes.Buffer // the last stderrKeep to 2*stderrKeep bytes of stdout and stderr
	stderrBytes int64        // every byte written
	killed      bool
}

// stderrKeep bounds what a Worker keeps of its output: a worker flooding its log (hostile.go)
// must not flood the test process too. Only the tail is ever printed.
const stderrKeep = 1 << 20

type lockedWriter struct{ w *Worker }

func (l lockedWriter) Write(p []byte) (int, error) {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	l.w.stderrBytes += int64(len(p))
	if l.w.stderr.Len()+len(p) > 2*stderrKeep {
		keep := l.w.stderr.Bytes()
		keep = keep[max(0, len(keep)-stderrKeep):]
		l.w.stderr = *bytes.NewBuffer(append([]byte(nil), keep...))
	}
	return l.w.stderr.Write(p)
}

// Stderr is the tail of what the worker wrote (at least its last MiB; printed when a case
// fails; never asserted on).
func (w *Worker) Stderr() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stderr.String()
}

// OutputBytes is how many bytes the worker wrote to stdout and stderr (its log) so far.
func (w *Worker) OutputBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stderrBytes
}

// Start starts `projhost run` as worker id, with the case's projection, journal and store and
// a trace file of its own (a worker started again under the same id gets a new one).
func (e *Env) Start(id string, spec Spec) *Worker {
	e.t.Helper()
	h := spec.Handler
	if h == "" {
		h = testwasm.FlightDelaysAS
	}
	st := spec.Store
	if st == nil {
		st = e.Store.Flags()
	}
	e.mu.Lock()
	w := &Worker{ID: id, Trace: e.filepathIn(fmt.Sprintf("trace-%s-%d.jsonl", id, len(e.workers))), done: make(chan struct{})}
	e.workers = append(e.workers, w)
	e.mu.Unlock()
	hp := spec.HandlerPath
	if hp == "" {
		hp = testwasm.Path(e.t, h)
	}
	args := append([]string{"run", "--worker-id", id, "--name", Projection, "--handler", hp,
		"--trace", w.Trace}, e.stream.flags()...)
	args = append(args, st...)
	args = append(args, e.Store.ModuleFlags()...)
	args = append(args, spec.Flags...)
	argv := append(slices.Clone(spec.Wrapper), e.bin)
	argv = append(argv, args...)
	w.cmd = exec.Command(argv[0], argv[1:]...)
	w.cmd.Stdout, w.cmd.Stderr = lockedWriter{w}, lockedWriter{w}
	if err := w.cmd.Start(); err != nil {
		e.t.Fatalf("starting worker %s: %v", id, err)
	}
	go func() { w.err = w.cmd.Wait(); close(w.done) }()
	return w
}

// Wait waits for the worker to exit (at most d: a guard against a hang) and returns its error.
func (w *Worker) Wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-w.done:
		return w.err
	case <-time.After(d):
		t.Fatalf("worker %s did not exit within %s", w.ID, d)
		return nil
	}
}

// Stop stops the worker gracefully (SIGTERM) and requires exit status 0.
func (w *Worker) Stop(t *testing.T) {
	t.Helper()
	signal(t, w, syscall.SIGTERM)
	if err := w.Wait(t, time.Minute); err != nil {
		t.Fatalf("worker %s stopped with %v", w.ID, err)
	}
}

// Kill kills the worker with SIGKILL and waits for it.
func (w *Worker) Kill(t *testing.T) {
	t.Helper()
	w.kill()
	<-w.done
}

func (w *Worker) kill() {
	if w.cmd == nil || w.cmd.Process == nil {
		return // never started (Start failed before the process ran)
	}
	select {
	case <-w.done:
		return
	default:
	}
	w.mu.Lock()
	w.killed = true
	w.mu.Unlock()
	_ = w.cmd.Process.Signal(syscall.SIGCONT)
	_ = w.cmd.Process.Kill()
	<-w.done
}

// Killed reports whether the worker was killed (its trace may end anywhere).
func (w *Worker) Killed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.killed
}

func (w *Worker) state() string {
	select {
	case <-w.done:
		if w.Killed() {
			return "killed"
		}
		return fmt.Sprintf("exited: %v", w.err)
	default:
		return "running"
	}
}

// Records reads the worker's trace so far. A killed worker's last line may be cut short; it is
// ignored.
func (w *Worker) Records(t *testing.T) []projection.TraceRecord {
	t.Helper()
	b, err := os.ReadFile(w.Trace)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading the trace of %s: %v", w.ID, err)
	}
	var out []projection.TraceRecord
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r projection.TraceRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			if !bytes.HasSuffix(b, []byte("\n")) && len(sc.Bytes()) > 0 && bytes.HasSuffix(b, sc.Bytes()) {
				break // a line cut short: the process died while writing it (or is writing it)
			}
			t.Fatalf("trace of %s: line %q: %v", w.ID, sc.Bytes(), err)
		}
		out = append(out, r)
	}
	return out
}

// Where selects trace records.
func Where(rs []projection.TraceRecord, keep func(projection.TraceRecord) bool) []projection.TraceRecord {
	var out []projection.TraceRecord
	for _, r := range rs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// Is selects records of event ev (and, for "lease", of kind kind when given).
func Is(ev string, kind ...string) func(projection.TraceRecord) bool {
	return func(r projection.TraceRecord) bool {
		return r.Event == ev && (len(kind) == 0 || slices.Contains(kind, r.Kind))
	}
}
