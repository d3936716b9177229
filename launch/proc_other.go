//go:build !linux

package launch

import "os/exec"

// setChildAttrs has no parent-death signal outside Linux; workers still
// exit when the launcher's registration expires (a learner then saves the
// run as interrupted). Workers share the launcher's process group there,
// so a terminal's Ctrl-C reaches them too.
func setChildAttrs(*exec.Cmd, bool) {}
