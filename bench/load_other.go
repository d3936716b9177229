//go:build !linux

package bench

import (
	"errors"
	"syscall"
)

func loadAttr() *syscall.SysProcAttr { return nil }

func pinSelf([]int) (func() error, error) {
	return nil, errors.New("--pin: only on Linux (use your OS's affinity tool)")
}

func unpinSelf() error { return nil }
