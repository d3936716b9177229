//go:build !linux

package envsvc

import "testing"

// shmPrefix: shm:// needs Linux.
func shmPrefix(testing.TB) string { return "" }
