//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// setChildAttrs makes a worker process die with its launcher, so a killed
// launcher leaves nothing behind.
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
