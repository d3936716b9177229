//go:build !linux

package main

import "testing"

func mountTmpfs(t *testing.T, _, _ string) {
	t.Skip("full-disk cases mount a tmpfs, which needs Linux")
}
