//go:build !linux

package main

import "os/exec"

// setChildAttrs has no parent-death signal outside Linux; workers still
// exit when the launcher's registration expires.
func setChildAttrs(*exec.Cmd) {}
