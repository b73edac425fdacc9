//go:build !linux

package testenv

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
