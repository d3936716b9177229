//go:build linux

package launch

import (
	"os/exec"
	"syscall"
)

// setChildAttrs makes a worker process end with its launcher, so a killed
// launcher leaves nothing behind: an env or policy worker is killed, a
// learner (saves) is sent SIGHUP, which `herd worker` takes as Ctrl-C (it
// saves the run as interrupted) but never as a second, exit-at-once
// signal: it comes once per thread of the dying launcher. It also puts the worker in a process group of its own: a
// Ctrl-C in the terminal then reaches the launcher alone, which stops each
// worker once (a worker that got the terminal's SIGINT and then the
// launcher's SIGTERM would take the second signal as "exit at once" and
// save nothing).
func setChildAttrs(cmd *exec.Cmd, saves bool) {
	sig := syscall.SIGKILL
	if saves {
		sig = syscall.SIGHUP
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: sig, Setpgid: true}
}
