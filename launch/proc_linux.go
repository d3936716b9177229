//go:build linux

package launch

import (
	"os/exec"
	"syscall"
)

// setChildAttrs makes a worker process die with its launcher, so a killed
// launcher leaves nothing behind, and puts it in a process group of its
// own: a Ctrl-C in the terminal then reaches the launcher alone, which
// stops each worker once (a worker that got the terminal's SIGINT and then
// the launcher's SIGTERM would take the second signal as "exit at once" and
// save nothing).
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
