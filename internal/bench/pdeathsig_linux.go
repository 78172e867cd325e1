package bench

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel send SIGTERM to cmd's process when the process that started it
// dies (a kill -9 of `bench sustained`), so that no worker or append process outlives it.
// (Linux's PR_SET_PDEATHSIG fires when the starting OS thread exits; Go keeps its threads for
// the life of the process unless a goroutine locked to one exits, which bench never does.)
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
