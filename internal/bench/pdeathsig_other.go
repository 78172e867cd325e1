//go:build !linux

package bench

import "os/exec"

// dieWithParent does nothing outside Linux: a kill -9 of `bench sustained` leaves its processes.
func dieWithParent(*exec.Cmd) {}
