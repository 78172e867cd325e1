package host

import (
	"sync"
)

// Guest linear memory (RATIONALE: "Guest memory is reserved, not reallocated").
//
// wazero's default backs a linear memory with a Go slice and grows it with append: every
// memory.grow past the capacity allocates a new, larger slice (zeroed, so resident at once) and
// copies the old one, which stays resident until the Go GC frees it, and the GC lets the heap
// grow to twice the live size before it does. A guest growing to a 1 GiB cap in 1 MiB steps made
// the host's RSS reach 4.1 GB (3.5-4.7 GB in issue 8), and one such batch took 3-5 s here (19 s
// in the issue). On Linux the host gives wazero its own allocator instead (memory_linux.go):
// the whole cap is reserved once as address space (mmap PROT_NONE: no RSS, no commit charge),
// memory.grow makes the next pages accessible (mprotect: no copy, no zeroing, pages become
// resident only when the guest touches them), and closing the instance unmaps everything at once
// (munmap) instead of leaving it to the GC. Elsewhere wazero's default stays (memory_other.go).

// linearMemory is one instance's memory as the host allocator manages it. Its methods are safe
// for concurrent use: Reallocate runs on the guest's goroutine, Free on whichever closes the
// instance (the Handler, or wazero when the runtime is closed), pin and unpin on the Handler's.
type linearMemory struct {
	mu      sync.Mutex
	buf     []byte // the whole reservation (len = reserved bytes); nil once unmapped
	size    uint64 // bytes accessible to the guest
	pins    int    // calls of the Handler in progress (see pin)
	freed   bool   // Free was called
	refused bool   // a growth was refused because the call was interrupted (takeRefused)
	intr    *interrupter
	sys     memorySys
}

// memorySys is the operating system side of a linearMemory (memory_linux.go).
type memorySys interface {
	reserve(bytes uint64) ([]byte, error)
	commit(buf []byte, from, to uint64) error
	release(buf []byte) error
}

// newLinearMemory reserves max bytes (wazero passes the memory's maximum, at most the runtime's
// cap), pinned once for the call that instantiates it. Errors: the reservation failed (address
// space limits such as ulimit -v).
func newLinearMemory(sys memorySys, max uint64, intr *interrupter) (*linearMemory, error) {
	buf, err := sys.reserve(max)
	if err != nil {
		return nil, err
	}
	return &linearMemory{buf: buf, sys: sys, intr: intr, pins: 1}, nil
}

// Reallocate implements experimental.LinearMemory: it makes the first size bytes accessible and
// returns them (same address every time: the memory never moves). It returns nil (memory.grow
// fails in the guest) past the reservation, when the pages cannot be committed, after Free, and
// once the current call's deadline passed or its context ended: a guest growing its memory in a
// loop is then refused at once instead of running on until its next interrupt check (a loop of
// fewer than looprewrite.Period iterations never meets one), and the call fails with the
// deadline (takeRefused) even if the guest returns.
func (m *linearMemory) Reallocate(size uint64) []byte {
	interrupted := m.intr != nil && m.intr.interrupted()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.freed || size > uint64(len(m.buf)) {
		return nil
	}
	if size > m.size && interrupted {
		m.refused = true
		return nil
	}
	if size > m.size {
		if m.sys.commit(m.buf, m.size, size) != nil { // e.g. ENOMEM under strict overcommit
			return nil
		}
		m.size = size
	}
	return m.buf[:size:size]
}

// Free implements experimental.LinearMemory: wazero calls it when the instance is closed. The
// memory is unmapped at once, unless a Handler call is in progress (pinned): then at its unpin,
// so that no host code still holding a view into the memory ever touches unmapped pages.
func (m *linearMemory) Free() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.freed = true
	if m.pins == 0 {
		m.unmapLocked()
	}
}

// pin marks a Handler call in progress; it reports false when the memory was already freed
// (the instance was closed under the Handler, e.g. by Runtime.Close).
func (m *linearMemory) pin() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pins++
	return !m.freed
}

// unpin ends what pin began and unmaps the memory if it was freed meanwhile.
func (m *linearMemory) unpin() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pins--
	if m.pins == 0 && m.freed {
		m.unmapLocked()
	}
}

func (m *linearMemory) unmapLocked() {
	if m.buf == nil {
		return
	}
	_ = m.sys.release(m.buf) // fails only for a range that is not a mapping of ours
	m.buf, m.size = nil, 0
}

// takeRefused reports whether a growth was refused because the call was interrupted since the
// last takeRefused.
func (m *linearMemory) takeRefused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.refused
	m.refused = false
	return r
}

// committed returns the bytes made accessible to the guest (0 once unmapped).
func (m *linearMemory) committed() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.size
}

// heapMemory is wazero's default behaviour (a Go slice grown by copying, freed by the GC), used
// when a reservation fails.
type heapMemory struct {
	buf []byte
	max uint64
}

func (m *heapMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if n := uint64(len(m.buf)); size > n {
		m.buf = append(m.buf, make([]byte, size-n)...)
	}
	return m.buf[:size]
}

func (m *heapMemory) Free() { m.buf = nil }
