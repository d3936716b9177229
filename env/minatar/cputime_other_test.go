//go:build !unix

package minatar

import "testing"

func reportCPU(*testing.B) (stop func()) { return func() {} }
