package testenv

import "syscall"

// sysProcAttr kills a test's process when the test binary dies, even when it
// dies without running its cleanups (a panic, a timeout).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
