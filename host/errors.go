package host

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error a guest causes during Handle is a *HandlerError whose Kind is one
// of ErrHandlerFailed, ErrTrap, ErrExit, ErrDeadline or ErrBadOutput (errors.Is works on the
// *HandlerError directly). Load returns errors wrapping ErrInvalidModule. Errors from Handle that
// are not a *HandlerError are infrastructure errors (the DocReader failed, the caller's context
// was canceled, an event exceeds an ABI limit): they are not the handler's fault and a retry may
// succeed.
var (
	// ErrInvalidModule: the module is not a valid projhost ABI v1 handler (ABI.md §1); the
	// message names what is wrong.
	ErrInvalidModule = errors.New("invalid handler module")
	// ErrHandlerFailed: the guest called projhost.fail (a domain error). The instance is kept.
	ErrHandlerFailed = errors.New("handler failed the batch")
	// ErrTrap: the guest trapped (unreachable, out-of-bounds access, stack overflow, memory
	// growth past the cap followed by a trap, env.abort, a Go guest panic, projhost_alloc
	// returning 0, or an out-of-bounds range passed to a projhost import). The instance is
	// discarded.
	ErrTrap = errors.New("handler trapped")
	// ErrExit: the guest called proc_exit. The instance is discarded. (A Go reactor built with
	// -buildmode=c-shared does not exit when it panics: it prints the panic to stderr and aborts,
	// which is ErrTrap with "the Go guest panicked: panic: ..." in the message; see RATIONALE.md.)
	ErrExit = errors.New("handler exited")
	// ErrDeadline: a handler call did not return within the batch deadline (or returned after
	// the host refused it memory growth past the deadline). The instance is discarded.
	ErrDeadline = errors.New("handler exceeded the batch deadline")
	// ErrBadOutput: the guest returned a malformed or out-of-bounds output (ABI.md §4), or
	// projhost_alloc returned an out-of-bounds buffer. Nothing of the output is applied and the
	// instance is discarded.
	ErrBadOutput = errors.New("handler returned bad output")
	// ErrClosed: the Handler, Module or Runtime was closed.
	ErrClosed = errors.New("host: closed")
)

// HandlerError describes a batch that failed because of the guest. It wraps Kind (one of the
// sentinels above) so callers can use errors.Is for policy and errors.As for details.
type HandlerError struct {
	Module   string // module name given to Load
	Shard    string // shard id of the batch
	FirstSeq string // sequence number of the batch's first event ("" when failing in _initialize)
	LastSeq  string // sequence number of the batch's last event
	Kind     error  // ErrHandlerFailed, ErrTrap, ErrExit, ErrDeadline or ErrBadOutput
	Message  string // what happened and what to do, one line
	// Poisoned is true when the instance was discarded (every kind but ErrHandlerFailed); the next
	// Handle instantiates a fresh one.
	Poisoned bool
	// ExitCode is the proc_exit code for ErrExit, else 0.
	ExitCode uint32
}

func (e *HandlerError) Error() string {
	where := fmt.Sprintf("module %q shard %s", e.Module, e.Shard)
	if e.FirstSeq != "" {
		where += fmt.Sprintf(" events %s..%s", e.FirstSeq, e.LastSeq)
	}
	return fmt.Sprintf("%v (%s): %s", e.Kind, where, e.Message)
}

// Unwrap returns Kind.
func (e *HandlerError) Unwrap() error { return e.Kind }

func invalidModule(name, format string, args ...any) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidModule, name, fmt.Sprintf(format, args...))
}
