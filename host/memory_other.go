//go:build !linux

package host

// hostMemory is nil outside Linux: guest memories are wazero's default, Go slices grown by
// copying and freed by the GC (see memory.go).
var hostMemory memorySys
