//go:build linux

package host

import "syscall"

// mmapSys reserves a linear memory's whole maximum as inaccessible address space and makes
// pages accessible as the guest grows (see memory.go).
type mmapSys struct{}

// hostMemory is the allocator's operating system side; nil would mean wazero's default.
var hostMemory memorySys = mmapSys{}

func (mmapSys) reserve(bytes uint64) ([]byte, error) {
	if bytes == 0 {
		return []byte{}, nil
	}
	// PROT_NONE and MAP_NORESERVE: address space only, neither resident nor charged against
	// the commit limit until mprotect makes pages accessible.
	return syscall.Mmap(-1, 0, int(bytes), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
}

func (mmapSys) commit(buf []byte, from, to uint64) error {
	// from and to are multiples of the 64 KiB wasm page, so of the OS page size too.
	return syscall.Mprotect(buf[from:to], syscall.PROT_READ|syscall.PROT_WRITE)
}

func (mmapSys) release(buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	return syscall.Munmap(buf)
}
