package host

import (
	"context"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
)

// interrupter enforces the batch deadline of an instrumented module (instrument.go): while armed,
// a timer (none for a trusted module) and the caller's context set the instance's
// interruptExport global, which makes the guest trap within looprewrite.Period checks (loop
// headers and entries of calling functions), and make memory.grow fail (memory.go).
// One per Handler; its methods are called with the Handler's mutex held, except fire, which runs
// on timer and context goroutines.
type interrupter struct {
	mu      sync.Mutex
	flag    api.MutableGlobal // the current instance's global; nil without an instance
	armed   bool
	fired   bool
	timed   bool // the current call has a deadline (the timer runs)
	timer   *time.Timer
	fireFn  func()      // fire, for context.AfterFunc
	timerFn func()      // timerFired, the timer's function
	stop    func() bool // context.AfterFunc's stop of the current call, nil when none

	deadline time.Time // when the current call's guest time runs out (moved by pauses)
	paused   time.Time // start of the current pause; zero when running
	// idle: the timer went off during a pause and is not set; resume sets it again.
	idle bool
}

// arm starts the deadline d of one call (none when d <= 0: trusted modules) and watches ctx.
func (it *interrupter) arm(ctx context.Context, d time.Duration) {
	it.mu.Lock()
	it.armed, it.fired, it.timed, it.idle = true, false, d > 0, false
	it.deadline, it.paused = time.Now().Add(d), time.Time{}
	it.mu.Unlock()
	if it.fireFn == nil {
		it.fireFn, it.timerFn = it.fire, it.timerFired
	}
	switch {
	case d <= 0:
	case it.timer == nil:
		it.timer = time.AfterFunc(d, it.timerFn)
	default:
		it.timer.Reset(d)
	}
	if ctx.Done() != nil {
		it.stop = context.AfterFunc(ctx, it.fireFn)
	}
}

// pause stops the deadline clock while the host works for the guest (a read-model read);
// resume restarts it with the paused time added. Both are no-ops when no call is armed or the
// call has no deadline (trusted modules, or modules under wazero's own deadline, whose clock
// cannot be paused). They read the clock and leave the timer alone (a read is often shorter
// than stopping and setting a timer): when the timer goes off, timerFired looks at the moved
// deadline.
func (it *interrupter) pause() {
	it.mu.Lock()
	if it.armed && !it.fired && it.timed && it.paused.IsZero() {
		it.paused = time.Now()
	}
	it.mu.Unlock()
}

func (it *interrupter) resume() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.paused.IsZero() {
		return
	}
	now := time.Now()
	it.deadline = it.deadline.Add(now.Sub(it.paused))
	it.paused = time.Time{}
	if it.idle && it.armed && !it.fired {
		it.idle = false
		it.timer.Reset(it.deadline.Sub(now))
	}
}

// timerFired is the deadline timer's function: it interrupts the guest when the current call's
// deadline has passed. Pauses move the deadline without moving the timer, so it sets the timer
// again for the time left, or, during a pause, leaves that to resume. A timer of an earlier
// call that fires late finds the new call's deadline ahead and only sets the timer again.
func (it *interrupter) timerFired() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if !it.armed || it.fired || !it.timed {
		return
	}
	if !it.paused.IsZero() {
		it.idle = true
		return
	}
	if left := time.Until(it.deadline); left > 0 {
		it.timer.Reset(left)
		return
	}
	it.fireLocked()
}

// interrupted reports whether the current call's deadline passed or its context ended.
func (it *interrupter) interrupted() bool {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.armed && it.fired
}

// fire interrupts the guest if a call is armed (the context ended).
func (it *interrupter) fire() {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.fireLocked()
}

func (it *interrupter) fireLocked() {
	if !it.armed {
		return
	}
	it.fired = true
	if it.flag != nil {
		it.flag.Set(1)
	}
}

// attach makes flag (nil: none) the global to set; when the deadline already passed, it is set
// at once.
func (it *interrupter) attach(flag api.MutableGlobal) {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.flag = flag
	if flag != nil && it.fired {
		flag.Set(1)
	}
}

// disarm ends the call and reports whether the deadline passed or the context was done during
// it; the global is cleared again, so an instance that returned in time despite it stays usable.
// Calling it again returns false.
func (it *interrupter) disarm() (fired bool) {
	if it.timer != nil {
		it.timer.Stop()
	}
	if it.stop != nil {
		it.stop()
		it.stop = nil
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	fired = it.fired
	it.armed, it.fired, it.paused, it.idle = false, false, time.Time{}, false
	if fired && it.flag != nil {
		it.flag.Set(0)
	}
	return fired
}
